"""OrgBench's other storylines: incidents with conflicting accounts and corrected root causes, deal
disputes, and the background traffic (chat, email, tickets, meetings, policies, role changes).

Imports ``world``, ``tables`` and ``decisions`` (a background meeting's transcript is written as a
decision meeting's is); never ``questions`` or the assembly.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .decisions import write_transcript
from .tables import (
    ACTIONS, BG_POLICIES, CHAT, CHATTER_ALT, COMPONENTS, EMAIL_SUBJECTS, MEETING_TITLES, POLICY_LINES, ROOT_CAUSES,
    SYMPTOMS, TICKET_TITLES,
)
from .world import Story, Org
from .wording import fmt_day, slug


# =============================================================================================
# Storylines: incidents (conflicting accounts, corrected root causes) and deal disputes
# =============================================================================================


def incident(org: Org, t: datetime, tracked: bool, corrected: bool) -> Story:
    r = org.rng
    st = Story("incident", tracked)
    t = org.at_work(t)
    org.now = t
    inc = org.new_inc(t)
    product = r.choice(org.products)
    system = r.choice(org.systems)
    symptom = org.fill(r.choice(SYMPTOMS), cap=False)
    over = {"system": system, "product": product, "vendor": r.choice(org.all_vendors),
            "component": r.choice(COMPONENTS), "region": r.choice(org.regions)}
    cause_a_t, cause_b_t = r.choice(ROOT_CAUSES)
    cause_a = org.fill(cause_a_t, over, cap=False)
    cause_b = org.fill(cause_b_t, over, cap=False)
    dur = r.choice((22, 35, 42, 48, 55, 64, 78, 95, 110, 140, 185))
    n_cust = r.choice((14, 23, 38, 52, 76, 110, 140, 210, 260))
    total_c = max(n_cust * r.randint(6, 20), 120)
    sev = r.choice((1, 2, 2, 2, 3))
    oncall = org.pick_people(t, funcs=("sre", "eng"))[0]
    start_h = t.replace(second=0)
    end_h = start_h + timedelta(minutes=dur)
    st.data.update(inc=inc, product=product, symptom=symptom, t=t, dur=dur, n_cust=n_cust, cause_a=cause_a,
                   cause_b=cause_b, system=system)
    # live updates in the incident channel
    people = [oncall] + org.pick_people(t, funcs=("sre", "eng", "support"), k=r.randint(1, 3), exclude=(oncall,))
    lines = [(oncall, f"Investigating {symptom} on {product} since about {start_h:%H:%M} UTC. Treating it as SEV{sev} for now.")]
    for p in people[1:]:
        lines.append((p, org.fill(r.choice((
            "[Seeing|We have] {n} tickets in the last [20|30|40] minutes from customers on {product}.",
            "{system} dashboards show [error rate at {pct}%|p99 at {ms} ms]. Checking the {component}.",
            "Status page updated. Any ETA I can share with {customer}?",
            "[Rolled back|Rolling back] {system} to the previous version, watching the graphs.")), over)))
    lines.append((oncall, f"Mitigated at {end_h:%H:%M} UTC. Monitoring; postmortem to follow."))
    org.chat_burst(st, t, "#incidents", None, lines, thread=inc)
    st.data["chat"] = [d for d in st.docs]
    # incident report
    rt = t + timedelta(hours=r.uniform(1.5, 5))
    org.now = rt
    rep = [f"{inc}: {symptom[0].upper() + symptom[1:]} on {product}. Severity: SEV{sev}. Incident commander: {oncall.name} ({oncall.role(rt)}).",
           f"{r.choice(('Partial outage', 'Degradation', 'Outage', 'Service disruption'))}: started {start_h:%H:%M} UTC, "
           f"mitigated {end_h:%H:%M} UTC ({dur} minutes).",
           f"Impact: about {n_cust} customers ({round(100 * n_cust / total_c)}% of active accounts) saw {symptom}.",
           org.fill("[Detection|Detected by]: [synthetic checks|a customer report|the {component} alarm].", over),
           org.fill("Mitigation: [rolled back {system}|failed over to {region}|restarted the {component}|scaled the {component}].", over),
           "Root cause: under investigation; postmortem to follow."]
    rep.extend(org.bank_lines("sre", r.randint(0, 3)))
    report = org.add(st, "incident", oncall, rt, "\n".join(rep), inc)
    # sales account (understates)
    ae = org.pick_people(t, funcs=("sales", "cs"))[0]
    at = org.at_work(t, r.uniform(0.6, 2.5))
    org.now = at
    cust = r.choice(org.customers)
    d2 = max(5, min(15, dur // 3))
    ae_body = [org.fill(r.choice((
        "[Yesterday|Earlier this week] we had a brief disruption of {product} that lasted under {d2} minutes and affected a [handful|small number] of customers.",
        "The {product} interruption on {day} was short, less than {d2} minutes, and only a few accounts noticed.")),
        {"product": product, "d2": str(d2), "day": fmt_day(t, 3)}),
        r.choice(("Your data was never at risk.", "No data was lost.", "Everything was fully restored.")),
        r.choice(("We are adding monitoring so it does not happen again.", "Happy to walk your team through it on a call.",
                  "We'll share a short summary once the review is done."))]
    ae_doc = org.add(st, "email", ae, at, org.email_text(ae, at, f"Re: {product} interruption", ae_body),
                     f"EMAIL-{at.year}-{org.counter('email'):05d}")
    st.data["ae"] = (ae, ae_doc, d2, cust)
    # support account (overstates)
    sup = org.pick_people(t, funcs=("support", "cs"), exclude=(ae,))[0]
    stt = org.at_work(t, r.uniform(1, 4))
    org.now = stt
    n3 = int(n_cust * r.uniform(1.2, 1.8))
    hours = max(2, int(dur / 60 * r.uniform(2.5, 5)))
    sup_body = [f"I want to add the support view to the {inc} review, because it looks different from the incident report.",
                f"Customers felt impact for over {hours} hours, since queued {org.items_word} kept failing after the fix.",
                f"We received tickets from {n3} customers, not {n_cust}, and {max(2, n3 // 12)} of them were Enterprise accounts.",
                r.choice(("Please use these numbers in the customer summary.", "Can we correct the impact section?",
                          "I'd like this reflected in the postmortem."))]
    sup_body.extend(org.bank_lines("support", r.randint(0, 3)))
    sup_doc = org.add(st, "email", sup, stt, org.email_text(sup, stt, f"{inc}: support view of the impact", sup_body),
                      f"EMAIL-{stt.year}-{org.counter('email'):05d}")
    st.data["support"] = (sup, sup_doc, hours, n3)
    # postmortem
    lead = org.pick_people(t, funcs=("sre", "eng"), senior=True)[0]
    pt = org.at_work(t, r.uniform(2, 6))
    org.now = pt
    pm = [f"Postmortem: {inc}, {symptom} on {product}. Author: {lead.name} ({lead.role(pt)}). Severity: SEV{sev}.",
          f"Summary: {symptom} for {dur} minutes ({start_h:%H:%M}-{end_h:%H:%M} UTC); about {n_cust} customers affected.",
          f"Root cause: {cause_a}.",
          org.fill("Timeline: alert at {t1}, rollback started at {t2}, recovery confirmed at {t3}.",
                   {"t1": f"{start_h:%H:%M}", "t2": f"{(start_h + timedelta(minutes=dur // 2)):%H:%M}", "t3": f"{end_h:%H:%M}"}),
          org.fill("What went well: [fast detection|the runbook worked|clear communication in #incidents].", over),
          org.fill("What went badly: [the status page was updated late|alerts fired too late|the {component} had no dashboard].", over),
          "Action items: " + "; ".join(org.fill(a, over, cap=False) for a in r.sample(ACTIONS, r.randint(2, 4))) + "."]
    pm.extend(org.bank_lines("sre", r.randint(2, 8)))
    post = org.add(st, "incident", lead, pt, "\n".join(pm), inc)
    st.data.update(report=report, post=post, lead=lead, oncall=oncall)
    st.data["corrected"] = False
    if corrected:
        # the finding, then the correction, weeks later, by someone else
        eng = org.pick_people(t, funcs=("eng", "sre"), exclude=(lead,))[0]
        ft = org.at_work(pt, r.uniform(8, 30))
        org.now = ft
        key = org.next_ticket("eng")
        fbody = [f"While working on the {inc} follow-ups ({symptom} on {product}, {fmt_day(t, r.randint(0, 3))}) I found that "
                 f"the postmortem's explanation does not hold.",
                 f"Evidence: {org.fill(r.choice(('the {component} metrics show the problem starting before the spike', 'we reproduced it in staging without any extra load', 'the same pattern shows up in logs from {n} earlier days')), over)}.",
                 f"It looks like {cause_b}."]
        fbody.extend(org.bank_lines("eng", r.randint(1, 4)))
        finding = org.add(st, "ticket", eng, ft, f"{key}: {inc} root cause re-examined\nReporter: {eng.name} ({eng.role(ft)}). Priority: P2.\n" + " ".join(fbody), key)
        corr_author = org.decider(ft, ("eng", "sre"), exclude=(lead,))
        ct = org.at_work(ft, r.uniform(2, 12))
        org.now = ct
        cbody = [f"Correction to the {inc} postmortem of {fmt_day(pt, r.randint(0, 2))} "
                 f"({r.choice(('the ', ''))}{product} {r.choice(('outage', 'incident', symptom))} of {fmt_day(t, r.randint(0, 3))}).",
                 f"The root cause was not {cause_a}, as the postmortem said.",
                 f"It was {cause_b}; see {key} for the evidence.",
                 org.fill(r.choice(("[Traffic|Load] was not the cause.", "The original action items do not address it.",
                                    "The fix is [deployed|scheduled for {weekday}].")), over),
                 org.fill(r.choice(("New action items: [pin the {vendor} SDK|add an alarm on the {component}|add a regression test]; [update the runbook|re-run the drill].",
                                    "We are adding a [canary|regression test] so this cannot recur.")), over)]
        cbody.extend(org.bank_lines("eng", r.randint(0, 3)))
        if r.random() < 0.5:
            corr = org.add(st, "incident", corr_author, ct, "\n".join(cbody), inc,
                           meta={"revises": post} if r.random() < 0.5 else None)
        else:
            corr = org.add(st, "email", corr_author, ct, org.email_text(corr_author, ct, f"{inc}: corrected root cause", cbody),
                           f"EMAIL-{ct.year}-{org.counter('email'):05d}", meta={"revises": post} if r.random() < 0.5 else None)
        st.data.update(corrected=True, finding=finding, corr=corr, corr_author=corr_author)
    return st


def dispute(org: Org, t: datetime) -> Story:
    r = org.rng
    st = Story("dispute", True)
    t = org.at_work(t)
    org.now = t
    cust = r.choice(org.customers)
    years = r.choice(("two-year", "three-year"))
    approver = org.decider(t, ("sales", "finance"))
    ae = org.pick_people(t, funcs=("sales", "cs"), exclude=(approver,))[0]
    fin = org.pick_people(t, funcs=("finance",), exclude=(approver, ae))[0]
    cap = r.choice((10, 12, 15, 18, 20))
    claimed = cap + r.choice((5, 8, 10))
    signed = r.choice((cap + 2, claimed - 2, claimed))
    att = [approver, ae, fin] + org.pick_people(t, funcs=("sales", "finance"), k=r.randint(0, 2), exclude=(approver, ae, fin))
    notes = ["Deal desk, " + fmt_day(t, 0) + ". Present: " + org.attendees(att, t) + ".",
             f"{cust} {years} renewal: {ae.first} asked for room on price because {org.fill(r.choice(('a competitor offered {pct}% off', 'their budget was cut', 'they are consolidating vendors')))}.",
             r.choice((f"{approver.first} agreed to a discount but the number was not written down.",
                       f"Discussion of the discount; {approver.first} to confirm the final number by email.",
                       f"General agreement to be flexible on {cust}; exact cap to be confirmed."))]
    notes.extend(org.bank_lines("sales", r.randint(6, 14)))
    thread = f"DEAL-{slug(cust).upper()}"
    n1 = org.add(st, "meeting", r.choice(att), t, "\n".join(notes), thread)
    t2 = org.at_work(t, r.uniform(1, 4))
    org.now = t2
    b = [f"Good news on {cust}: {approver.first} approved up to {claimed}% for the {years} renewal at the deal desk.",
         r.choice(("I'm sending the order form today.", "They want to sign before month-end.", "Legal has the redlines."))]
    b.extend(org.bank_lines("sales", r.randint(1, 5)))
    ae_doc = org.add(st, "email", ae, t2, org.email_text(ae, t2, f"{cust} renewal discount", b), thread)
    t3 = org.at_work(t2, r.uniform(1, 6))
    org.now = t3
    b = [f"On {cust}: the cap {approver.first} approved at the deal desk was {cap}%, not {claimed}%.",
         f"{claimed}% was only on the table with {r.choice(('a three-year prepayment', 'annual prepayment', 'a 500-seat commitment'))}.",
         r.choice(("Please don't send an order form above the cap.", "Anything above it needs a new approval.",
                   "I've noted this in the deal record."))]
    b.extend(org.bank_lines("finance", r.randint(0, 4)))
    fin_doc = org.add(st, "email", fin, t3, org.email_text(fin, t3, f"{cust} renewal discount", b, reply=True), thread)
    docs = [ae_doc, fin_doc]
    sg = None
    if r.random() < 0.6:
        t4 = org.at_work(t3, r.uniform(5, 30))
        org.now = t4
        sg_txt = f"{cust} signed the {years} renewal at {signed}% with annual payment. " + (
            f"That is above the {cap}% cap, flagging for review." if signed > cap else "Within the approved cap.")
        sg = org.add(st, "chat", fin if r.random() < 0.5 else approver, t4, sg_txt,
                     f"#{slug('finance')}/{t4:%Y%m%d-%H%M}")
    st.data.update(cust=cust, cap=cap, claimed=claimed, signed=signed, approver=approver, ae=ae, fin=fin,
                   notes=n1, ae_doc=ae_doc, fin_doc=fin_doc, sg=sg, t=t, years=years)
    return st


# =============================================================================================
# Background traffic
# =============================================================================================


def bg_chat(org, t, budget):
    r = org.rng
    team = r.choice(org.team_names) if r.random() < 0.75 else None
    room = "#" + (slug(team) if team else r.choice(("general", "random", "announcements", "help-it", "incidents")))
    members = org.team_members(t, team) if team else []
    if len(members) < 2:
        members = org.pick_people(t, k=min(6, len(org.people)))
    k = min(budget, r.choice((1, 1, 2, 2, 3, 3, 4, 5, 6, 8)))
    lines = []
    last = None
    for i in range(k):
        p = r.choice([m for m in members if m is not last] or members)
        if i > 0 and r.random() < 0.25:
            text = org.fill(r.choice(CHATTER_ALT)) + (" " + org.say(CHAT) if r.random() < 0.5 else "")
        else:
            text = org.chat_sentences(p.func(t), r.choice((1, 1, 2, 2, 3)))
        lines.append((p, text))
        last = p
    org.chat_burst(None, t, room, None, lines)
    return k


def bg_email(org, t, budget):
    r = org.rng
    k = min(budget, r.choice((1, 1, 1, 2, 2, 3, 4)))
    author = r.choice(org.people)
    subject = org.say(EMAIL_SUBJECTS)
    thread = f"EMAIL-{t.year}-{org.counter('email'):05d}"
    tt = t
    for i in range(k):
        func = author.func(tt)
        body = org.bank_lines(func, r.randint(3, 10))
        if r.random() < 0.2:
            body.insert(r.randint(0, len(body)), org.say(CHAT))
        to = org.pick_people(tt, k=r.randint(1, 3), exclude=(author,))
        org.add(None, "email", author, tt, org.email_text(author, tt, subject, body, to=to, reply=i > 0), thread)
        author = r.choice(to)
        tt = org.at_work(tt, r.uniform(0.05, 2))
    return k


def bg_ticket(org, t, budget):
    r = org.rng
    author = r.choice(org.people)
    func = author.func(t)
    key = org.next_ticket(func)
    title = org.say(TICKET_TITLES)
    pri = r.choice(("P1", "P2", "P2", "P3", "P3", "P4"))
    body = org.bank_lines(func, r.randint(3, 10))
    text = f"{key}: {title}\nReporter: {author.name}. Priority: {pri}. Component: {org.base['system']()}.\n" + " ".join(body)
    org.add(None, "ticket", author, t, text, key)
    n = 1
    k = min(budget - 1, r.choice((0, 0, 1, 1, 2, 3)))
    tt = t
    for _ in range(k):
        tt = org.at_work(tt, r.uniform(0.1, 5))
        p = r.choice(org.people)
        body = org.bank_lines(p.func(tt), r.randint(3, 6))
        org.add(None, "ticket", p, tt, " ".join(body), key)
        n += 1
    return n


def bg_meeting(org, t, budget):
    r = org.rng
    team = r.choice(org.team_names)
    func = org.team_func[team]
    title = r.choice(MEETING_TITLES.get(func, MEETING_TITLES["exec"]) + ["{team} retro", "All-hands",
                                                                        "Customer review: {customer}"])
    title = title.replace("{team}", team).replace("{customer}", r.choice(org.customers))
    members = org.team_members(t, team)
    att = r.sample(members, min(len(members), r.randint(2, 6))) if len(members) >= 2 else org.pick_people(t, k=4)
    if len(att) < 3:
        att = att + org.pick_people(t, k=3 - len(att) + 1, exclude=att)
    scribe = r.choice(att)
    n = r.randint(10, 38)
    lines = [f"{title}, {fmt_day(t, r.choice((0, 1, 2)))}. {r.choice(('Present', 'Attendees'))}: {org.attendees(att, t)}."]
    lines.extend(org.bank_lines(func, n - 2))
    if r.random() < 0.3:
        lines.insert(r.randint(1, len(lines)), org.fill(r.choice((
            "[Decision|Agreed]: {first} owns the {feature} rollout for {product}.",
            "[Decision|Agreed]: push the {system} migration to {month}.",
            "[Decision|Agreed]: keep the current {ksubj} for now; revisit in {month}.",
        ))))
    owners = r.sample(att, min(len(att), r.randint(1, 3)))
    lines.append("Action items: " + "; ".join(f"{p.first} to {org.fill(r.choice(ACTIONS), cap=False)}" for p in owners) + ".")
    thread = f"MEET-{slug(title).upper()}-{t:%Y-%m-%d}"
    emit = t + timedelta(days=r.uniform(1.5, 6)) if r.random() < 0.12 else None
    org.add(None, "meeting", scribe, t, "\n".join(lines), thread, emit=emit)
    used = 1
    if budget > 1 and r.random() < 0.15:
        write_transcript(org, None, t, title, att, [], thread, emit)
        used += 1
    return used


def bg_policy(org, t, budget):
    r = org.rng
    title = r.choice(BG_POLICIES)
    owner = org.decider(t, ("people", "finance", "security", "legal"))
    lines = [f"{title} (owner: {owner.name}, {owner.role(t)}; effective {fmt_day(t + timedelta(days=r.randint(0, 20)), 0)})."]
    prior = org.counter("policy:" + title) - 1  # revisions of this policy before this one
    if prior and r.random() < 0.8:
        lines.append(f"This revision replaces the previous {title.lower()}.")
    lines.extend(org.say_many(POLICY_LINES, r.randint(10, 30)))
    org.add(None, "policy", owner, t, "\n".join(lines), f"POLICY-{slug(title).upper()}")
    return 1


def role_change_doc(org, t, p, kind, before):
    r = org.rng
    org.now = t
    boss = org.execs[0] if org.execs[0] is not p else org.people[-1]
    role = p.role(t + timedelta(minutes=1))
    if kind == "promotion":
        text = org.fill(r.choice((
            "Please join me in congratulating {name} on [a|their] promotion to {role}[, effective today|]!",
            "Congratulations to {name}, who [is now|becomes] {role}. [Well deserved.|Thank you for everything so far.]",
            "[Announcement|Org update]: {name} [has been promoted to|takes on the role of] {role}, [previously|until now] {before}.",
        )), {"name": p.name, "role": role, "before": before})
    else:
        text = org.fill(r.choice((
            "[Org update|Team change]: {name} moves [from|over from] {before} to become {role}[ from this week|].",
            "{name} is joining a new team as {role}; [until now|previously] {before}. [Please make them welcome.|]",
        )), {"name": p.name, "role": role, "before": before})
    if r.random() < 0.5:
        extra = [org.fill(r.choice((
            "[They|{first}] will [keep working on|take over] {feature} [for now|as part of the move].",
            "[Please|Do] reach out to {first} [directly|] with [questions|anything urgent] [during the handover|this month].",
            "[A proper welcome|Drinks] [on {weekday}|next week] in {city}.",
            "[Thank you|Thanks] for [all the work|everything] on {product} so far.",
        )), {"first": p.first}) for _ in range(2)]
        org.add(None, "email", boss, t, org.email_text(boss, t, org.fill("[Org update|Team news]: {n}", {"n": p.name}), [text] + extra),
                f"EMAIL-{t.year}-{org.counter('email'):05d}")
    else:
        org.add(None, "chat", boss, t, text, f"#announcements/{t:%Y%m%d-%H%M}")
