"""OrgBench's role-and-alias slice: the same organizations, their authors written as an email,
a chat handle or "Last, First", a people directory, and questions that name a person otherwise
than their documents are signed, or by a role whose holder changes.

``generate(..., people=True)`` (``python -m mempp.bench.orgbench --people``) calls
:func:`directory_slice` per organization after its documents have ids. It rewrites each
document's ``author`` by channel (email: ``first.last@<org>.com`` or ``flast@<org>.com``; chat: the handle ``flast``;
ticket: ``Last, First``; anything else: the name), returns the organization's people directory
(name, aliases, every role with the dates it was held; the format of ``Store.add_people``) and
questions of three categories, each asking what one person wrote in one email thread that
several people wrote in, so that the thread's words alone do not pick the person:

- ``alias``: the person by name, first name or last name (never as the documents write them);
- ``role``: by the title they held then, held by nobody else at that time;
- ``role_change``: the same, for a title that more than one person holds over the span.

A role question either names the month ("... in March 2022?") or is asked as of a few days
after the document. Everything is drawn from the organization's own random stream, after the
main benchmark's draws, so the main documents and questions do not change.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from .wording import month_year, slug

MAX_PER_CATEGORY = 30  # questions per category and organization
_SUBJECT = re.compile(r"^Subject: (?:Re: )?(.+)$", re.M)


def _handle(p) -> str:
    return f"{p.first[0]}{p.last}".lower()


def _email(p, org) -> str:
    """Half the people's addresses are "first.last@", half the handle's ("flast@")."""
    local = f"{p.first}.{p.last}" if p.idx % 2 == 0 else _handle(p)
    return f"{local}@{slug(org.name).replace('-', '')}.com".lower()


def label(p, channel: str, org) -> str:
    """How a document of ``channel`` writes its author ``p``."""
    if channel == "email":
        return _email(p, org)
    if channel == "chat":
        return _handle(p)
    if channel == "ticket":
        return f"{p.last}, {p.first}"
    return p.name


def _day(t: datetime) -> str:
    return t.date().isoformat()


def people_records(org) -> list[dict]:
    """The organization's directory: each person's aliases and the periods of each title."""
    out = []
    for p in org.people:
        if p.exec_title:
            roles = [{"role": p.exec_title}]
        else:
            roles = []
            for i, start in enumerate(p.starts):
                end = p.starts[i + 1] - timedelta(days=1) if i + 1 < len(p.starts) else None
                roles.append({"role": p.role(start), "from": None if i == 0 else _day(start), "to": None if end is None else _day(end)})
        out.append({"name": p.name, "aliases": sorted({_email(p, org), _handle(p), f"{p.last}, {p.first}"}), "roles": roles})
    return out


def _holders(org, title: str, t: datetime) -> list:
    return [q for q in org.people if q.role(t) == title]


def directory_slice(org, docs: list[dict], out_docs: list[dict]) -> tuple[list[dict], list[dict]]:
    """Rewrite ``out_docs``' authors (``docs``: the organization's documents, the same order, with
    their ``_t`` and author's ``Person``) and return ``(people, questions)`` of the slice."""
    r = org.rng
    by_name = {p.name: p for p in org.people}
    threads: dict[str, list[int]] = {}
    for i, (d, o) in enumerate(zip(docs, out_docs)):
        p = by_name.get(d["author"] or "")
        if p is not None:
            o["author"] = label(p, d["channel"], org)
        if d["channel"] == "email" and p is not None:
            threads.setdefault(d["thread"], []).append(i)
    holders_ever: dict[str, set] = {}
    for p in org.people:
        for t in p.starts:
            holders_ever.setdefault(p.role(t), set()).add(p.name)
    cands: dict[str, list[dict]] = {"alias": [], "role": [], "role_change": []}
    for thread, idx in sorted(threads.items()):
        authors = {docs[i]["author"] for i in idx}
        subject = next((m[1].strip() for i in idx for m in [_SUBJECT.search(docs[i]["text"])] if m), None)
        if len(authors) < 2 or not subject:
            continue
        for name in sorted(authors):
            p = by_name[name]
            mine = [i for i in idx if docs[i]["author"] == name]
            t = docs[mine[0]]["_t"]
            evidence = [out_docs[i]["id"] for i in mine]
            ref = org.ref_person(p, t, allow_role=False)
            cands["alias"].append({"text": f"What did {ref} write in the email thread \"{subject}\"?", "evidence": evidence,
                                   "as_of": None, "answer": f"{p.name}'s messages of {_day(t)}"})
            title = p.role(t)
            if len(_holders(org, title, t)) != 1:
                continue
            cat = "role_change" if len(holders_ever.get(title, ())) > 1 else "role"
            asked = title if "," not in title else f"{title.split(', ')[1]} {title.split(', ')[0]}"
            if r.random() < 0.5:
                text, as_of = f"What did the {asked} write in the email thread \"{subject}\" in {month_year(t)}?", None
            else:
                text, as_of = f"What did the {asked} write in the email thread \"{subject}\"?", (t + timedelta(days=r.randint(1, 20))).isoformat(timespec="seconds")
            cands[cat].append({"text": text, "evidence": evidence, "as_of": as_of, "answer": f"{p.name} ({title})"})
    questions = []
    for cat, found in cands.items():
        r.shuffle(found)
        questions += [{**q, "category": cat} for q in found[:MAX_PER_CATEGORY]]
    return people_records(org), questions
