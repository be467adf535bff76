"""The people directory: every name a person goes by, and the roles they held when (docs/DESIGN.md §9).

A person is ``{"name": "Sarah Chen", "aliases": ["schen", "sarah.chen@acme.com", "Chen, Sarah"],
"roles": [{"role": "CTO", "from": "2023-02-01", "to": "2024-05-31"}]}``: ``aliases`` and
``roles`` are optional; a role's ``from`` and ``to`` are dates (``to`` inclusive, to the end of
that day), either may be missing (held since always, or still held). ``Store.add_people``
commits people as events of the store's access log (op ``"person"``, the checked record as JSON
in its ``note``), so the directory is versioned, crash-safe and exported like the permissions;
an entry for a name already there replaces it whole.

Names are resolved when a store is read, never rewritten in a document: a document keeps its
author as written, and a directory added later applies to every document already there. Each
author label of the store belongs to one person: the directory entry whose name or alias is
that label written in any of the forms :func:`name_key` folds together ("Sarah Chen",
"Chen, Sarah", "sarah.chen@acme.com"), else a person of its own (so "Chen, Sarah" and "Sarah
Chen" are one person even with no directory at all). The tag leg (``tags.NameMatcher``) and the
``authors=`` filter resolve a question's names, aliases and roles to every label of the people
they mean.

Owns the person record's checks (:func:`check_people`, errors that name the field and the
record), the input files (:func:`read_people`: JSON Lines, Parquet or Arrow, or a list of
dicts), the name folding (:func:`words`, :func:`name_key`, :func:`title_words`) and the role periods
(:func:`role_periods`). A leaf but for ``dates``, ``errors`` and ``inputs``.

Never imports: store, searcher, writer, planner, tags, onnxruntime.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any, Iterable

from mempp.storage.analyzer import STOPWORDS

from .dates import to_us
from .errors import ValidationError

MAX_NAME_CHARS = 256  # a name, an alias or a role
MAX_ALIASES = 64
MAX_ROLES = 64
_FIELDS = {"name", "aliases", "roles"}
_ROLE_FIELDS = {"role", "from", "to"}
_WORDS = re.compile(r"[^\W_]+")


def words(text: str) -> tuple[str, ...]:
    """``text``'s words, case-folded (NFKC), a possessive "'s" dropped: how names are compared."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"(?<=[^\W_])['\u2019]s\b", "", text)
    return tuple(_WORDS.findall(text))


def title_words(title: str) -> frozenset[str]:
    """A role's title as compared: its words but stop words (all its words when that leaves none),
    in any order ("the Platform Staff Engineer" is "Staff Engineer, Platform")."""
    ws = words(title)
    return frozenset(w for w in ws if w not in STOPWORDS) or frozenset(ws)


def name_key(name: str) -> tuple[str, ...]:
    """A name's words in the order "first last", whichever way it is written: "Chen, Sarah"
    (one comma) and an email or handle's part before "@" ("sarah.chen@acme.com", "sarah_chen")
    fold to ``("sarah", "chen")``; anything else is :func:`words`."""
    text = unicodedata.normalize("NFKC", name).strip()
    at = text.find("@")
    if at > 0:
        return words(text[:at])
    if text.count(",") == 1:
        last, first = text.split(",")
        if words(first) and words(last):
            return words(first) + words(last)
    return words(text)


def _text(value: Any, field: str, where: Any, key: str | None) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
        raise ValidationError(f"expected a non-empty string of at most {MAX_NAME_CHARS} characters, got {value!r}",
                              field=field, record=where, key=key)
    if not words(value):
        raise ValidationError(f"expected a name with at least one letter or digit, got {value!r}", field=field, record=where, key=key)
    return " ".join(value.split())


def _list(value: Any, field: str, most: int, where: Any, key: str | None) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise ValidationError(f"expected a list, got {type(value).__name__}", field=field, record=where, key=key)
    value = list(value)
    if len(value) > most:
        raise ValidationError(f"expected at most {most} entries, got {len(value)}", field=field, record=where, key=key)
    return value


def check_person(rec: Any, where: Any = None) -> dict[str, Any]:
    """One person as stored: ``{"name", "aliases", "roles"}`` with every name tidied (runs of
    spaces made one) and each role's dates as ISO dates; a bad field raises ``ValidationError``
    naming it and the record (``where``: its index, or ``FILE:LINE``)."""
    if not isinstance(rec, dict):
        raise ValidationError(f"expected an object with 'name', 'aliases' and 'roles', got {type(rec).__name__}", record=where)
    extra = sorted(set(rec) - _FIELDS)
    if extra:
        raise ValidationError(f"unknown field {extra[0]!r} (a person has {', '.join(sorted(_FIELDS))})", field=extra[0], record=where)
    if "name" not in rec:
        raise ValidationError("missing", field="name", record=where)
    name = _text(rec["name"], "name", where, None)
    aliases = sorted({_text(a, f"aliases[{i}]", where, name) for i, a in enumerate(_list(rec.get("aliases"), "aliases", MAX_ALIASES, where, name))}
                     - {name})
    roles = []
    for i, role in enumerate(_list(rec.get("roles"), "roles", MAX_ROLES, where, name)):
        field = f"roles[{i}]"
        if not isinstance(role, dict):
            raise ValidationError(f"expected an object with 'role', 'from' and 'to', got {type(role).__name__}", field=field, record=where, key=name)
        extra = sorted(set(role) - _ROLE_FIELDS)
        if extra:
            raise ValidationError(f"unknown field {extra[0]!r} (a role has role, from, to)", field=f"{field}.{extra[0]}", record=where, key=name)
        title = _text(role.get("role"), f"{field}.role", where, name)
        lo = _when(role.get("from"), f"{field}.from", where, name, False)
        hi = _when(role.get("to"), f"{field}.to", where, name, True)
        if lo is not None and hi is not None and hi < lo:
            raise ValidationError(f"ends before it starts ({role.get('from')} to {role.get('to')})", field=f"{field}.to", record=where, key=name)
        roles.append({"role": title, "from": _iso(role.get("from")), "to": _iso(role.get("to"))})
    return {"name": name, "aliases": aliases, "roles": roles}


def _when(value: Any, field: str, where: Any, key: str | None, end_of_day: bool) -> int | None:
    if value is None:
        return None
    try:
        return to_us(value, end_of_day=end_of_day)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(f"cannot parse {value!r} as an ISO 8601 date ({exc})", field=field, record=where, key=key) from None


def _iso(value: Any) -> str | None:
    """A role's bound as stored: the date as given (a string), or a date object's ISO form."""
    return value if value is None or isinstance(value, str) else value.isoformat()


def check_people(people: Any) -> list[dict[str, Any]]:
    """People given to ``Store.add_people``: a list of records, or a path to a JSON Lines,
    Parquet or Arrow file of them (:func:`read_people`); each checked (:func:`check_person`).
    Two entries for one name are refused."""
    if isinstance(people, (str, Path)):
        return read_people(people)
    if isinstance(people, (dict, bytes)) or not isinstance(people, Iterable):
        raise ValidationError(f"expected a list of people or a file of them, got {type(people).__name__}", field="people")
    return _distinct([check_person(rec, i) for i, rec in enumerate(people)], None)  # a record is named by its index


def read_people(path: str | Path) -> list[dict[str, Any]]:
    """The people of a JSON Lines, Parquet or Arrow file, each checked; an error names ``FILE:LINE`` or ``FILE: row N``."""
    from .inputs import read_records

    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"{path}: no such file", field="people")
    found, where = [], []
    for places, recs in read_records(path):
        for place, rec in zip(places, recs):
            rec = {k: v for k, v in rec.items() if v is not None} if isinstance(rec, dict) else rec
            found.append(check_person(rec, place))
            where.append(place)
    return _distinct(found, where)


def _distinct(people: list[dict], where: list | None) -> list[dict]:
    """``people``, refused when two share a name (``where[i]`` names record ``i``; None: its index)."""
    seen: dict[tuple, int] = {}
    for i, p in enumerate(people):
        k = name_key(p["name"])
        if k in seen:
            raise ValidationError(f"{p['name']!r} is given twice (also record {where[seen[k]] if where else seen[k]})",
                                  field="name", record=where[i] if where else i)
        seen[k] = i
    return people


def person_events(people: list[dict[str, Any]], known: dict[tuple, dict[str, Any]]) -> list[dict[str, Any]]:
    """The access log's events that put ``people`` in a directory holding ``known`` (by
    :func:`name_key`): one per person whose entry is new or changed."""
    return [{"op": "person", "note": json.dumps(p, sort_keys=True)} for p in people if known.get(name_key(p["name"])) != p]


def role_periods(person: dict[str, Any]) -> list[tuple[str, int | None, int | None]]:
    """A person's roles as ``(title, from µs or None, to µs at the end of that day or None)``."""
    return [(r["role"], _when(r["from"], "from", None, None, False), _when(r["to"], "to", None, None, True)) for r in person["roles"]]
