"""OrgBench's decision storylines: a setting decided, revised by other people, discussed and mentioned.

Owns a topic's course (values chosen, trigger documents, decision meetings with notes and
transcripts, decision documents, recaps, discussion, implementation tickets, mentions and stale
mentions). Imports ``world``, ``tables`` and ``templates``; never ``events``, ``questions`` or
the assembly.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .tables import (
    ACTIONS, CHAT, COMPONENTS, CONCERNS, DECISION_LINES, DISCUSS_OPEN, DISCUSS_REPLY, FAMILY, FILLER, FRAMEWORKS,
    INIT_REASONS, Kind, MEETING_TITLES, MENTIONS, MENTIONS_EXT, MONTHS, POLICY_LINES, PROPOSALS, SPOKEN,
    SPOKEN_PROPOSALS, STALE, STALE_EXT, TRIGGERS, VCATS,
)
from .templates import tidy
from .world import Story, Org
from .wording import fmt_day, month_year, quarter, slug


def _values_for(org: Org, kind: Kind, ent: dict) -> list[str]:
    if kind.key == "vendor":
        return list(org.vendors[ent["e"]])
    return list(kind.values)


def _pick_value(org, kind, values, prev_idx):
    r = org.rng
    if prev_idx is None:
        lo = len(values) // 4
        hi = max(lo, len(values) - 1 - len(values) // 4)
        return r.randint(lo, hi)
    if not kind.ordered:
        return r.choice([i for i in range(len(values)) if i != prev_idx])
    step = r.choice((-2, -1, -1, 1, 1, 2))
    j = min(len(values) - 1, max(0, prev_idx + step))
    if j == prev_idx:
        j = prev_idx - 1 if prev_idx > 0 else prev_idx + 1
    return j


def _direction(kind, old_idx, new_idx):
    if old_idx is None:
        return "init"
    if not kind.ordered:
        return "switch"
    up = new_idx > old_idx
    return "more" if up == kind.more else "less"


def make_topic(org: Org, kind: Kind, ent: dict, t0: datetime, n_rev: int, tracked: bool) -> Story | None:
    r = org.rng
    values = _values_for(org, kind, ent)
    if len(values) < 2:
        return None
    st = Story("topic", tracked)
    ent = dict(ent)
    if kind.ent == "team_year" and ent.get("year") is None:
        ent["year"] = str((t0 + timedelta(days=75)).year)
    if kind.ent == "year" and ent.get("e") is None:
        ent["e"] = "FY" + str((t0 + timedelta(days=75)).year)
    e_str = ent.get("e") or ent.get("team")
    subjects = [s.format(**ent) for s in kind.subj]
    qsubjects = [s.format(**ent) for s in kind.qsubj]
    st.data.update(kind=kind, ent=ent, subjects=subjects, qsubjects=qsubjects, versions=[], e=e_str)
    org.topic_subjects.append(subjects)
    if kind.external:
        org.ext_topic_subjects.append(subjects)
    # schedule of versions
    span = org.span_days
    dates = [t0]
    for _ in range(n_rev):
        gap = r.uniform(0.10, 0.28) * span
        dates.append(dates[-1] + timedelta(days=max(16.0, gap)))
    last_ok = org.end - timedelta(days=max(8, span * 0.03))
    if dates[-1] > last_ok:
        total = (dates[-1] - dates[0]).total_seconds()
        room = (last_ok - dates[0]).total_seconds()
        if room < 16 * 86400 * max(n_rev, 1):
            return None
        scale = room / total if total > 0 else 1.0
        dates = [dates[0] + (d - dates[0]) * scale for d in dates]
    idx = None
    prev = None
    func0 = kind.funcs or dict(VCATS)[ent["e"]]
    fam = FAMILY[kind.fam]
    owner_team_func = func0
    for vi, vt in enumerate(dates):
        new_idx = _pick_value(org, kind, values, idx)
        direction = _direction(kind, idx, new_idx)
        vt = org.at_work(vt)
        org.now = vt
        exclude = (prev["author"],) if prev else ()
        dec = org.decider(vt, owner_team_func, exclude=exclude)
        old = values[idx] if idx is not None else None
        new = values[new_idx]
        # when the problems that trigger a revision surfaced (their month and quarter are quoted later)
        tt_types, ttimes = [], []
        if direction != "init":
            n_trig = 1 if r.random() < 0.7 else 2
            tt_types = r.sample(fam["triggers"], min(n_trig, len(fam["triggers"])))
            lo = prev["t"] if prev else vt - timedelta(days=60)
            for tk in tt_types:
                ttime = lo + (vt - lo) * r.uniform(0.35, 0.8)
                ttimes.append(org.at_work(min(ttime, vt - timedelta(days=5))))
        ref_t = (min(ttimes) if ttimes else vt) - timedelta(days=r.uniform(3, 20))
        facts = {
            "customer": r.choice(org.customers), "n": str(r.randint(3, 14)), "pct": str(r.randint(8, 46)),
            "money": str(r.choice((18, 24, 31, 38, 42, 55, 68, 84, 96, 120, 140, 190))),
            "month": MONTHS[ref_t.month - 1], "quarter": quarter(ref_t - timedelta(days=25)),
            "ms": str(r.choice((450, 600, 850, 1200, 1900, 2400))), "framework": r.choice(FRAMEWORKS),
            "region": r.choice(org.regions), "component": r.choice(COMPONENTS), "city": r.choice(org.offices),
            "e": e_str, "noun": kind.noun, "subj": r.choice(subjects), "new": new,
            "dfirst": dec.first, "dname": dec.name,
        }
        if old is not None:
            facts["old"] = old
        if kind.key == "vendor":
            facts["vendor"] = new
        eff = vt + timedelta(days=r.choice((0, 7, 14, 14, 21, 30)))
        if eff.day > 1 and r.random() < 0.4:
            eff = (eff.replace(day=1) + timedelta(days=32)).replace(day=1)
        facts["eff"] = fmt_day(eff, r.randint(0, 2))
        # --- trigger documents (revisions) ---
        tt_types = [("complaint" if tk == "escalation" and not kind.external else tk) for tk in tt_types]
        triggers = [_trigger_doc(org, st, tk, tt, facts, old or new) for tk, tt in zip(tt_types, ttimes)]
        # --- meeting where it was decided ---
        mt = org.at_work(vt, -r.choice((0.5, 1, 2, 3, 4)))
        if mt >= vt:
            mt = vt - timedelta(hours=3)
        org.now = mt
        mfunc = r.choice(func0)
        title = r.choice(MEETING_TITLES.get(mfunc, MEETING_TITLES["exec"])).replace(
            "{team}", dec.team(mt) if not dec.exec_title else r.choice(org.team_names))
        others = org.pick_people(mt, funcs=func0, k=r.randint(2, 5), exclude=(dec,))
        attendees = [dec] + others
        r.shuffle(attendees)
        proposer = r.choice(others) if others and r.random() < 0.7 else dec
        facts["pname"] = proposer.first if r.random() < 0.6 else proposer.name
        reasons = _reasons(org, kind, fam, direction, facts, triggers)
        cpool = [c for c in fam["cond"] if old is not None or "{old}" not in c]
        conds = [org.fill(c, facts, cap=False) for c in r.sample(cpool, min(len(cpool), r.choice((1, 1, 2))))]
        # --- discussion of the options before the meeting ---
        if r.random() < (0.75 if old is not None else 0.45):
            lo = max([prev["t"] + timedelta(days=2)] if prev else [mt - timedelta(days=30)])
            if triggers:
                lo = max(lo, max(tr["t"] for tr in triggers))
            if mt - lo > timedelta(days=1):
                _discussion(org, st, facts, subjects, values, idx, new_idx, lo, mt, others + [dec], title, kind.external)
        notes, transcript = _decision_meeting(org, st, kind, mt, title, attendees, dec, proposer, direction,
                                             facts, reasons, conds, old, new)
        # --- the decision document ---
        org.now = vt
        ddoc = _decision_doc(org, st, kind, ent, vi, vt, dec, title, mt, direction, facts, reasons, conds, prev,
                             subjects)
        ver = {"t": vt, "author": dec, "doc": ddoc, "notes": notes, "transcript": transcript, "value": new,
               "old": old, "idx": new_idx, "triggers": triggers, "reasons": reasons, "conds": conds,
               "meeting_title": title, "meeting_t": mt, "direction": direction, "eff": facts["eff"],
               "facts": facts, "recap": None}
        st.data["versions"].append(ver)
        # --- contradicting recap of what was agreed (sometimes) ---
        if tracked and r.random() < 0.18 and len(others) >= 1:
            ver["recap"] = _recap_doc(org, st, kind, ver, others, values)
        # --- follow-up mentions until the next version ---
        nxt = dates[vi + 1] if vi + 1 < len(dates) else org.end
        if r.random() < 0.55 and (nxt - vt).days > 6:
            _implementation(org, st, kind, ver, subjects, nxt)
        _mentions(org, st, kind, ver, vt, nxt, subjects, prev)
        prev = ver
        idx = new_idx
    return st


def _reasons(org, kind, fam, direction, facts, triggers):
    r = org.rng
    out = []
    for tr in triggers:
        out.append(org.fill(r.choice(TRIGGERS[tr["type"]][4]), {**facts, "ref": tr["ref"]}, cap=False))
    if direction == "init":
        pool = INIT_REASONS + [x for x in fam.get("more", fam.get("switch")) if "{old}" not in x]
        if not kind.external:
            pool = [x for x in pool if "{customer}" not in x]
    else:
        pool = fam.get(direction) or fam.get("switch") or fam["more"]
    k = 1 if out else r.choice((1, 2, 2))
    for tpl in r.sample(pool, min(k, len(pool))):
        out.append(org.fill(tpl, facts, cap=False))
    return out


def _trigger_doc(org, st, tk, t, facts, cur_value):
    r = org.rng
    channel, funcs, title_t, body_t, _ = TRIGGERS[tk]
    org.now = t
    author = org.pick_people(t, funcs=funcs)[0]
    f = dict(facts)
    f["old"] = cur_value
    if tk == "incident":
        ref = org.new_inc(t)
        thread = ref
    elif channel == "ticket":
        ref = org.next_ticket(author.func(t))
        thread = ref
    else:
        ref = f"{author.first}'s {r.choice(('email', 'note', 'write-up', 'analysis'))} of {fmt_day(t, 3)}"
        thread = f"EMAIL-{t.year}-{org.counter('email'):05d}"
    f["ref"] = ref
    f["sev"] = str(r.randint(2, 3))
    f["dur"] = r.choice(("25 minutes", "40 minutes", "an hour", "90 minutes", "2 hours"))
    title = org.fill(title_t, f)
    body = [org.fill(b, f) for b in body_t]
    extra = org.bank_lines(author.func(t), r.randint(0, 3))
    lines = body[:1] + extra[:1] + body[1:] + extra[1:]
    if channel == "email":
        text = org.email_text(author, t, title, lines)
    elif channel == "ticket":
        pri = r.choice(("P2", "P2", "P3", "P1"))
        text = f"{ref}: {title}\nReporter: {author.name} ({author.role(t)}). Priority: {pri}.\n" + " ".join(lines)
    else:
        text = f"{title}\nIncident commander: {author.name} ({author.role(t)}).\n" + " ".join(lines)
    d = org.add(st, channel, author, t, text, thread)
    return {"type": tk, "doc": d, "ref": ref, "author": author, "t": t}


def _decision_meeting(org, st, kind, mt, title, attendees, dec, proposer, direction, facts, reasons, conds, old, new):
    r = org.rng
    mode = "init" if direction == "init" else "change"
    scribe = r.choice(attendees)
    lines = []
    head = r.choice(("Present", "Attendees", "In the room"))
    lines.append(f"{title}, {fmt_day(mt, r.choice((0, 1, 2)))}. {head}: {org.attendees(attendees, mt)}."
                 + (f" Notes by {scribe.name}." if r.random() < 0.7 else ""))
    n_total = r.randint(10, 30)
    topic_lines = [org.fill(r.choice(PROPOSALS[mode]), facts)]
    for rs in reasons:
        topic_lines.append(org.fill(r.choice(("Reason given: {x}.", "{x}, according to {pname}.",
                                              "Context: {x}.", "Why: {x}.")), {**facts, "x": rs}))
    if len(attendees) > 2 and r.random() < 0.7:
        who = r.choice([p for p in attendees if p is not dec] or attendees)
        topic_lines.append(org.say(CONCERNS, {**facts, "who": who.first}))
    topic_lines.append(org.fill(r.choice(DECISION_LINES[mode]), facts))
    if conds:
        topic_lines.append("Conditions: " + "; ".join(conds) + ".")
    bg_func = r.choice([p.func(mt) for p in attendees])
    n_bg = max(3, n_total - len(topic_lines) - 2)
    bg = org.bank_lines(bg_func, n_bg)
    cut = r.randint(0, len(bg))
    lines.extend(bg[:cut])
    lines.extend(topic_lines)
    lines.extend(bg[cut:])
    owners = r.sample(attendees, min(len(attendees), r.randint(1, 3)))
    lines.append("Action items: " + "; ".join(f"{p.first} to {org.fill(r.choice(ACTIONS), cap=False)}" for p in owners) + ".")
    text = "\n".join(lines)
    thread = f"MEET-{slug(title).upper()}-{mt:%Y-%m-%d}"
    late = r.random() < 0.15
    emit = mt + timedelta(days=r.uniform(1.5, 6)) if late else None
    notes = org.add(st, "meeting", scribe, mt, text, thread, emit=emit)
    transcript = None
    if r.random() < 0.3:
        topic_spoken = [(proposer, org.fill(r.choice(SPOKEN_PROPOSALS[mode]), facts))]
        for rs in reasons:
            topic_spoken.append((proposer, "The main reason is that " + rs + "."))
        topic_spoken.append((dec, org.fill(r.choice(("Okay, let's go with {new}.", "Fine, {new} it is[, effective {eff}|].",
                                                     "I'm comfortable with {new}[ for now|]. Let's write it up."
                                                     )), facts)))
        transcript = write_transcript(org, st, mt, title, attendees, topic_spoken, thread, emit)
    return notes, transcript


def write_transcript(org, st, mt, title, attendees, topic_spoken, thread, emit):
    r = org.rng
    target = r.randint(2000, 6000)
    words = 0
    turns = [f"Transcript: {title}, {fmt_day(mt, 2)} (recording, {r.choice((30, 45, 50, 60))} minutes)."]
    insert_at = r.uniform(0.2, 0.7)
    inserted = not topic_spoken
    funcs = [p.func(mt) for p in attendees]
    say = org.say
    bank_lines = org.bank_lines
    last_speaker = None
    while words < target:
        if not inserted and words > target * insert_at:
            for p, text in topic_spoken:
                line = f"{p.first}: {text}"
                turns.append(line)
                words += line.count(" ") + 1
                if r.random() < 0.6:
                    q = r.choice(attendees)
                    line = f"{q.first}: {say(FILLER)}"
                    turns.append(line)
                    words += line.count(" ") + 1
            inserted = True
            continue
        i = r.randrange(len(attendees))
        if attendees[i] is last_speaker:
            i = (i + 1) % len(attendees)
        p = attendees[i]
        last_speaker = p
        k = r.random()
        if k < 0.3:
            text = say(FILLER)
        else:
            n = 1 if k < 0.75 else 2
            parts = bank_lines(funcs[i], n)
            pre = r.choice(SPOKEN)
            text = (pre + org.decap(parts[0]) if pre else parts[0]) + ("" if n == 1 else " " + parts[1])
        line = f"{p.first}: {text}"
        turns.append(line)
        words += line.count(" ") + 1
    return org.add(st, "transcript", r.choice(attendees), mt + timedelta(minutes=r.randint(35, 70)),
                   "\n".join(turns), thread, emit=emit)


def _decision_doc(org, st, kind, ent, vi, vt, dec, mtitle, mt, direction, facts, reasons, conds, prev, subjects):
    r = org.rng
    subj = r.choice(subjects)
    f = dict(facts)
    f["subj"] = subj
    lines = []
    met = org.fill(r.choice(("Following the {mtitle} on {mday},", "As agreed in the {mtitle} ({mday}),",
                             "After the {mtitle} on {mday},", "")), {"mtitle": mtitle, "mday": fmt_day(mt, r.randint(0, 3))})
    if met:
        met += " "
    if direction == "init":
        lines.append(met + (org.fill if not met else org.fill_lc)(r.choice((
            "[the|our] {subj} [is|will be] {new}[, effective {eff}|].",
            "we are setting the {subj} at {new}[ from {eff}|].",
            "[I've decided|we've decided] that the {subj} is {new}[, effective {eff}|]."
        )), f))
        if r.random() < 0.5:
            lines.append(org.fill(r.choice(("Until now there was no written {noun} for this.",
                                            "This is the first written {noun} on this.",
                                            "[Up to now|Until today] teams [have been|were] using different numbers.")), f))
    else:
        lines.append(met + (org.fill if not met else org.fill_lc)(r.choice((
            "the {subj} [changes|moves] from {old} to {new}[, effective {eff}|].",
            "we are changing the {subj} to {new}[ from {eff}|].",
            "[I've decided|we've decided] to [set|change] the {subj} to {new}[, effective {eff}|].",
            "the new {subj} is {new}[, effective {eff}|].",
        )), f))
        pm = prev["t"]
        pa = prev["author"]
        lines.append(org.fill(r.choice((
            "This replaces the {subj} of {pmonth} ({old}), set by {pname}.",
            "It replaces the {pmonth} decision by {pname} ({old}).",
            "This [supersedes|replaces] the {old} {noun} [we set in|from] {pmonth}.",
            "The previous {noun} ({old}, {pmonth}) no longer applies.",
        )), {**f, "pmonth": month_year(pm), "pname": pa.name if r.random() < 0.6 else pa.first}))
    intro = r.choice(("Why: ", "The reasons: ", "Reasoning: ", "Background: ", ""))
    lines.append(tidy(intro + "; ".join(reasons) + "."))
    lines.append(tidy(r.choice(("Conditions: ", "Caveats: ", "Note: ", "")) + "; ".join(conds) + "."))
    n_extra = r.randint(0, 5)
    lines.extend(org.bank_lines(dec.func(vt), n_extra))
    meta = None
    if vi > 0 and r.random() < 0.5:
        meta = {"revises": prev["doc"]}
    if kind.policy:
        title = kind.policy.format(**ent) if "{e}" in kind.policy else kind.policy
        head = f"{title} (owner: {dec.name}, {dec.role(vt)}; effective {facts['eff']}"
        head += f"; version {vi + 1})." if r.random() < 0.6 else ")."
        body = [head]
        body.extend(lines)
        body.extend(org.say_many(POLICY_LINES, r.randint(6, 20)))
        thread = f"POLICY-{slug(title).upper()}"
        return org.add(st, "policy", dec, vt, "\n".join(body), thread, meta=meta)
    if direction == "init":
        stpl = ("[Decision|Update]: {subj}", "{subj} - decision", "Setting the {subj}", "New {subj}")
    else:
        stpl = ("[Decision|Update]: {subj}", "New {subj}", "{subj} - [decision|change]", "Changing the {subj}")
    subject = org.fill(r.choice(stpl), f)
    subject = subject[0].upper() + subject[1:]
    to = org.pick_people(vt, k=r.randint(1, 3), exclude=(dec,))
    text = org.email_text(dec, vt, subject, lines, to=to)
    thread = f"EMAIL-{vt.year}-{org.counter('email'):05d}"
    return org.add(st, "email", dec, vt, text, thread, meta=meta)


def _recap_doc(org, st, kind, ver, others, values):
    r = org.rng
    p = r.choice(others)
    t = org.at_work(ver["meeting_t"], r.uniform(0.2, 3))
    if t >= ver["t"] + timedelta(days=6):
        t = ver["t"] + timedelta(hours=5)
    org.now = t
    wrong = [v for i, v in enumerate(values) if v != ver["value"] and v != ver["old"]]
    if not wrong:
        return None
    claimed = r.choice(wrong)
    f = {**ver["facts"], "claimed": claimed, "mtitle": ver["meeting_title"], "subj": r.choice(st.data["subjects"])}
    body = [org.fill(r.choice((
        "Quick recap from the {mtitle} for those who missed it: we landed on {claimed} for the {subj}.",
        "My notes from the {mtitle}: the {subj} will be {claimed}[ going forward|].",
        "For my team: the {mtitle} agreed {claimed} as the {subj}.",
    )), f)]
    body.extend(org.bank_lines(p.func(t), r.randint(1, 4)))
    if r.random() < 0.5:
        if len(body) < 3:
            body.extend(org.bank_lines(p.func(t), 3 - len(body)))
        text = org.email_text(p, t, org.fill("Recap: {mtitle}", f), body)
        ch = "email"
        thread = f"EMAIL-{t.year}-{org.counter('email'):05d}"
    else:
        text = " ".join(body)
        ch = "chat"
        thread = f"#{slug(p.team(t))}/{t:%Y%m%d-%H%M}"
    d = org.add(st, ch, p, t, text, thread)
    return {"doc": d, "author": p, "claimed": claimed, "t": t}


def _discussion(org, st, facts, subjects, values, cur_idx, new_idx, lo, hi, people, mtitle, external):
    r = org.rng
    span = (hi - lo).total_seconds() / 86400.0
    t = org.at_work(lo, r.uniform(0, max(0.2, span - 1)))
    if t >= hi:
        t = hi - timedelta(hours=r.uniform(4, 20))
    alts = [v for i, v in enumerate(values) if i != new_idx and i != cur_idx] or [values[new_idx]]
    f = {**facts, "alt": lambda: r.choice(alts), "alt2": lambda: r.choice(alts), "mtitle": mtitle,
         "subj": lambda: r.choice(subjects),
         "who": facts["customer"] if external else r.choice(("the team", "the managers", "everyone affected", "Finance"))}
    mode = "init" if cur_idx is None else "change"
    ppl = list(people)
    r.shuffle(ppl)
    k = min(len(ppl), r.choice((2, 3, 3, 4)))
    lines = [(ppl[0], org.fill(r.choice(DISCUSS_OPEN[mode]), f))]
    for p in ppl[1:k]:
        lines.append((p, org.fill(r.choice(DISCUSS_REPLY), f)))
    org.now = t
    if r.random() < 0.5:
        room = "#" + slug(ppl[0].team(t))
        org.chat_burst(st, t, room, None, lines)
    else:
        subject = org.fill("[Options for the|Revisiting the|Question on the] {subj}", f)
        thread = f"EMAIL-{t.year}-{org.counter('email'):05d}"
        tt = t
        for i, (p, line) in enumerate(lines):
            body = [line] + org.bank_lines(p.func(tt), r.randint(2, 4))
            org.add(st, "email", p, tt, org.email_text(p, tt, subject, body, reply=i > 0), thread)
            tt = tt + timedelta(hours=r.uniform(0.5, 20))
            if tt >= hi:
                break


def _implementation(org, st, kind, ver, subjects, nxt):
    r = org.rng
    t = org.at_work(ver["t"], r.uniform(0.5, min(10.0, max(1.0, (nxt - ver["t"]).days - 3))))
    if t >= nxt:
        return
    org.now = t
    p = org.pick_people(t, funcs=kind.funcs or ("eng", "finance"))[0]
    key = org.next_ticket(p.func(t))
    subj = r.choice(subjects)
    f = {**ver["facts"], "subj": subj, "dday": fmt_day(ver["t"], r.randint(0, 3)), "val": ver["value"]}
    head = org.fill(r.choice(("[Implement|Apply|Roll out] the new {subj} ({val})", "{subj}: change to {val}",
                              "Update [config|docs|contracts|the wiki] for the {subj}")), f)
    body = [org.fill(r.choice((
        "[Per|Following] {dname}'s decision of {dday}, [set|change] the {subj} to {val}[ by {eff}|].",
        "[Tracking|Ticket for] the change of the {subj} to {val}, [decided|announced] on {dday}.",
    )), f)]
    if ver["old"]:
        body.append(org.fill("[Old value|Currently]: {old}. [New value|Target]: {val}.", {**f, "old": ver["old"]}))
    body.extend(org.bank_lines(p.func(t), r.randint(1, 5)))
    org.add(st, "ticket", p, t, f"{key}: {head}\nReporter: {p.name}. Priority: P3.\n" + " ".join(body), key)
    if r.random() < 0.5:
        t2 = org.at_work(t, r.uniform(0.5, 4))
        if t2 < nxt:
            q = org.pick_people(t2, funcs=kind.funcs or None)[0]
            org.now = t2
            org.add(st, "ticket", q, t2, org.fill("[Done|Deployed|Updated] [in production|everywhere|in {system}]; the {subj} is now {val}.", f)
                    + " " + " ".join(org.bank_lines(q.func(t2), r.randint(2, 3))), key)


def _mentions(org, st, kind, ver, vt, nxt, subjects, prev):
    r = org.rng
    gap = (nxt - vt).total_seconds() / 86400.0
    if gap < 3:
        return
    k = r.choice((2, 2, 3, 3, 4, 5, 6))
    for _ in range(k):
        t = org.at_work(vt, r.uniform(1, max(1.5, gap - 1)))
        if t >= nxt:
            continue
        org.now = t
        f = {"subj": r.choice(subjects), "val": ver["value"],
             "since": r.choice(("", f" since {month_year(vt)}", f" as of {fmt_day(vt, 3)}", ""))}
        p = org.pick_people(t)[0]
        if ver["old"] and r.random() < 0.25:
            f["old"] = ver["old"]
            first = org.fill(r.choice(STALE_EXT if kind.external else STALE), f)
            q = org.pick_people(t, exclude=(p,))[0]
            reply = org.fill(r.choice(("No, it changed to {val} in {m}.", "It's {val} since {m}[, see the announcement|].",
                                       "That's outdated, it's {val} now.")), {**f, "m": month_year(vt)})
            room = "#" + slug(p.team(t))
            org.chat_burst(st, t, room, [p, q], [(p, first), (q, reply)])
            continue
        text = org.fill(r.choice(MENTIONS_EXT if kind.external else MENTIONS), f)
        ch = r.random()
        if ch < 0.6:
            extra = org.say(CHAT) if r.random() < 0.4 else ""
            org.add(st, "chat", p, t, (text + " " + extra).strip(), f"#{slug(p.team(t))}/{t:%Y%m%d-%H%M}")
        elif ch < 0.8:
            key = org.next_ticket(p.func(t))
            body = [text] + org.bank_lines(p.func(t), r.randint(2, 6))
            who = org.base["customer"]() if kind.external else r.choice(("Question", "Clarification", "Docs"))
            org.add(st, "ticket", p, t, f"{key}: {who} {'question ' if kind.external else ''}about the {f['subj']}\n"
                    + " ".join(body), key)
        else:
            body = [text] + org.bank_lines(p.func(t), r.randint(2, 8))
            org.add(st, "email", p, t, org.email_text(p, t, f["subj"][0].upper() + f["subj"][1:], body),
                    f"EMAIL-{t.year}-{org.counter('email'):05d}")
