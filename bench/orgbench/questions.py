"""OrgBench's questions: the six categories of the Mem++ paper, asked of the storylines' facts.

Owns :data:`CATEGORIES` and the questions drawn from each storyline, with their gold documents
and ``as_of`` dates. Imports ``world`` and ``tables``; never the storylines or the assembly.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .tables import (
    Q_AUDIT, Q_BITEMPORAL, Q_DEAL_CONTRA, Q_INC_CONTRA, Q_JUSTIFY, Q_PROVENANCE, Q_PROVENANCE_FIRST, Q_RECAP_CONTRA,
    Q_SUPERSESSION, Q_VENDOR_JUSTIFY,
)
from .world import Story, Org
from .wording import fmt_day, month_year


CATEGORIES = (
    "supersession",
    "decision_provenance",
    "bi_temporal",
    "audit_replay",
    "justification_chain",
    "contradiction",
)


# =============================================================================================
# Questions
# =============================================================================================


def _inc_ref(org, st, style=None):
    r = org.rng
    d = st.data
    s = r.random() if style is None else style
    if s < 0.25:
        return f"incident {d['inc']}"
    if s < 0.6:
        return f"{d['product']} outage on {fmt_day(d['t'], r.choice((0, 1, 3)))}"
    if s < 0.85:
        return f"{d['symptom']} incident of {month_year(d['t'])}"
    return f"{d['product']} incident in {month_year(d['t'])}"


def _qtext(org, tpl, f):
    t = org.fill(tpl, f)
    return t


def _asof_between(org, lo: datetime, hi: datetime, a: float = 0.1, b: float = 0.9):
    """A date-only as_of strictly after ``lo``'s day and before ``hi``'s day, or None.

    It falls at a random fraction in ``[a, b]`` of the days in between."""
    d0 = lo.date() + timedelta(days=1)
    d1 = hi.date() - timedelta(days=1)
    if d1 < d0:
        return None
    span = (d1 - d0).days
    return d0 + timedelta(days=int(org.rng.uniform(a, b) * span))


def make_questions(org: Org, stories: list[Story]):
    r = org.rng
    cands = {c: [] for c in CATEGORIES}

    def q(cat, text, evidence, as_of, answer, pri=0):
        """A candidate question; lower ``pri`` is preferred when a category has more than its quota."""
        cands[cat].append({"category": cat, "text": text, "_ev": evidence, "_asof": as_of, "answer": answer,
                           "_pri": pri, "_key": r.random()})

    for st in stories:
        if not st.tracked:
            continue
        if st.kind == "topic":
            d = st.data
            kind = d["kind"]
            vers = d["versions"]
            qs = d["qsubjects"] if r.random() < 0.8 else d["subjects"]
            last = vers[-1]

            def who(v):
                return f"{v['author'].name} ({v['author'].role(v['t'])}, {fmt_day(v['t'], 0)})"

            # supersession
            if len(vers) >= 2:
                prev = vers[-2]
                ev = [last["doc"]]
                if r.random() < 0.7:
                    ev.append(prev["doc"])
                tpl = r.choice(Q_SUPERSESSION)
                text = _qtext(org, tpl, {"q": r.choice(qs), "old": prev["value"],
                                         "pref": org.ref_person(last["author"], last["t"])})
                q("supersession", text, ev, None,
                  f"{last['value']} (set by {who(last)}); it replaced {prev['value']} (set by {who(prev)}).")
            # provenance: the latest and sometimes the first decision
            pick = len(vers) - 1 if r.random() < 0.6 else r.randrange(len(vers))
            for vi in range(len(vers)):
                v = vers[vi]
                tpl = r.choice(Q_PROVENANCE_FIRST if (vi == 0 and len(vers) > 1 and r.random() < 0.5) else Q_PROVENANCE)
                text = _qtext(org, tpl, {"q": r.choice(qs), "val": v["value"]})
                q("decision_provenance", text, [v["doc"], v["notes"]], None,
                  f"{who(v)} decided {v['value']} at the {v['meeting_title']} on {fmt_day(v['meeting_t'], 0)}; "
                  f"reasons: {'; '.join(v['reasons'])}.", pri=0 if vi == pick else 1)
            # bi-temporal: the version in force at a past date
            for vi, v in enumerate(vers):
                hi = vers[vi + 1]["t"] if vi + 1 < len(vers) else org.end
                # the first version (nothing older to confuse it with) is asked about less often
                pri = 1 if (vi == 0 and r.random() < 0.5) or (vi + 1 == len(vers) and r.random() < 0.4) else 0
                # people ask about the past mostly around the time it changed again
                a = _asof_between(org, v["t"], hi, 0.3, 0.97)
                if a is None:
                    continue
                tpl = r.choice(Q_BITEMPORAL)
                text = _qtext(org, tpl, {"q": r.choice(qs), "d": fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
                q("bi_temporal", text, [v["doc"]], a,
                  f"{v['value']} (set by {who(v)}); " + (f"later changed to {vers[vi + 1]['value']}." if vi + 1 < len(vers)
                                                          else "still in force."), pri=pri)
            # audit replay: everything on record about the topic at a date
            docs = sorted(st.docs, key=lambda x: (x["_t"], x["_n"]))
            first = docs.index(vers[0]["doc"]) + 1
            cuts = []
            for c in range(max(2, first), min(8, len(docs)) + 1):
                end_day = docs[c]["_t"].date() if c < len(docs) else org.end.date()
                if docs[c - 1]["_t"].date() < end_day:
                    cuts.append(c)
            if cuts:
                c = r.choice(cuts)
                lo_day = docs[c - 1]["_t"].date()
                hi_day = (docs[c]["_t"].date() if c < len(docs) else org.end.date()) - timedelta(days=1)
                a = lo_day + timedelta(days=r.randint(0, max(0, (hi_day - lo_day).days)))
                ev = docs[:c]
                in_force = [v for v in vers if v["t"].date() <= a]
                tpl = r.choice(Q_AUDIT)
                text = _qtext(org, tpl, {"q": r.choice(qs), "d": fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
                ans = (f"{len(ev)} documents; the {kind.noun} in force was {in_force[-1]['value']} "
                       f"(set by {who(in_force[-1])})." if in_force else f"{len(ev)} documents; no decision yet.")
                q("audit_replay", text, ev, a, ans)
            # justification chain for a revision
            revs = list(range(1, len(vers)))
            pick = (revs[-1] if r.random() < 0.6 else r.choice(revs)) if revs else None
            for vi in revs:
                v, p = vers[vi], vers[vi - 1]
                chain = [p["doc"]] + [tr["doc"] for tr in v["triggers"]] + [v["doc"]]
                if len(chain) > 4:
                    chain = [chain[0]] + chain[1:3] + [chain[-1]]
                if r.random() < 0.25 and v["triggers"]:
                    chain = chain[1:]
                tpl = r.choice(Q_VENDOR_JUSTIFY if kind.key == "vendor" else Q_JUSTIFY)
                text = _qtext(org, tpl, {"q": r.choice(qs), "old": p["value"], "new": v["value"],
                                         "pref": org.ref_person(v["author"], v["t"])})
                q("justification_chain", text, chain, None,
                  f"{v['author'].name} changed it from {p['value']} to {v['value']} on {fmt_day(v['t'], 0)} because "
                  f"{'; '.join(v['reasons'])}.", pri=0 if vi == pick else 1)
            # contradiction: a recap that disagrees with the decision
            for v in vers:
                if v["recap"]:
                    rc = v["recap"]
                    tpl = r.choice(Q_RECAP_CONTRA)
                    mt = v["meeting_t"]
                    text = _qtext(org, tpl, {"q": r.choice(qs), "m": v["meeting_title"], "d": fmt_day(mt, r.randint(0, 3)),
                                             "my": month_year(mt)})
                    q("contradiction", text, [v["doc"], rc["doc"]], None,
                      f"The accounts conflict: {v['author'].name}'s decision says {v['value']}, while "
                      f"{rc['author'].name}'s recap says {rc['claimed']}.")
        elif st.kind == "incident":
            d = st.data
            ae, ae_doc, d2, _ = d["ae"]
            sup, sup_doc, hours, n3 = d["support"]
            post = d["post"]
            accounts = [post, ae_doc, sup_doc]
            if r.random() < 0.25:
                accounts = [post, r.choice((ae_doc, sup_doc))]
            text = _qtext(org, r.choice(Q_INC_CONTRA), {"ir": _inc_ref(org, st)})
            q("contradiction", text, accounts, None,
              f"The accounts conflict: the postmortem ({d['lead'].name}) says {d['dur']} minutes and about {d['n_cust']} "
              f"customers; {ae.name} told customers under {d2} minutes and a handful of accounts; {sup.name} (support) "
              f"says over {hours} hours and tickets from {n3} customers.")
            docs = sorted(st.docs, key=lambda x: (x["_t"], x["_n"]))
            # audit replay at a date after the postmortem (before any correction)
            hi = d["finding"]["_t"] if d["corrected"] else org.end
            a = _asof_between(org, post["_t"], hi)
            if a is not None:
                ev = [x for x in docs if x["_t"].date() <= a]
                text = _qtext(org, r.choice(("What was on record about the {ir} as of {d}?",
                                             "Reconstruct what we knew about the {ir} on {d}.",
                                             "What did our records say about the {ir} at that date?")),
                              {"ir": _inc_ref(org, st), "d": fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
                q("audit_replay", text, ev, a, f"{len(ev)} documents: the incident updates and report, the customer and "
                                               f"support accounts and the postmortem (root cause then: {d['cause_a']}).",
                  pri=0 if r.random() < 0.6 else 1)
            if d["corrected"]:
                corr = d["corr"]
                a = _asof_between(org, post["_t"], corr["_t"])
                if a is not None:
                    text = _qtext(org, r.choice(("What did we believe caused the {ir} as of {d}?",
                                                 "On {d}, what was the stated root cause of the {ir}?",
                                                 "What was the root cause of the {ir}, as understood at the time?")),
                                  {"ir": _inc_ref(org, st), "d": fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
                    q("bi_temporal", text, [post], a, f"{d['cause_a']} (postmortem by {d['lead'].name}); corrected later.")
                ev = [corr] + ([post] if r.random() < 0.7 else [])
                text = _qtext(org, r.choice(("What is the confirmed root cause of the {ir}, and what explanation did it replace?",
                                             "Was the root cause of the {ir} ever revised? What is the current explanation?",
                                             "What caused the {ir}, according to the latest analysis?")),
                              {"ir": _inc_ref(org, st)})
                q("supersession", text, ev, None,
                  f"{d['cause_b']} (correction by {d['corr_author'].name}); it replaced the postmortem's {d['cause_a']}.")
                text = _qtext(org, r.choice(("Why was the root cause of the {ir} revised?",
                                             "What evidence led to correcting the postmortem of the {ir}?")),
                              {"ir": _inc_ref(org, st)})
                q("justification_chain", text, [post, d["finding"], corr], None,
                  f"The postmortem blamed {d['cause_a']}; a later ticket found {d['cause_b']}, and "
                  f"{d['corr_author'].name} corrected the record.")
        elif st.kind == "dispute":
            d = st.data
            ev = [d["ae_doc"], d["fin_doc"]]
            if d["sg"] is not None and r.random() < 0.5:
                ev.append(d["sg"])
            text = _qtext(org, r.choice(Q_DEAL_CONTRA), {"cust": d["cust"], "years": d["years"]})
            q("contradiction", text, ev, None,
              f"The accounts conflict: {d['ae'].name} says {d['approver'].name} approved up to {d['claimed']}%; "
              f"{d['fin'].name} says the cap was {d['cap']}%" + (f"; it was signed at {d['signed']}%." if d["sg"] else "."))
    return cands
