"""The tag leg (docs/DESIGN.md §3.2): which authors a question names, and their candidate documents.

Owns author-name matching (the exact label, the full name, a first or last name, and through the
people directory of ``people.py`` an alias or a role held at the time asked about; docs/DESIGN.md
§9), the resolution of an ``authors=`` filter through it, and the unranked set of candidates
those authors wrote (the planner orders them by BM25, date and ingest order). It must never
import the other legs, fusion, the planner or the store.

Never imports: lexical, vector, vector_batch, fusion, planner, store.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np

from mempp.kernels.masks import keep_codes
from mempp.storage import Snapshot, now_us
from mempp.storage.analyzer import STOPWORDS

from .candidates import rare_ids, code_mask
from .people import name_key, role_periods, title_words, words
from .question_dates import question_periods


ROLE_SLACK = 2  # a role's title words may lie among this many other words of the question


class NameMatcher:
    """Finds the people a question names and returns their author codes (indexes into ``names``).

    A person is named by a full name or alias (as a phrase), by the first or last word of one
    (a single word of at least two letters, not a stop word), or by a role they held at the
    time asked about (``people.py``): every word of its title but stop words, in any order,
    within the title's length plus ``ROLE_SLACK`` words ("the Platform staff engineer" names
    "Staff Engineer, Platform"). Each author label belongs to
    one person (the directory entry it is a form of, else a person of its own), and naming a
    person matches every label of theirs.
    """

    def __init__(self, names: Sequence[str], people: Sequence[dict] = ()) -> None:
        self.names = list(names)
        self.people = people  # the directory's entries, as given (the searcher compares it to rebuild)
        forms: list[set[tuple[str, ...]]] = []  # per person: the word tuples that name them
        self.codes: list[list[int]] = []  # per person: its author codes
        self.entries: list[dict | None] = []  # per person: its directory entry (None: an author only)
        self.roles: list[tuple[frozenset[str], int, int | None, int | None]] = []  # (title_words, person, from, to)
        by_form: dict[tuple[str, ...], int] = {}
        for entry in people:
            i = len(forms)
            own = {name_key(entry["name"]), words(entry["name"])} | {f for a in entry["aliases"] for f in (name_key(a), words(a))}
            forms.append({f for f in own if f})
            self.codes.append([])
            self.entries.append(entry)
            for f in forms[i]:
                by_form.setdefault(f, i)
            self.roles += [(title_words(title), i, lo, hi) for title, lo, hi in role_periods(entry)]
        for code, name in enumerate(self.names):
            keys = {k for k in (name_key(name), words(name)) if k}
            i = next((by_form[k] for k in sorted(keys) if k in by_form), None)
            if i is None:
                i = len(forms)
                forms.append(set(keys))
                self.codes.append([])
                self.entries.append(None)
                for k in keys:
                    by_form[k] = i
            self.codes[i].append(code)
        self.person_names = {self.names[c]: e["name"] for e, codes in zip(self.entries, self.codes) if e is not None
                             for c in codes if self.names[c] != e["name"]}  # label -> the directory's name for it
        self.phrases: dict[str, list[tuple[tuple[str, ...], int]]] = {}  # first word -> (phrase, person)
        self.by_token: dict[str, set[int]] = {}
        for i, fs in enumerate(forms):
            if not self.codes[i]:
                continue  # no author of this store (or readable by this reader) goes by it
            for f in fs:
                self.phrases.setdefault(f[0], []).append((f, i))
                for tok in {f[0], f[-1]}:
                    if len(tok) >= 2 and tok not in STOPWORDS and not tok.isdigit():
                        self.by_token.setdefault(tok, set()).add(i)
        self.role_phrases: dict[str, list[int]] = {}  # each word of a title -> indexes into self.roles
        for j, (ws, i, _, _) in enumerate(self.roles):
            if self.codes[i]:
                for w in ws:
                    self.role_phrases.setdefault(w, []).append(j)

    def match(self, question: str, as_of: int | None = None) -> list[int]:
        """The author codes of the people ``question`` names; a role names whoever held it during
        a period the question names ("in March 2024"), else at ``as_of`` (µs), else now."""
        ws = words(question)
        found = {i for _, _, people in self._names_at(ws) for i in people}
        if self.role_phrases:
            found.update(self._holders(ws, question, as_of))
        return sorted(c for i in found for c in self.codes[i])

    def named_phrases(self, question: str) -> list[str]:
        """The names and aliases of this store's people as ``question`` writes them (lower-case
        words joined by spaces; a word inside a longer match is left out), roles not included:
        what ``name_free`` takes out of the question's vector (``mempp.feedback``)."""
        ws = words(question)
        spans = {(a, b) for a, b, _ in self._names_at(ws)}
        inner = {s for s in spans for o in spans if o != s and o[0] <= s[0] and s[1] <= o[1]}
        return sorted({" ".join(ws[a:b]) for a, b in spans - inner})

    def _names_at(self, ws: tuple[str, ...]) -> list[tuple[int, int, set[int]]]:
        """Where ``ws`` names people, by a whole name or alias or by one name word: ``(start, end,
        the people)`` per match (words ``ws[start:end]``)."""
        out: list[tuple[int, int, set[int]]] = []
        for at, w in enumerate(ws):
            for phrase, i in self.phrases.get(w, ()):
                if ws[at:at + len(phrase)] == phrase:
                    out.append((at, at + len(phrase), {i}))
            if self.by_token.get(w):
                out.append((at, at + 1, self.by_token[w]))
        return out

    def _holders(self, ws: tuple[str, ...], question: str, as_of: int | None) -> set[int]:
        named = {j for at, w in enumerate(ws) for j in self.role_phrases.get(w, ())
                 if self.roles[j][0] <= set(ws[at:at + len(self.roles[j][0]) + ROLE_SLACK])}
        if not named:
            return set()
        periods = question_periods(question) or [(as_of, as_of) if as_of is not None else (now_us(), now_us())]
        return {self.roles[j][1] for j in named if any(_overlaps(self.roles[j][2], self.roles[j][3], lo, hi) for lo, hi in periods)}

    def resolve(self, values: Iterable[str], as_of: int | None = None, date_from: int | None = None,
                date_to: int | None = None, any_time: bool = False) -> list[str]:
        """The author labels an ``authors=`` filter's ``values`` mean: each value a label (any case
        and spacing), a name or alias of a person (every label of theirs), or a role (whoever held
        it between ``date_from`` and ``as_of`` / ``date_to``, else at ``as_of``, else now;
        ``any_time``: whoever held it ever)."""
        hi = min((t for t in (as_of, date_to) if t is not None), default=None)
        lo = date_from if date_from is not None else hi
        if lo is None and not any_time:
            lo = hi = now_us()
        chosen: set[int] = set()
        for value in values:
            ws = words(value)
            ws_key = name_key(value)
            bare = title_words(value)
            for key in {ws, ws_key}:
                chosen.update(i for phrase, i in self.phrases.get(key[0] if key else "", ()) if phrase == key)
            chosen.update(i for title, i, a, b in self.roles if title == bare and self.codes[i] and _overlaps(a, b, lo, hi))
        return [self.names[c] for i in sorted(chosen) for c in self.codes[i]]

    def resolved(self, opt):
        """``opt`` (``QueryOptions``) with its ``authors`` filter resolved (:meth:`resolve`), the values as given kept."""
        if not opt.authors:
            return opt
        more = self.resolve(opt.authors, opt.as_of, opt.date_from, opt.date_to)
        return replace(opt, authors=tuple(dict.fromkeys(opt.authors + tuple(more))))

    def entries_with_authors(self) -> list[dict]:
        """The directory's entries that name at least one of these author labels."""
        return [e for e, codes in zip(self.entries, self.codes) if e is not None and codes]


def _overlaps(a: int | None, b: int | None, lo: int | None, hi: int | None) -> bool:
    """Whether the role period [a, b] meets [lo, hi] (None: unbounded)."""
    return (a is None or hi is None or a <= hi) and (b is None or lo is None or lo <= b)


def tag_leg(snap: Snapshot, codes: Iterable[int], mask: np.ndarray) -> np.ndarray:
    """Candidates written by the named authors, ascending (unranked; the caller orders them)."""
    codes = sorted(set(int(c) for c in codes))
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    ids = rare_ids(snap.authors, codes)
    if ids is not None:
        return ids[mask[ids].view(bool)].astype(np.int64)
    hit = np.empty(len(mask), dtype=np.uint8)
    keep_codes(mask, snap.authors.codes, code_mask(snap.authors, codes), hit)
    return np.flatnonzero(hit).astype(np.int64)
