"""OrgBench: a seeded synthetic benchmark of organizational records (``mempp.bench.orgbench``).

``generate(n_docs, seed, n_orgs)`` returns ``(docs, questions)`` in the format of
``shared/eval/FORMAT.md``; ``write`` puts them in ``docs.jsonl`` and ``questions.jsonl``;
``python -m mempp.bench.orgbench --docs 2000 --seed 0 --orgs 2 --out DIR`` does both.

Each organization is one ``scope``: a fictional company with people whose roles change,
threads of email, chat, meeting notes, meeting transcripts, tickets, incident reports and
policy pages, decisions that are revised by other people, conflicting accounts of the same
events and root causes corrected weeks later. Questions come in the six categories of the
Mem++ paper. Everything is drawn from ``random.Random`` / ``numpy.random.default_rng``
streams seeded from ``seed`` (never Python's salted ``hash``), so a seed gives the same
bytes on every machine. See ``bench/ORGBENCH.md``.

The package: ``tables`` (the data in ``data/*.json``, checked at load), ``templates`` (the
template mini-language), ``world`` (people, organization, documents), ``decisions`` and
``events`` (the storylines), ``questions``, and here the assembly (:func:`generate`,
:func:`write`, :func:`main`). Never imported by mempp itself.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from .decisions import make_topic
from .directory import directory_slice
from .shapes import vary_threads
from .events import bg_chat, bg_email, bg_meeting, bg_policy, bg_ticket, dispute, incident, role_change_doc
from .questions import CATEGORIES, make_questions
from .tables import KINDS
from .world import Story, Org

__all__ = ["CATEGORIES", "generate", "generate_with_people", "write", "main"]

MIN_DOCS_PER_ORG = 100


# =============================================================================================
# Assembly
# =============================================================================================


def _plan_quotas(n_org: int, n_orgs: int, n_total: int) -> dict[str, int]:
    total = max(6, int(round(n_org / 20)))
    base = total // 6
    quotas = {c: base for c in CATEGORIES}
    for c in CATEGORIES[: total - 6 * base]:
        quotas[c] += 1
    if n_total >= 2000:
        floor = math.ceil(12 / n_orgs)
        for c in CATEGORIES:
            quotas[c] = max(quotas[c], floor)
    for c in CATEGORIES:
        quotas[c] = max(1, quotas[c])
    return quotas


def _build_org(idx: int, n_org: int, seed: int, n_orgs: int, used: set, n_total: int):
    org = Org(idx, n_org, seed, n_orgs, used, n_total)
    r = org.rng
    quotas = _plan_quotas(n_org, n_orgs, n_total)
    qc = max(quotas.values())
    span = org.span_days
    stories: list[Story] = []
    # ---- storylines: tracked ones get questions; decoy topics only add realistic competition ----
    n_tracked = int(math.ceil(qc * 1.2)) + 1
    n_decoy = int(round(n_tracked * 0.6))
    n_inc = int(math.ceil(qc * 0.6)) + 1
    n_disp = int(math.ceil(qc * 0.35)) + 1
    pool = []
    for k in KINDS:
        for ent in org.entities(k):
            pool.append((k, ent))
    r.shuffle(pool)
    by_kind: dict[str, list] = {}  # spread topics over kinds: round-robin by kind
    for k, ent in pool:
        by_kind.setdefault(k.key, []).append((k, ent))
    order = []
    keys = [k.key for k in KINDS]
    r.shuffle(keys)
    while any(by_kind.values()):
        for kk in keys:
            if by_kind.get(kk):
                order.append(by_kind[kk].pop())
    topics = iter(order)
    # interleave the kinds of storyline so that a small budget still covers every category
    plan = sorted([((i + 0.5) / n_tracked, 0, "topic") for i in range(n_tracked)]
                  + [((i + 0.5) / n_inc, 1, "incident") for i in range(n_inc)]
                  + [((i + 0.5) / n_disp, 2, "dispute") for i in range(n_disp)])
    budget_tracked = int(0.55 * n_org)
    budget_all = int(0.62 * n_org)
    made = {"topic": 0, "incident": 0, "dispute": 0}

    def new_topic(tracked):
        for k, ent in topics:
            n_rev = (1 if r.random() < 0.6 else 2) if tracked else r.choice((0, 1, 1, 2))
            t0 = org.start + timedelta(days=r.uniform(0.02, 0.55) * span)
            st = make_topic(org, k, ent, t0, n_rev, tracked)
            if st is not None:
                return st
        return None

    for _, _, kind in plan:
        if len(org.docs) >= budget_tracked and made["topic"] and made["incident"]:
            break
        if kind == "topic":
            st = new_topic(True)
        elif kind == "incident":
            t = org.start + timedelta(days=r.uniform(0.05, 0.75) * span)
            st = incident(org, t, True, r.random() < 0.6)
        else:
            t = org.start + timedelta(days=r.uniform(0.05, 0.85) * span)
            st = dispute(org, t)
        if st is not None:
            stories.append(st)
            made[kind] += 1
    for _ in range(n_decoy):
        if len(org.docs) >= budget_all:
            break
        st = new_topic(False)
        if st is None:
            break
        stories.append(st)
    # background incidents (no questions) and role-change announcements
    for _ in range(max(1, n_org // 400)):
        if len(org.docs) >= budget_all:
            break
        t = org.start + timedelta(days=r.uniform(0.02, 0.9) * span)
        incident(org, t, False, r.random() < 0.15)
    for t, p, kind, before in org.role_changes:
        role_change_doc(org, t, p, kind, before)
    # ---- background traffic up to the requested size ----
    remaining = n_org - len(org.docs)
    if remaining < 0:
        _trim(org, stories, -remaining)
        remaining = n_org - len(org.docs)
    units = [(bg_chat, 0.36 / 3.3), (bg_email, 0.25 / 1.8), (bg_ticket, 0.16 / 1.9),
             (bg_meeting, 0.14 / 1.15), (bg_policy, 0.03)]
    fns = [u[0] for u in units]
    w = np.array([u[1] for u in units])
    w = w / w.sum()
    n_units_est = max(8, remaining)
    choices = org.np.choice(len(fns), size=n_units_est, p=w)
    offsets = np.sort(org.np.uniform(0, span - 0.5, size=n_units_est))
    i = 0
    while remaining > 0:
        if i >= n_units_est:
            choices = org.np.choice(len(fns), size=n_units_est, p=w)
            offsets = np.sort(org.np.uniform(0, span - 0.5, size=n_units_est))
            i = 0
        t = org.worktime(float(offsets[i]))
        org.now = t
        remaining -= fns[int(choices[i])](org, t, remaining)
        i += 1
    # ---- questions ----
    cands = make_questions(org, stories)
    questions = []
    for c in CATEGORIES:
        pool = [x for x in cands[c] if _valid_q(x)]
        pool.sort(key=lambda x: (x["_pri"], x["_key"]))
        questions.extend(pool[: quotas[c]])
    return org, questions


def _valid_q(q) -> bool:
    if not q["_ev"]:
        return False
    if q["_asof"] is None:
        return True
    lim = q["_asof"]
    return all(d["_t"].date() <= lim for d in q["_ev"])


def _trim(org, stories, excess):
    """Remove ``excess`` documents: background and announcements first (latest first), then whole
    storylines, latest created first. Questions lose a storyline whose documents are gone."""
    in_story = set()
    for st in stories:
        for d in st.docs:
            in_story.add(id(d))
    drop = set()
    for d in reversed(org.docs):
        if excess <= 0:
            break
        if id(d) not in in_story:
            drop.add(id(d))
            excess -= 1
    for st in reversed(stories):
        if excess <= 0:
            break
        st.tracked = False
        for d in st.docs:
            if id(d) not in drop:
                drop.add(id(d))
                excess -= 1
    org.docs = [d for d in org.docs if id(d) not in drop]


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


def generate(n_docs: int, seed: int = 0, n_orgs: int = 1) -> tuple[list[dict], list[dict]]:
    """Generate ``(docs, questions)``: ``n_docs`` documents over ``n_orgs`` organizations (one scope each).

    Deterministic for a given ``(n_docs, seed, n_orgs)``. Documents are in ingest order (date order,
    except a few late-filed meeting notes); questions are grouped by scope.
    """
    docs, questions, _ = generate_with_people(n_docs, seed, n_orgs, people=False)
    return docs, questions


def generate_with_people(n_docs: int, seed: int = 0, n_orgs: int = 1, people: bool = True,
                         threads: str = "plain") -> tuple[list[dict], list[dict], list[dict]]:
    """:func:`generate` with the role-and-alias slice (``directory.py``): authors written as emails,
    handles and "Last, First", the slice's questions after each scope's own, and ``people``, each
    scope's directory (``{"scope", "name", "aliases", "roles"}``). ``people=False``: :func:`generate`'s.
    ``threads="varied"``: chat threaded by room and month or quarter, some email threads forked (``shapes.py``)."""
    if threads not in ("plain", "varied"):
        raise ValueError(f"threads must be 'plain' or 'varied', got {threads!r}")
    n_docs = int(n_docs)
    n_orgs = max(1, int(n_orgs))
    if n_docs < MIN_DOCS_PER_ORG * n_orgs:
        raise ValueError(f"n_docs={n_docs} is too small for {n_orgs} organization(s) "
                         f"(need at least {MIN_DOCS_PER_ORG} per organization)")
    sizes = [n_docs // n_orgs + (1 if i < n_docs % n_orgs else 0) for i in range(n_orgs)]
    used: set = set()
    all_docs: list[dict] = []
    all_qs: list[dict] = []
    all_people: list[dict] = []
    for i, n_org in enumerate(sizes):
        org, questions = _build_org(i, n_org, seed, n_orgs, used, n_docs)
        docs = sorted(org.docs, key=lambda d: (d["_e"], d["_n"]))
        for j, d in enumerate(docs):
            d["id"] = f"{org.scope}:{d['channel']}-{j + 1:06d}"
        out_docs = []
        for d in docs:
            rec = {"id": d["id"], "scope": org.scope, "text": d["text"], "author": d["author"], "date": _iso(d["_t"]),
                   "thread": d["thread"], "channel": d["channel"]}
            meta = d.get("_meta")
            if meta:
                for k, v in meta.items():
                    rec[k] = v["id"] if isinstance(v, dict) else v
            out_docs.append(rec)
        present = {id(d) for d in docs}
        out_qs = []
        for q in questions:
            if not all(id(d) in present for d in q["_ev"]):
                continue
            ev = []
            for d in q["_ev"]:
                if d["id"] not in ev:
                    ev.append(d["id"])
            out_qs.append({"id": f"{org.scope}:q{len(out_qs) + 1:05d}", "scope": org.scope, "text": q["text"],
                           "category": q["category"],
                           "as_of": None if q["_asof"] is None else q["_asof"].isoformat(),
                           "evidence": ev, "answer": q["answer"]})
        if threads == "varied":
            vary_threads(out_docs, seed, org.scope)
        if people:
            directory, extra = directory_slice(org, docs, out_docs)
            all_people += [{"scope": org.scope, **p} for p in directory]
            out_qs += [{"id": f"{org.scope}:q{len(out_qs) + j + 1:05d}", "scope": org.scope, **q} for j, q in enumerate(extra)]
        all_docs.extend(out_docs)
        all_qs.extend(out_qs)
    return all_docs, all_qs, all_people


def write(out_dir, n_docs: int, seed: int = 0, n_orgs: int = 1, people: bool = False, threads: str = "plain") -> dict:
    """Write ``docs.jsonl`` and ``questions.jsonl`` under ``out_dir`` (``people``: the
    role-and-alias slice, with ``people.jsonl``); returns a summary."""
    t0 = time.perf_counter()
    docs, questions, directory = generate_with_people(n_docs, seed, n_orgs, people=people, threads=threads)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if people:
        with open(out / "people.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in directory)
    with open(out / "docs.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    with open(out / "questions.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)
    cats: dict[str, int] = {c: 0 for c in CATEGORIES}
    for q in questions:
        cats[q["category"]] = cats.get(q["category"], 0) + 1
    chans: dict[str, int] = {}
    for d in docs:
        chans[d["channel"]] = chans.get(d["channel"], 0) + 1
    return {"docs": len(docs), "questions": len(questions), "scopes": len({d["scope"] for d in docs}),
            "authors": len({(d["scope"], d["author"]) for d in docs}), "by_category": cats, "by_channel": chans,
            "seconds": round(time.perf_counter() - t0, 2), "out": str(out)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mempp.bench.orgbench",
                                 description="Generate the OrgBench synthetic organizational-memory benchmark.")
    ap.add_argument("--docs", type=int, default=2000, help="number of documents in all (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--orgs", type=int, default=1, help="number of organizations, one scope each (default 1)")
    ap.add_argument("--out", required=True, help="output folder for docs.jsonl and questions.jsonl")
    ap.add_argument("--people", action="store_true",
                    help="the role-and-alias slice: authors as emails, handles and 'Last, First', people.jsonl, and questions by name and role")
    ap.add_argument("--threads", choices=("plain", "varied"), default="plain",
                    help="varied: chat threaded by room and month or quarter, some email threads forked in two (default plain)")
    args = ap.parse_args(argv)
    try:
        s = write(args.out, args.docs, args.seed, args.orgs, people=args.people, threads=args.threads)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cats = " ".join(f"{c}={n}" for c, n in s["by_category"].items())
    print(f"orgbench: {s['docs']} docs, {s['questions']} questions ({cats}), {s['scopes']} scope(s), "
          f"{s['authors']} authors, seed {args.seed}, {s['seconds']}s -> {s['out']}")
    return 0
