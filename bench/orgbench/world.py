"""OrgBench's world: the people, the organization and its documents, as the storylines see them.

Owns :class:`Person` (roles that change over time), :class:`Story` (a storyline's documents and
facts), ``Org`` (an organization: its people, teams, products, customers and vendors, its
random streams, the documents it emits and the sentences it fills from the tables). Imports the
standard library, numpy, ``tables``, ``templates`` and ``wording``; never the storylines, the
questions or the assembly, which import it.
"""

from __future__ import annotations

import math
import random
import re
from bisect import bisect_right
from datetime import datetime, timedelta

import numpy as np

from .tables import (
    ACCTS, BANKS, CHAT, CHATTER_KINDS, CITIES, COMPONENTS, CUST_A, CUST_B, EXEC_FUNCS, EXEC_TITLES,
    EXTERNAL_CHATTER_KINDS, FEATURES, FIRST_NAMES, FRAMEWORKS, FUNC_BANKS, INDUSTRIES, LADDERS, LAST_NAMES,
    MONTHS, ORG_A, ORG_B, PRODUCT_SUFFIX, PRODUCT_WORDS, REGIONS, RELATED, SEGMENTS, SYS_A, SYS_B, TEAMS,
    TICKET_PROJECT, TIERS, VCATS, VENDOR_A, VENDOR_B, WEEKDAYS,
)
from .templates import compile_template, render, tidy
from .wording import fmt_day, quarter, slug


class Person:
    __slots__ = ("name", "first", "last", "starts", "roles", "func0", "exec_title", "idx")

    def __init__(self, idx, first, last):
        self.idx = idx
        self.name = f"{first} {last}"
        self.first = first
        self.last = last
        self.starts: list[datetime] = []
        self.roles: list[tuple[str, str, int]] = []  # (team, func, level)
        self.exec_title = None

    def at(self, t: datetime) -> tuple[str, str, int]:
        i = bisect_right(self.starts, t) - 1
        return self.roles[max(i, 0)]

    def role(self, t: datetime) -> str:
        if self.exec_title:
            return self.exec_title
        team, func, level = self.at(t)
        title = LADDERS[func][level].replace("{team}", team)
        if level < len(LADDERS[func]) - 1 and team not in title:
            title = f"{title}, {team}"
        return title

    def func(self, t: datetime) -> str:
        return "exec" if self.exec_title else self.at(t)[1]

    def team(self, t: datetime) -> str:
        return "Executive" if self.exec_title else self.at(t)[0]

    def senior(self, t: datetime) -> bool:
        return bool(self.exec_title) or self.at(t)[2] >= 2


class Story:
    """The documents of one storyline (a decision topic, an incident, a deal dispute)."""

    __slots__ = ("kind", "docs", "tracked", "data")

    def __init__(self, kind, tracked):
        self.kind = kind
        self.tracked = tracked
        self.docs: list[dict] = []
        self.data: dict = {}


# =============================================================================================
# One organization
# =============================================================================================


class Org:
    def __init__(self, idx: int, n_docs: int, seed: int, n_orgs: int, used_names: set, total_docs: int):
        self.rng = rng = random.Random(f"orgbench/{seed}/{idx}")
        self.np = np.random.default_rng([seed & 0xFFFFFFFF, idx, 7])
        self.n = n_docs
        self.n_orgs = n_orgs
        self.total_docs = total_docs
        self.docs: list[dict] = []
        self.questions: list[dict] = []
        self.texts_seen: set = set()
        # ---- identity and time span ----
        for _ in range(100):
            name = f"{rng.choice(ORG_A)} {rng.choice(ORG_B)}"
            if name not in used_names:
                break
        else:
            name = f"{rng.choice(ORG_A)} {rng.choice(ORG_B)} {idx}"
        used_names.add(name)
        self.name = name
        self.scope = slug(name)
        self.industry, self.items_word, self.item_word = rng.choice(INDUSTRIES)
        years = min(3.0, max(1.0, 1.0 + math.log10(max(n_docs, 1) / 500.0)))
        self.span_days = int(round(365 * years))
        self.start = datetime(2021, 1, 4) + timedelta(days=rng.randint(0, 700))
        self.end = self.start + timedelta(days=self.span_days)
        self.now = self.start
        # ---- vocabulary ----
        # products and services come in families ("Atlas", "Atlas Pay"; "billing-api", "billing-worker")
        n_prod = min(12, 3 + n_docs // 12000)
        words = rng.sample(PRODUCT_WORDS, (n_prod + 1) // 2)
        self.products = []
        for w in words:
            sufs = rng.sample([x for x in PRODUCT_SUFFIX if x], 2)
            self.products.extend([w + rng.choice(("", sufs[1])), w + sufs[0]])
        self.products = self.products[:n_prod]
        n_sys = min(80, 6 + n_docs // 1300)
        self.systems = []
        for a in rng.sample(SYS_A, min(len(SYS_A), max(2, (n_sys + 2) // 3))):
            self.systems.extend(f"{a}-{b}" for b in rng.sample([x for x in SYS_B if x != a], 3))
        self.systems = self.systems[:n_sys]
        n_cust = min(520, 10 + n_docs // 200)
        combos = [f"{a} {b}" for a in CUST_A for b in CUST_B]
        self.customers = rng.sample(combos, n_cust)
        self.offices = rng.sample(CITIES, min(6, 2 + n_docs // 20000))
        self.regions = rng.sample(REGIONS, 4)
        vnames = rng.sample([a + b for a in VENDOR_A for b in VENDOR_B], 5 * len(VCATS))
        self.vendors = {}
        for i, (cat, _) in enumerate(VCATS):
            self.vendors[cat] = vnames[5 * i: 5 * i + rng.randint(3, 5)]
        self.all_vendors = [v for vs in self.vendors.values() for v in vs]
        self.features = rng.sample(FEATURES, min(len(FEATURES), 10 + n_docs // 4000))
        # ---- people ----
        self._build_people(used_names)
        for x in self.products + self.customers + self.all_vendors + self.offices:
            self.proper.add(x.split(" ")[0])
        self.proper.update(("I", "I'm", "I'll", "I've", "I'd", "SSO", "SCIM", "CSAT", "MFA", "CI", "PR", "DSO", "AWS",
                            "Q1", "Q2", "Q3", "Q4", "Deal", "Finance", "Legal", "Security", "Staging", "Canary"))
        self.proper.update(MONTHS)
        self.proper.update(WEEKDAYS)
        self._counters: dict[str, int] = {}
        self.ticket_no = {p: rng.randint(1000, 6000) for p in sorted(set(TICKET_PROJECT.values()))}
        self.inc_ids: set = set()
        self.topic_subjects: list[list[str]] = []
        self._last_region = None
        self.ext_topic_subjects: list[list[str]] = []
        # ---- slot functions for the template language ----
        r = rng
        self.base = {
            "product": lambda: r.choice(self.products),
            "system": lambda: r.choice(self.systems),
            "customer": lambda: r.choice(self.customers),
            "vendor": lambda: r.choice(self.all_vendors),
            "team": lambda: r.choice(self.team_names),
            "city": lambda: r.choice(self.offices),
            "region": self._region,
            "region2": lambda: r.choice([x for x in self.regions if x != self._last_region]),
            "person": lambda: r.choice(self.people).name,
            "first": lambda: r.choice(self.people).first,
            "feature": lambda: r.choice(self.features),
            "component": lambda: r.choice(COMPONENTS),
            "items": lambda: self.items_word,
            "item": lambda: self.item_word,
            "org": lambda: self.name,
            "n": lambda: str(r.randint(2, 9)),
            "n2": lambda: str(r.randint(2, 6)),
            "num": lambda: str(r.randint(11, 480)),
            "big": lambda: f"{r.randint(1, 90) * 1000:,}",
            "pct": lambda: str(r.randint(3, 64)),
            "pct2": lambda: f"{r.randint(1, 99) / 10:.1f}",
            "ms": lambda: str(r.choice((40, 60, 85, 120, 180, 240, 320, 450, 600, 850, 1200, 1900, 2400))),
            "ms2": lambda: str(r.choice((35, 55, 90, 110, 150, 210, 300, 410, 520))),
            "money": lambda: str(r.choice((4, 6, 8, 12, 15, 18, 24, 31, 38, 42, 55, 68, 84, 96, 120, 140, 190, 240, 310))),
            "money2": lambda: str(r.choice((150, 180, 200, 250, 300, 350, 400, 500))),
            "amount": lambda: f"{r.randint(120, 48000):,}",
            "weekday": lambda: r.choice(WEEKDAYS),
            "month": lambda: MONTHS[(self.now.month - 1 - r.choice((0, 0, 1, 1, 2, 3))) % 12],
            "quarter": lambda: quarter(self.now),
            "time": lambda: f"{r.randint(8, 18)}:{r.choice(('00', '15', '30', '45'))}",
            "ticket": lambda: f"{r.choice(('SUP', 'ENG', 'OPS', 'FIN', 'SEC'))}-{r.randint(1000, 9999)}",
            "pr": lambda: f"#{r.randint(200, 9800)}",
            "version": lambda: f"v{r.randint(1, 6)}.{r.randint(0, 19)}.{r.randint(0, 9)}",
            "framework": lambda: r.choice(FRAMEWORKS),
            "dur": lambda: r.choice(("12 minutes", "25 minutes", "40 minutes", "an hour", "90 minutes", "2 hours",
                                     "3h10m", "4 hours", "1h45m", "6 hours")),
            "days": lambda: str(r.choice((5, 7, 10, 14, 15, 20, 21, 28, 30, 45, 60))),
            "dom": lambda: r.choice(("5th", "7th", "10th", "12th", "15th", "20th", "25th", "last day of the month")),
            "metric": lambda: r.choice(("usage", "latency", "error-rate", "revenue", "signup", "ticket-volume")),
            "sev": lambda: str(r.randint(1, 3)),
            "ksubj": self._random_subject,
            "xsubj": lambda: self._random_subject(True),
            "date": lambda: fmt_day(self.now + timedelta(days=r.randint(-20, 20)), r.randint(0, 4)),
            "room": lambda: "#" + slug(r.choice(self.team_names)),
        }

    # ------------------------------------------------------------------ people
    def _build_people(self, used_names):
        rng = self.rng
        n_people = max(6, int(round(10 * (self.n / 500.0) ** 0.565)))
        n_teams = max(4, min(len(TEAMS), int(round(2 + n_people ** 0.5))))
        core = TEAMS[:5]
        rest = TEAMS[5:]
        teams = list(core) + rng.sample(rest, max(0, n_teams - 5)) if n_teams > 5 else list(core[:n_teams])
        self.teams = teams
        self.team_names = [t[0] for t in teams]
        self.team_func = {t[0]: t[1] for t in teams}
        people = []
        seen = set()
        while len(people) < n_people:
            f, l = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            if (f, l) in seen or f"{f} {l}" in used_names:
                continue
            seen.add((f, l))
            people.append(Person(len(people), f, l))
        n_exec = 1 + (n_people >= 8) + (n_people >= 20) + (n_people >= 40) + (n_people >= 80)
        t0 = self.start - timedelta(days=400)
        for i, p in enumerate(people[:n_exec]):
            p.exec_title = EXEC_TITLES[i]
            p.starts = [t0]
            p.roles = [("Executive", "exec", 9)]
        staff = people[n_exec:]
        weights = [t[2] for t in teams]
        assign = [teams[i % len(teams)] for i in range(len(staff))]
        for i in range(len(teams), len(staff)):
            assign[i] = rng.choices(teams, weights)[0]
        has_top: set = set()
        for p, (team, func, _) in zip(staff, assign):
            ladder = LADDERS[func]
            top = len(ladder) - 1
            if team not in has_top and len(staff) > 2 * len(teams) and rng.random() < 0.5:
                level = top
                has_top.add(team)
            else:
                level = rng.choice((0, 0, 1, 1, 1, 2, 2, 3)) if top >= 3 else rng.choice((0, 1, 1, 2))
                level = min(level, top - 1)
            p.starts = [t0]
            p.roles = [(team, func, level)]
        # every team has a senior person
        for team, func, _ in teams:
            members = [p for p in staff if p.roles[0][0] == team]
            if members and not any(p.roles[0][2] >= 2 for p in members):
                p = members[0]
                p.roles[0] = (team, func, min(2, len(LADDERS[func]) - 2))
        # role changes over the span: promotions and team moves
        self.role_changes: list[tuple[datetime, Person, str, str]] = []
        years = self.span_days / 365.0
        for p in staff:
            k = min(3, int(self.np.poisson(0.55 * years)))
            if k == 0:
                continue
            days = sorted(rng.sample(range(20, self.span_days - 10), k))
            for d in days:
                t = self.start + timedelta(days=d, hours=rng.randint(9, 16))
                team, func, level = p.roles[-1]
                top = len(LADDERS[func]) - 1
                before = p.role(t)
                same = [tt for tt in teams if tt[1] == func and tt[0] != team]
                if level < top - 1 and (rng.random() < 0.65 or not same):
                    p.starts.append(t)
                    p.roles.append((team, func, level + 1))
                    kind = "promotion"
                elif same and level < top:
                    nt = rng.choice(same)
                    p.starts.append(t)
                    p.roles.append((nt[0], func, level))
                    kind = "move"
                else:
                    continue
                self.role_changes.append((t, p, kind, before))
        self.people = people
        self.staff = staff
        self.execs = people[:n_exec]
        for p in people:
            used_names.add(p.name)
        self.proper = set()
        for p in people:
            self.proper.add(p.first)
        self.first_count: dict[str, int] = {}
        self.last_count: dict[str, int] = {}
        for p in people:
            self.first_count[p.first] = self.first_count.get(p.first, 0) + 1
            self.last_count[p.last] = self.last_count.get(p.last, 0) + 1

    # ------------------------------------------------------------------ text primitives
    def get_fn(self, over):
        base = self.base
        choice = self.rng.choice

        def get(name):
            v = over.get(name) if over else None
            if v is None:
                return base[name]()
            if type(v) is str:
                return v
            if type(v) is list:
                return choice(v)
            return v()

        return get

    def say(self, bank, over=None) -> str:
        choice = self.rng.choice
        return tidy(render(choice(bank), self.get_fn(over), choice))

    def fill(self, template: str, over=None, cap: bool = True) -> str:
        """Render a template string (compiled once and cached; used for small, per-topic text)."""
        node = _TPL_CACHE.get(template)
        if node is None:
            node = _TPL_CACHE[template] = compile_template(template)
        out = tidy(render(node, self.get_fn(over), self.rng.choice))
        return out if cap else self.decap(out)

    def fill_lc(self, template: str, over=None) -> str:
        return self.fill(template, over, cap=False)

    def decap(self, s: str) -> str:
        """Lower-case the first letter unless the sentence starts with a name."""
        if not s or not s[0].isupper():
            return s
        w = s.split(" ", 1)[0].rstrip(",:;.")
        if w in self.proper or (len(w) > 1 and (w[1].isupper() or w[1].isdigit())):
            return s
        return s[0].lower() + s[1:]

    def say_many(self, bank, k) -> list[str]:
        """``k`` sentences from ``bank``, avoiding repeated templates while the bank lasts."""
        r = self.rng
        get = self.get_fn(None)
        out = []
        while k > 0:
            picks = r.sample(bank, min(k, len(bank)))
            out.extend(tidy(render(t, get, r.choice)) for t in picks)
            k -= len(picks)
        return out

    def bank_lines(self, func: str, k: int) -> list[str]:
        """``k`` work sentences for someone in ``func``: mostly from their own bank, no template twice."""
        if k <= 0:
            return []
        r = self.rng
        names = FUNC_BANKS.get(func, ("eng",))
        if k == 1:
            return [self.say(BANKS[names[0] if r.random() < 0.6 else r.choice(names)])]
        k0 = sum(1 for _ in range(k) if r.random() < 0.6)
        out = self.say_many(BANKS[names[0]], k0)
        rest = k - k0
        if rest:
            pool = [t for nm in names[1:] for t in BANKS[nm]] or BANKS[names[0]]
            out.extend(self.say_many(pool, rest))
        r.shuffle(out)
        return out

    def _region(self) -> str:
        self._last_region = self.rng.choice(self.regions)
        return self._last_region

    def _random_subject(self, external=False) -> str:
        pool = self.ext_topic_subjects if external else self.topic_subjects
        if pool and self.rng.random() < 0.45:
            return self.rng.choice(self.rng.choice(pool))
        k = self.rng.choice(EXTERNAL_CHATTER_KINDS if external else CHATTER_KINDS)
        ent = self._random_entity(k, self.now)
        if ent is None:
            return "travel policy"
        return self._subj(k, ent, self.rng.choice(k.subj))

    def _subj(self, kind, ent, tpl):
        return tpl.format(**ent)

    def _random_entity(self, kind, t):
        r = self.rng
        e = kind.ent
        if e == "product":
            return {"e": r.choice(self.products)}
        if e == "system":
            return {"e": r.choice(self.systems)}
        if e == "office":
            return {"e": r.choice(self.offices)}
        if e == "vcat":
            return {"e": r.choice(VCATS)[0]}
        if e == "segment":
            return {"e": r.choice(SEGMENTS)}
        if e == "team":
            return {"e": r.choice(self.team_names)}
        if e == "team_year":
            return {"team": r.choice(self.team_names), "year": str(t.year)}
        if e == "plan":
            return {"e": f"{r.choice(self.products)} {r.choice(TIERS)}"}
        if e == "customer":
            return {"e": r.choice(self.customers)}
        if e == "acct":
            return {"e": r.choice(ACCTS)}
        if e == "year":
            return {"e": str(t.year)}
        return None

    def entities(self, kind) -> list[dict]:
        e = kind.ent
        if e == "product":
            return [{"e": x} for x in self.products]
        if e == "system":
            return [{"e": x} for x in self.systems]
        if e == "office":
            return [{"e": x} for x in self.offices]
        if e == "vcat":
            return [{"e": c} for c, _ in VCATS]
        if e == "segment":
            return [{"e": x} for x in SEGMENTS]
        if e == "team":
            if kind.key in ("oncall_rotation",):
                return [{"e": t} for t in self.team_names if self.team_func[t] in ("eng", "sre", "security")]
            if kind.key in ("sprint_length", "cloud_budget"):
                return [{"e": t} for t in self.team_names if self.team_func[t] in ("eng", "sre", "product", "design")]
            return [{"e": t} for t in self.team_names]
        if e == "team_year":
            return [{"team": t, "year": None} for t in self.team_names]
        if e == "plan":
            return [{"e": f"{p} {tier}"} for p in self.products for tier in TIERS]
        if e == "customer":
            return [{"e": c} for c in self.customers]
        if e == "acct":
            return [{"e": a} for a in ACCTS]
        if e == "year":
            return [{"e": None}]
        return []

    # ------------------------------------------------------------------ people helpers
    def pick_people(self, t, funcs=None, k=1, exclude=(), senior=False):
        cands = [p for p in self.people if p not in exclude and (funcs is None or p.func(t) in funcs)
                 and (not senior or p.senior(t))]
        if len(cands) < k:
            more = [p for p in self.people if p not in exclude and p not in cands and (not senior or p.senior(t))]
            cands += more
        if len(cands) < k:
            cands = [p for p in self.people if p not in exclude] or list(self.people)
        return self.rng.sample(cands, min(k, len(cands)))

    def decider(self, t, funcs, exclude=()):
        r = self.rng
        cands = [p for p in self.staff if p not in exclude and p.func(t) in funcs and p.senior(t)]
        execs = [p for p in self.execs if p not in exclude and any(f in EXEC_FUNCS[p.exec_title] for f in funcs)]
        if execs and (not cands or r.random() < 0.25):
            return r.choice(execs)
        if cands:
            return r.choice(cands)
        near = tuple(g for f in funcs for g in RELATED.get(f, ()))
        cands = [p for p in self.staff if p not in exclude and p.func(t) in near and p.senior(t)]
        if cands:
            return r.choice(cands)
        if self.execs[0] not in exclude:
            return self.execs[0]
        cands = [p for p in self.people if p not in exclude and p.senior(t)]
        if cands:
            return r.choice(cands)
        return r.choice([p for p in self.people if p not in exclude])

    def team_members(self, t, team):
        return [p for p in self.people if p.team(t) == team]

    def ref_person(self, p: Person, t: datetime, allow_role=True) -> str:
        """How a question names a person: full, first only, last only, or by role (when unambiguous)."""
        r = self.rng.random()
        if allow_role and r < 0.2:
            role = p.role(t)
            if "," not in role and sum(1 for q in self.people if q.role(t) == role) == 1:
                return f"the {role}" if not role.startswith(("CEO", "CTO", "CFO", "COO")) else f"our {role}"
        if r < 0.45 and self.first_count[p.first] == 1:
            return p.first
        if r < 0.65 and self.last_count[p.last] == 1:
            return p.last
        return p.name

    def signature(self, p: Person, t: datetime) -> str:
        r = self.rng.randint(0, 4)
        role = p.role(t)
        if r == 0:
            return f"\n\n-- {p.name}\n{role}"
        if r == 1:
            return f"\n\nThanks,\n{p.name} | {role}"
        if r == 2:
            return f"\n\nBest,\n{p.first}\n{p.name}, {role}, {self.name}"
        if r == 3:
            return f"\n\n{p.first}\n({role})"
        return f"\n\nCheers,\n{p.name}\n{role}"

    def attendees(self, people, t) -> str:
        return ", ".join(f"{p.name} ({p.role(t)})" for p in people)

    # ------------------------------------------------------------------ time helpers
    def worktime(self, day_offset: float) -> datetime:
        r = self.rng
        d = self.start + timedelta(days=int(day_offset))
        wd = d.weekday()
        if wd >= 5 and r.random() < 0.85:
            d += timedelta(days=7 - wd if r.random() < 0.6 else -(wd - 4))
        return d.replace(hour=r.choice((8, 9, 9, 10, 10, 11, 11, 12, 13, 14, 14, 15, 15, 16, 16, 17, 18)),
                         minute=r.randint(0, 59), second=r.randint(0, 59))

    def at_work(self, t: datetime, days: float = 0.0) -> datetime:
        """A working-hours moment about ``days`` after ``t``."""
        off = (t - self.start).total_seconds() / 86400.0 + days
        return self.worktime(off)

    # ------------------------------------------------------------------ documents
    def add(self, story, channel, author, t, text, thread, emit=None, meta=None):
        key = (author.name if author else "", text)
        if key in self.texts_seen:  # the engine treats identical text by the same author as a re-ingest
            text = text + self.rng.choice((" (resending)", " Thanks.", " See thread.", " -- updated", " (fwd)"))
            text = text + f" [{self.rng.randint(100, 999)}]" if (author.name if author else "", text) in self.texts_seen else text
        self.texts_seen.add((author.name if author else "", text))
        if channel == "chat":
            parts = _SENT_SPLIT.split(text)
            if len(parts) > 3:
                text = " ".join(parts[:3])
        d = {"_t": t, "_e": emit if emit is not None else t, "_n": len(self.docs), "channel": channel,
             "author": author.name if author else None, "text": text, "thread": thread}
        if meta:
            d["_meta"] = meta
        self.docs.append(d)
        if story is not None:
            story.docs.append(d)
        return d

    def next_ticket(self, func):
        proj = TICKET_PROJECT.get(func, "OPS")
        self.ticket_no[proj] += self.rng.randint(1, 7)
        return f"{proj}-{self.ticket_no[proj]}"

    def new_inc(self, t):
        base = f"INC-{t.year}-{t.month:02d}{t.day:02d}"
        i = base
        k = 2
        while i in self.inc_ids:
            i = f"{base}-{k}"
            k += 1
        self.inc_ids.add(i)
        return i

    def counter(self, name):
        self._counters[name] = self._counters.get(name, 0) + 1
        return self._counters[name]

    def email_text(self, author, t, subject, body, to=None, reply=False):
        r = self.rng
        parts = []
        if r.random() < 0.85:
            parts.append(f"Subject: {'Re: ' if reply else ''}{subject}")
        greet = r.random()
        if to and greet < 0.5:
            parts.append(f"Hi {', '.join(p.first for p in to[:3])},")
        elif greet < 0.75:
            parts.append(r.choice(("Hi all,", "Team,", "Hello,", "All,", "Hi everyone,")))
        parts.append(" ".join(body))
        return "\n".join(parts) + self.signature(author, t)

    # ------------------------------------------------------------------ chat / email / ticket units
    def chat_burst(self, story, t, room, people, lines, thread=None):
        """Chat messages in one thread; ``lines`` is a list of (person, text)."""
        thread = thread or f"{room}/{t:%Y%m%d-%H%M}"
        tt = t
        for p, text in lines:
            self.add(story, "chat", p, tt, text, thread)
            tt = tt + timedelta(minutes=self.rng.randint(1, 25))
        return thread

    def chat_sentences(self, func, k):
        out = []
        for _ in range(k):
            if self.rng.random() < 0.55:
                out.append(self.say(CHAT))
            else:
                out.extend(self.bank_lines(func, 1))
        return " ".join(out)


_TPL_CACHE: dict = {}
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+")
