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
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from bisect import bisect_right
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

__all__ = ["CATEGORIES", "generate", "write", "main"]

MIN_DOCS_PER_ORG = 100

CATEGORIES = (
    "supersession",
    "decision_provenance",
    "bi_temporal",
    "audit_replay",
    "justification_chain",
    "contradiction",
)

# =============================================================================================
# Template mini-language: "{slot}" is filled from the environment, "[a|b|]" picks one
# alternative (an empty one is allowed). Templates are compiled once at import.
# =============================================================================================


def _compile(s: str):
    pos = 0
    n = len(s)

    def seq(stops: str):
        nonlocal pos
        parts: list = []
        buf: list[str] = []
        while pos < n:
            c = s[pos]
            if c in stops:
                break
            if c == "[":
                if buf:
                    parts.append("".join(buf))
                    buf = []
                pos += 1
                alts = [seq("|]")]
                while pos < n and s[pos] == "|":
                    pos += 1
                    alts.append(seq("|]"))
                if pos >= n or s[pos] != "]":
                    raise ValueError(f"unbalanced [ in template {s!r}")
                pos += 1
                parts.append(alts)
            elif c == "{":
                end = s.index("}", pos)
                if buf:
                    parts.append("".join(buf))
                    buf = []
                parts.append((s[pos + 1:end],))
                pos = end + 1
            else:
                buf.append(c)
                pos += 1
        if buf:
            parts.append("".join(buf))
        return tuple(parts)

    node = seq("")
    if pos != n:
        raise ValueError(f"unbalanced ] or | in template {s!r}")
    return node


def _bank(items):
    return [_compile(s) for s in items]


def _render(node, get, choice) -> str:
    out = []
    for p in node:
        t = type(p)
        if t is str:
            out.append(p)
        elif t is tuple:
            out.append(get(p[0]))
        else:
            out.append(_render(choice(p), get, choice))
    return "".join(out)


def _tidy(s: str) -> str:
    if "  " in s:
        s = " ".join(s.split())
    if " ," in s:
        s = s.replace(" ,", ",")
    if " ." in s:
        s = s.replace(" .", ".")
    s = s.strip()
    if s and s[0].islower():
        s = s[0].upper() + s[1:]
    return s


# =============================================================================================
# Word banks (all invented; any resemblance to real organizations or people is coincidental)
# =============================================================================================

FIRST_NAMES = """
Aisha Lucas Maya Daniel Helen Grace Priya Tomas Sofia Owen Nadia Rui Marcus Elena Jonah Ines Tiago Marta
Kofi Amara Yuki Hiroshi Mei Chen Arjun Ravi Leila Omar Fatima Hassan Noor Zainab Emeka Chidi Ngozi Tunde
Lars Ingrid Freya Magnus Sven Astrid Pavel Katya Dmitri Olga Piotr Agnieszka Tomasz Zofia Mateo Lucia
Camila Diego Valentina Javier Carmen Pablo Isabel Andres Rosa Hugo Chloe Louis Margot Julien Elodie
Bruno Giulia Marco Chiara Luca Francesca Anna Jakob Lena Felix Mia Jonas Clara Nils Hannah Sam Riley
Jordan Taylor Morgan Casey Avery Quinn Rowan Sasha Robin Alex Jamie Kai Noah Liam Ethan Olivia Emma
Ava Sophia Isla Ella Zoe Ruby Leo Oscar Theo Arthur Henry Alice Rose Ivy Hazel Iris Nina Vera Mira
Anika Ishaan Kavya Rohan Sanjay Deepa Meera Vikram Tara Farid Reza Shirin Dariush Yasmin Tariq Samir
Layla Karim Rania Malik Adaeze Kwame Abena Yaw Efua Thabo Lerato Sipho Zanele Bongani Naledi Wei Jun
Ling Hana Jin Minho Seo Ji Bao Linh Thanh Duc Mai Rafael Beatriz Joao Ana Gabriel Helena Ciaran Aoife
Niamh Declan Siobhan Eamon Fiona Callum Isla Ewan Morag Gareth Bethan Rhys Carys Dylan Seren
""".split()

LAST_NAMES = """
Rahman Ferreira Okafor Reyes Brandt Mwangi Natarajan Lindqvist Ivanova Castellano Haddad Okoro Silva
Moreau Jensen Novak Kowalski Nakamura Tanaka Sato Chen Wang Li Zhang Liu Patel Shah Mehta Iyer Rao
Kapoor Gupta Singh Nair Menon Das Bose Khan Malik Hussain Qureshi Farouk Nasser Haddadi Karimi Tehrani
Adeyemi Okonkwo Mensah Boateng Asante Owusu Nkosi Dlamini Mokoena Ndlovu Banda Phiri Otieno Kamau
Wanjiru Hansen Larsen Nielsen Berg Dahl Holm Lund Eriksson Nilsson Johansson Virtanen Korhonen Muller
Schmidt Weber Fischer Wagner Becker Hoffmann Schulz Keller Richter Vogel Rossi Russo Ferrari Bianchi
Romano Greco Conti Ricci Marino Costa Garcia Martinez Lopez Sanchez Gomez Fernandez Ruiz Diaz Moreno
Alvarez Romero Navarro Torres Ramos Castro Ortega Vargas Mendoza Herrera Medina Aguilar Santos Oliveira
Pereira Almeida Carvalho Sousa Ribeiro Martins Rocha Dubois Laurent Lefebvre Girard Bonnet Fontaine
Chevalier Rousseau Leroy Murphy Kelly Walsh Byrne Ryan Doyle Gallagher Brennan Quinn Hughes Price
Morgan Evans Lloyd Powell Jenkins Parry Campbell Stewart MacLeod Fraser Ross Grant Duncan Hamilton
Kim Park Lee Choi Jung Kang Yoon Nguyen Tran Pham Hoang Vu Bui Dang Ahmed Aziz Rashid Volkov Petrov
Sokolov Popescu Ionescu Horvat Kovacs Szabo Nagy Dvorak Svoboda Abbott Barlow Calloway Whitfield
Ashdown Pemberton Harrow Lockwood Thornbury Everly Kingsley Marlowe Sutton Vance Winslow Ellery
""".split()

PRODUCT_WORDS = """
Atlas Beacon Cobalt Lumen Relay Meridian Keystone Harbor Summit Signal Quarry Orbit Pulse Vector Spire
Canopy Drift Ember Fathom Granite Helix Juniper Kite Lattice Mosaic Tally Ledger Route Claim Nova
Prism Tandem Vantage Willow Zephyr Anchor Bridge Compass Delta Falcon Glacier Horizon Iris Jetty
Kestrel Lark Monarch Nimbus Onyx Pioneer Quill Raven Sable Talon Umber Verge Wren
""".split()
PRODUCT_SUFFIX = ["", "", "", " Pay", " Connect", " Insights", " Mobile", " Studio", " Hub", " Desk", " Sync", " Flow"]

SYS_A = """
billing ledger auth search notify ingest export report sync payments webhook scheduler gateway identity
invoice pricing audit media geo ocr routing metrics session catalog quota mailer pdf import match risk
tenant config ledgerdb feeds approvals usage events files orders accounts
""".split()
SYS_B = ["api", "service", "worker", "sync", "gateway", "indexer", "pipeline", "store", "queue", "router", "etl", "engine"]

CUST_A = """
Acme Harbor Pinecrest Corvid Veldt Northwind Bluefin Copperleaf Driftwood Evergreen Foxglove Goldcrest
Highland Ironbridge Juniper Kingfisher Lakeside Maplewood Northstar Oakridge Peregrine Quayside Redwood
Silverline Thornfield Upland Valemont Westbrook Yellowpine Zenith Alder Birchwood Cedarview Dunmore
Elmstead Fairhaven Glenrock Hawthorne Ivywood Kestrelwood Larkspur Millbrook Newhaven Orchard Parkline
Queensbury Riverside Stonegate Tidewater Unionvale Vantage Whitmore Ashford Blackwater Carrow Dovetail
Eastgate Fernhill Granger Halcyon Inverness Jasper Kelso Lindow Marlow Norcross Ostrava Pemberly Rockport
Saltmarsh Tamworth Ulster Verity Wexford Yarrow Bellweather Crestline Dalton Everton Foxley Greystone
Hollins Ingram Kenmore Lowell Moorland Nettle Oldham Prescott Rutland Stirling Trent Vickers Wolcott
""".split()
CUST_B = """
Freight Mutual Foods Manufacturing Logistics Health Retail Energy Labs Partners Group Holdings Bank
Insurance Motors Pharma Media Telecom Hotels Airlines Builders Dental Clinics Farms Textiles Marine
Utilities Systems Outfitters Brewing Apparel Grocers Transit Capital Supply Steel Chemicals Realty
""".split()

VENDOR_A = ["Pay", "Clear", "Vault", "Bright", "Cloud", "Data", "Trip", "Mail", "Stack", "Peak", "True",
            "Swift", "Blue", "Open", "Iron", "Zen", "Keen", "Nimbus", "Arc", "Sky", "Core", "Echo", "Flux"]
VENDOR_B = ["lane", "settle", "wise", "grid", "ly", "desk", "flare", "scope", "post", "check", "line",
            "forge", "point", "works", "base", "mint", "loop", "beam", "path", "bit"]

VCATS = [
    ("payment processor", ("finance", "eng")),
    ("observability vendor", ("sre", "eng")),
    ("CDN provider", ("sre", "eng")),
    ("email delivery provider", ("eng", "sre")),
    ("background-check vendor", ("people",)),
    ("data warehouse vendor", ("eng", "finance")),
    ("travel booking agency", ("finance", "people")),
    ("payroll provider", ("finance", "people")),
    ("support desk platform", ("support", "cs")),
    ("SMS provider", ("eng", "product")),
    ("e-signature vendor", ("legal", "sales")),
    ("SOC 2 audit firm", ("security", "finance")),
]

CITIES = ["Boston", "Lisbon", "Austin", "Toronto", "Dublin", "Berlin", "Singapore", "Denver", "Warsaw",
          "Nairobi", "Bangalore", "Sydney", "Manchester", "Amsterdam", "Chicago", "Madrid", "Seattle",
          "Cape Town", "Montreal", "Edinburgh"]
REGIONS = ["us-east", "us-west", "eu-west", "eu-central", "ap-southeast", "ca-central"]
FRAMEWORKS = ["SOC 2 Type II", "ISO 27001", "PCI DSS", "HIPAA", "GDPR"]
SEGMENTS = ["enterprise renewals", "mid-market deals", "multi-year contracts", "public-sector deals",
            "partner-sourced deals", "startup-program deals", "EMEA deals", "APAC deals",
            "North America deals", "nonprofit accounts"]
ACCTS = ["employee accounts", "the admin console", "the customer portal", "production database access",
         "VPN access", "CI/CD service accounts"]
TIERS = ["Starter", "Growth", "Business", "Enterprise"]

INDUSTRIES = [
    ("accounts-payable automation", "invoices", "invoice"),
    ("freight visibility software", "shipments", "shipment"),
    ("claims processing for insurers", "claims", "claim"),
    ("restaurant ordering software", "orders", "order"),
    ("clinic scheduling software", "appointments", "appointment"),
    ("payroll software", "payslips", "payslip"),
    ("field-service management", "work orders", "work order"),
    ("e-signature workflows", "envelopes", "envelope"),
    ("energy metering analytics", "meter readings", "meter reading"),
    ("property management software", "leases", "lease"),
    ("warehouse management software", "pick lists", "pick list"),
    ("expense management", "expense reports", "expense report"),
]
ORG_A = ["Kestrel", "Heron", "Lantern", "Copper", "Quartz", "Bramble", "Slate", "Tidal", "Fernway",
         "Northgate", "Sparrow", "Cedar", "Marble", "Foxfire", "Oriel", "Halden", "Brightwater", "Rookery"]
ORG_B = ["Ledger", "Analytics", "Systems", "Labs", "Software", "Cloud", "Works", "Technologies",
         "Logic", "Dynamics", "Digital", "Platforms"]

FEATURES = ["bulk export", "SSO login", "SCIM provisioning", "audit log", "approval rules", "webhooks",
            "CSV import", "the mobile app", "custom fields", "saved views", "role-based access",
            "two-factor login", "PDF reports", "the sandbox environment", "API keys", "the usage dashboard",
            "email digests", "multi-currency support", "offline mode", "the ERP connector", "scheduled reports",
            "bulk edit", "the public API", "data retention settings", "dark mode", "the onboarding checklist"]
COMPONENTS = ["connection pool", "retry queue", "job scheduler", "read replica", "cache layer", "search index",
              "message broker", "rate limiter", "cron worker", "load balancer", "TLS certificates",
              "feature flags", "CI pipeline", "staging cluster", "object storage bucket", "Kafka consumer",
              "Postgres primary", "Redis cluster", "CDN config", "DNS records", "autoscaler", "service mesh"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
MON3 = [m[:3] for m in MONTHS]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]

# Teams: (name, function, weight). Functions choose ladders and sentence banks.
TEAMS = [
    ("Platform", "eng", 3), ("SRE", "sre", 2), ("Support", "support", 2), ("Sales", "sales", 2),
    ("Finance", "finance", 1), ("Product", "product", 2), ("Payments", "eng", 2), ("People", "people", 1),
    ("Security", "security", 1), ("Data", "eng", 2), ("Customer Success", "cs", 1), ("Mobile", "eng", 2),
    ("Integrations", "eng", 2), ("Legal", "legal", 1), ("Marketing", "marketing", 1), ("Design", "design", 1),
    ("Search", "eng", 1), ("Identity", "eng", 1), ("Partnerships", "sales", 1), ("Growth", "eng", 1),
]
LADDERS = {
    "eng": ["Software Engineer", "Senior Software Engineer", "Staff Engineer", "Engineering Manager",
            "Head of {team} Engineering"],
    "sre": ["Site Reliability Engineer", "Senior SRE", "SRE Lead", "Head of Reliability"],
    "security": ["Security Engineer", "Senior Security Engineer", "Security Lead", "Head of Security"],
    "support": ["Support Specialist", "Senior Support Specialist", "Support Team Lead", "Head of Support"],
    "cs": ["Customer Success Manager", "Senior Customer Success Manager", "Customer Success Lead",
           "Head of Customer Success"],
    "sales": ["Account Executive", "Senior Account Executive", "{team} Manager", "VP {team}"],
    "finance": ["Financial Analyst", "Senior Financial Analyst", "Finance Manager", "Finance Controller"],
    "people": ["People Partner", "Senior People Partner", "People Operations Lead", "Head of People"],
    "product": ["Product Manager", "Senior Product Manager", "Group Product Manager", "Head of Product"],
    "design": ["Product Designer", "Senior Product Designer", "Design Lead", "Head of Design"],
    "legal": ["Legal Counsel", "Senior Legal Counsel", "Deputy General Counsel", "General Counsel"],
    "marketing": ["Marketing Specialist", "Senior Marketing Specialist", "Marketing Manager", "Head of Marketing"],
}
EXEC_TITLES = ["CEO", "CTO", "CFO", "COO", "Chief Product Officer"]
EXEC_FUNCS = {"CEO": ("exec",), "CTO": ("eng", "sre", "security"), "CFO": ("finance", "people", "sales"),
              "COO": ("support", "cs", "people", "finance"), "Chief Product Officer": ("product", "design")}
RELATED = {"security": ("sre", "eng"), "people": ("finance",), "legal": ("finance", "sales"), "cs": ("support", "sales"),
           "support": ("cs",), "sre": ("eng",), "eng": ("sre", "product"), "product": ("eng", "design"),
           "sales": ("cs", "finance"), "finance": ("sales",), "design": ("product",), "marketing": ("product", "sales")}
TICKET_PROJECT = {"eng": "ENG", "sre": "OPS", "security": "SEC", "support": "SUP", "cs": "CS",
                  "sales": "DEAL", "finance": "FIN", "people": "HR", "product": "PRD", "design": "PRD",
                  "legal": "LEGAL", "marketing": "MKT", "exec": "OPS"}

# =============================================================================================
# Decision kinds: what gets decided and revised. subj: phrasings used in documents; qsubj:
# phrasings used in questions (noun phrases). values: ordered when ``ordered``; ``more``
# says whether a higher index means "more" (more capacity, stricter, costlier) or "less".
# =============================================================================================


# Settings customers see (their mentions may involve a customer); the rest are internal.
EXTERNAL_KINDS = {"rate_limit", "uptime_sla", "p1_response", "release_cadence", "deploy_freeze", "maintenance_window",
                  "plan_price", "data_region", "service_credit", "renewal_uplift", "request_timeout", "discount_cap"}


class Kind:
    __slots__ = ("key", "ent", "funcs", "fam", "policy", "subj", "qsubj", "values", "ordered", "more", "noun", "external")

    def __init__(self, key, ent, funcs, fam, subj, qsubj, values, *, policy=None, ordered=True, more=True,
                 noun="setting"):
        self.key, self.ent, self.funcs, self.fam = key, ent, funcs, fam
        self.subj, self.qsubj, self.values = subj, qsubj, values
        self.policy, self.ordered, self.more, self.noun = policy, ordered, more, noun
        self.external = key in EXTERNAL_KINDS


KINDS = [
    Kind("rate_limit", "product", ("eng", "sre", "product"), "capacity",
         ["API rate limit for {e}", "{e} API rate limit", "request limit on the {e} API",
          "per-key request cap on the {e} API"],
         ["rate limit on the {e} API", "{e} request quota", "cap on API calls to {e}",
          "throttling limit for {e} API clients"],
         ["120 requests per minute", "300 requests per minute", "600 requests per minute",
          "1,000 requests per minute", "1,500 requests per minute", "2,400 requests per minute",
          "4,000 requests per minute"], noun="limit"),
    Kind("uptime_sla", "product", ("sre", "eng", "product"), "reliability",
         ["uptime SLA for {e}", "{e} availability commitment", "contractual uptime target for {e}",
          "{e} monthly availability SLA"],
         ["availability SLA we offer on {e}", "{e} uptime commitment", "uptime guarantee in {e} contracts",
          "SLA target for {e}"],
         ["99.5% monthly uptime", "99.9% monthly uptime", "99.95% monthly uptime", "99.99% monthly uptime"],
         noun="target"),
    Kind("p1_response", "product", ("support", "cs"), "reliability",
         ["P1 first-response target for {e}", "first-response time for {e} P1 tickets",
          "{e} P1 support response target"],
         ["target for answering urgent {e} tickets", "{e} P1 response commitment",
          "support response time for {e} priority-one issues"],
         ["15 minutes", "30 minutes", "1 hour", "2 hours", "4 hours"], more=False, noun="target"),
    Kind("log_retention", "system", ("sre", "security", "eng"), "retention",
         ["log retention for {e}", "{e} log retention period", "retention window for {e} application logs",
          "retention period for {e} logs"],
         ["period we keep {e} logs for", "{e} log retention", "retention of {e} application logs",
          "{e} log storage window"],
         ["7 days", "14 days", "30 days", "90 days", "180 days", "365 days"],
         policy="Log Retention Standard: {e}", noun="policy"),
    Kind("per_diem", "office", ("finance", "people"), "cost",
         ["per-diem for travel from the {e} office", "{e} office travel per-diem",
          "daily meal allowance for {e} staff on the road", "{e} per-diem rate"],
         ["daily travel allowance for {e} employees", "{e} per-diem", "meal per-diem for the {e} office",
          "per-day travel expense limit in {e}"],
         ["$50 per day", "$55 per day", "$60 per day", "$65 per day", "$70 per day", "$75 per day",
          "$85 per day", "$95 per day"], policy="Travel and Per-Diem Policy ({e} office)", noun="policy"),
    Kind("hotel_cap", "office", ("finance",), "cost",
         ["hotel cap for {e} staff", "nightly hotel limit for travel from {e}", "{e} office hotel allowance"],
         ["hotel budget per night for {e} travellers", "{e} hotel cap", "maximum nightly hotel rate for {e} staff"],
         ["$160 per night", "$180 per night", "$200 per night", "$220 per night", "$250 per night",
          "$300 per night"], policy="Hotel Booking Rules ({e} office)", noun="policy"),
    Kind("vendor", "vcat", (), "vendor",
         ["{e}", "{e} we use", "{e} choice"],
         ["{e} we rely on", "{e}", "company we use as our {e}"],
         [], ordered=False, noun="vendor"),
    Kind("release_cadence", "product", ("eng", "product"), "process",
         ["release cadence for {e}", "{e} release schedule", "{e} shipping cadence"],
         ["frequency of {e} releases", "{e} release frequency", "release rhythm for {e}"],
         ["daily", "twice a week", "weekly", "every two weeks", "every three weeks", "monthly"],
         more=False, noun="schedule"),
    Kind("deploy_freeze", "product", ("sre", "eng"), "process",
         ["month-end deploy freeze for {e}", "{e} deploy freeze window", "production freeze rule for {e}"],
         ["change freeze around month-end for {e}", "{e} freeze window", "freeze period for {e} deploys"],
         ["the last business day of the month", "the last 2 business days of the month",
          "the last 3 business days of the month",
          "the last 3 business days of the month plus the first business day of the next",
          "the last 5 business days of the month"], policy="Deploy Freeze Windows: {e}", noun="rule"),
    Kind("discount_cap", "segment", ("sales", "finance"), "commercial",
         ["discount cap for {e}", "maximum discount on {e}", "approval-free discount limit for {e}"],
         ["largest discount sales may give on {e}", "{e} discount ceiling", "discount limit for {e}"],
         ["10%", "12%", "15%", "18%", "20%", "25%", "30%", "35%"], noun="cap"),
    Kind("hiring_plan", "team_year", ("people", "finance"), "headcount",
         ["{team} hiring plan for {year}", "{year} headcount target for {team}",
          "number of {team} hires planned for {year}"],
         ["{team} headcount plan for {year}", "{year} hiring target for the {team} team",
          "planned {team} hires in {year}"],
         ["1 hire", "2 hires", "3 hires", "4 hires", "5 hires", "6 hires", "8 hires", "10 hires",
          "12 hires", "15 hires", "18 hires", "24 hires"], noun="plan"),
    Kind("cloud_budget", "team", ("finance", "sre"), "cost",
         ["monthly cloud budget for {e}", "{e} cloud spend cap", "infrastructure budget for the {e} team"],
         ["{e} team's monthly cloud allowance", "cloud spending limit for {e}", "{e} infrastructure budget"],
         ["$20k per month", "$35k per month", "$50k per month", "$75k per month", "$110k per month",
          "$160k per month", "$240k per month"], noun="budget"),
    Kind("backup_rpo", "system", ("sre", "eng"), "reliability",
         ["backup frequency for {e}", "{e} backup schedule", "recovery point objective for {e}"],
         ["interval between {e} backups", "{e} RPO", "backup interval for {e}"],
         ["every 24 hours", "every 12 hours", "every 6 hours", "every 4 hours", "every hour",
          "every 15 minutes"], noun="schedule"),
    Kind("maintenance_window", "system", ("sre", "eng"), "process",
         ["maintenance window for {e}", "{e} planned maintenance slot", "weekly maintenance window on {e}"],
         ["time slot for {e} maintenance", "{e} maintenance window", "{e} maintenance slot"],
         ["Sundays 02:00-04:00 UTC", "Saturdays 22:00-24:00 UTC", "Tuesdays 05:00-06:00 UTC",
          "Wednesdays 23:00-01:00 UTC", "Sundays 06:00-08:00 UTC", "Thursdays 03:00-04:30 UTC"],
         ordered=False, noun="window"),
    Kind("password_policy", "acct", ("security",), "security",
         ["password rules for {e}", "authentication requirements for {e}", "password policy for {e}"],
         ["login requirements for {e}", "{e} password standard", "credential rules for {e}"],
         ["10 characters with 90-day rotation", "12 characters with 90-day rotation",
          "12 characters with 60-day rotation", "14 characters, no forced rotation, MFA required",
          "16 characters, no forced rotation, hardware-key MFA required"],
         policy="Password and Authentication Standard: {e}", noun="policy"),
    Kind("office_days", "office", ("people",), "workplace",
         ["in-office expectation for {e}", "{e} hybrid work rule", "office attendance requirement in {e}"],
         ["number of office days expected in {e}", "{e} return-to-office rule", "hybrid policy for the {e} office"],
         ["fully remote", "1 day a week in the office", "2 days a week in the office",
          "3 days a week in the office", "4 days a week in the office"],
         policy="Hybrid Work Policy ({e} office)", noun="policy"),
    Kind("expense_approval", "team", ("finance",), "cost",
         ["expense approval threshold for {e}", "{e} spend approval limit",
          "limit above which {e} expenses need VP sign-off"],
         ["threshold at which {e} expenses need extra approval", "{e} expense sign-off threshold",
          "approval limit on {e} spending"],
         ["$250", "$500", "$750", "$1,000", "$2,500", "$5,000"], more=False,
         policy="Expense Approval Rules ({e})", noun="threshold"),
    Kind("code_review", "system", ("eng", "security"), "quality",
         ["code review rule for {e}", "{e} merge approval requirement", "review requirement for changes to {e}"],
         ["approvals needed to merge into {e}", "{e} code review policy", "review rule for {e} pull requests"],
         ["one approval", "one approval plus green CI", "two approvals", "two approvals including a code owner",
          "two approvals including a code owner and a security reviewer"],
         policy="Code Review Rules: {e}", noun="rule"),
    Kind("oncall_rotation", "team", ("sre", "eng"), "people",
         ["on-call rotation for {e}", "{e} on-call schedule", "{e} pager rotation"],
         ["{e} on-call shift pattern", "shift pattern for {e} on-call", "pager schedule for {e}"],
         ["one-week shifts", "two-week shifts", "3-day shifts", "follow-the-sun 12-hour shifts",
          "weekday/weekend split shifts"], ordered=False, noun="rotation"),
    Kind("plan_price", "plan", ("product", "sales", "finance"), "commercial",
         ["list price of the {e} plan", "{e} plan price", "per-seat price for {e}"],
         ["price of the {e} plan", "{e} seat price", "per-seat cost of the {e} tier"],
         ["$19 per seat per month", "$29 per seat per month", "$39 per seat per month", "$49 per seat per month",
          "$59 per seat per month", "$79 per seat per month", "$99 per seat per month",
          "$129 per seat per month"], noun="price"),
    Kind("data_region", "customer", ("sre", "eng", "legal", "cs"), "commercial",
         ["hosting region for {e}", "{e} data residency region", "region where {e} data is stored"],
         ["location of {e}'s hosted data", "{e} hosting region", "data residency for {e}"],
         ["us-east", "us-west", "eu-west", "eu-central", "ap-southeast", "ca-central"],
         ordered=False, noun="region"),
    Kind("sprint_length", "team", ("eng", "product"), "people",
         ["sprint length for {e}", "{e} sprint cadence", "{e} iteration length"],
         ["duration of {e} sprints", "{e} sprint duration", "length of a {e} sprint"],
         ["one week", "two weeks", "three weeks", "four weeks"], noun="cadence"),
    Kind("coverage_gate", "system", ("eng",), "quality",
         ["test coverage gate for {e}", "{e} minimum coverage in CI", "CI coverage threshold on {e}"],
         ["coverage required to merge {e} changes", "{e} coverage gate", "minimum test coverage for {e}"],
         ["60% line coverage", "65% line coverage", "70% line coverage", "75% line coverage",
          "80% line coverage", "85% line coverage", "90% line coverage"], noun="gate"),
    Kind("error_alert", "system", ("sre",), "reliability",
         ["paging threshold for {e} errors", "{e} error-rate alert", "alerting rule for {e} error rate"],
         ["error rate that pages on-call for {e}", "{e} error alert threshold", "page condition for {e}"],
         ["0.5% for 15 minutes", "1% for 5 minutes", "2% for 5 minutes", "2% for 10 minutes",
          "5% for 3 minutes"], more=False, noun="threshold"),
    Kind("arr_target", "year", ("finance", "sales"), "targets",
         ["ARR target for {e}", "{e} annual recurring revenue goal", "{e} revenue plan"],
         ["{e} ARR goal", "revenue target for {e}", "ARR we are aiming for in {e}"],
         ["$6M ARR", "$8M ARR", "$9.5M ARR", "$11M ARR", "$12.5M ARR", "$14M ARR", "$16M ARR", "$19M ARR",
          "$22M ARR"], noun="target"),
    Kind("pto_carryover", "office", ("people",), "workplace",
         ["PTO carryover limit for {e}", "{e} vacation carryover rule", "unused leave carryover in {e}"],
         ["number of vacation days {e} staff can carry over", "{e} PTO carryover", "leave carryover for {e}"],
         ["no carryover", "3 days", "5 days", "10 days", "15 days"],
         policy="Leave Policy ({e} office)", noun="policy"),
    Kind("service_credit", "customer", ("sales", "finance", "legal", "cs"), "commercial",
         ["SLA service credit for {e}", "{e} downtime credit", "service credit in the {e} contract"],
         ["credit {e} gets for downtime", "{e} SLA credit", "downtime compensation for {e}"],
         ["5% of the monthly fee", "10% of the monthly fee", "15% of the monthly fee", "25% of the monthly fee"],
         noun="credit"),
    Kind("renewal_uplift", "customer", ("sales", "finance", "cs"), "commercial",
         ["renewal price increase for {e}", "{e} renewal uplift", "price uplift at the {e} renewal"],
         ["increase applied when {e} renews", "{e} renewal price change", "uplift on the {e} renewal"],
         ["0%", "3%", "5%", "7%", "9%", "12%"], noun="uplift"),
    Kind("db_pool", "system", ("sre", "eng"), "capacity",
         ["database connection pool size for {e}", "{e} DB pool limit", "max Postgres connections for {e}"],
         ["{e} connection pool size", "number of database connections {e} may open", "{e} database pool"],
         ["50 connections", "100 connections", "200 connections", "300 connections", "400 connections",
          "600 connections"], noun="limit"),
    Kind("request_timeout", "system", ("eng", "sre"), "capacity",
         ["request timeout on {e}", "{e} upstream timeout", "client timeout for calls to {e}"],
         ["{e} call timeout", "wait before calls to {e} time out", "timeout setting for {e}"],
         ["5 seconds", "10 seconds", "15 seconds", "30 seconds", "60 seconds"], noun="timeout"),
]

# Question-only paraphrases with less word overlap: people rarely know a document"s exact wording.
_EXTRA_QSUBJ = {
    "rate_limit": ["number of API calls per minute a {e} client may make", "{e} API throughput cap"],
    "uptime_sla": ["percentage of uptime we promise {e} customers", "{e} reliability guarantee"],
    "p1_response": ["time allowed for replying to critical {e} tickets", "{e} critical-ticket reply deadline"],
    "log_retention": ["lifetime of {e} log data", "{e} log expiry"],
    "per_diem": ["daily allowance for meals when {e} people travel", "{e} travel meal budget"],
    "hotel_cap": ["accommodation ceiling for trips from {e}", "{e} lodging limit"],
    "vendor": ["provider we picked as our {e}", "{e} supplier"],
    "release_cadence": ["interval between {e} releases", "{e} ship cycle"],
    "deploy_freeze": ["blackout period for {e} production changes", "{e} change blackout"],
    "discount_cap": ["ceiling on price reductions for {e}", "markdown limit for {e}"],
    "hiring_plan": ["{team} recruiting goal for {year}", "number of people {team} may hire in {year}"],
    "cloud_budget": ["{e} hosting spend ceiling", "amount {e} may spend on cloud each month"],
    "backup_rpo": ["{e} snapshot cadence", "maximum data loss window for {e}"],
    "maintenance_window": ["{e} downtime slot for upgrades", "scheduled upkeep window for {e}"],
    "password_policy": ["sign-in rules for {e}", "{e} credential policy"],
    "office_days": ["{e} attendance policy", "required days on site in {e}"],
    "expense_approval": ["{e} sign-off limit for purchases", "spending level that triggers VP review in {e}"],
    "code_review": ["{e} pull request sign-off rule", "approvals a {e} change needs"],
    "oncall_rotation": ["{e} pager shift length", "{e} on-call roster pattern"],
    "plan_price": ["{e} subscription price", "monthly seat cost of {e}"],
    "data_region": ["{e} data location", "cloud region serving {e}"],
    "sprint_length": ["{e} iteration cadence", "{e} planning cycle length"],
    "coverage_gate": ["{e} test threshold for merging", "unit-test coverage bar for {e}"],
    "error_alert": ["{e} error paging rule", "{e} alarm threshold for failures"],
    "arr_target": ["{e} recurring revenue target", "{e} sales goal"],
    "pto_carryover": ["{e} rollover allowance for vacation days", "vacation rollover limit in {e}"],
    "service_credit": ["{e} compensation for outages", "refund {e} receives for SLA breaches"],
    "renewal_uplift": ["{e} price increase at renewal", "renewal markup for {e}"],
    "db_pool": ["{e} database connection cap", "connection limit for {e}'s database"],
    "request_timeout": ["{e} response deadline for callers", "{e} timeout budget"],
}
for _k in KINDS:
    _k.qsubj = _k.qsubj + _EXTRA_QSUBJ.get(_k.key, [])
KIND_BY_KEY = {k.key: k for k in KINDS}
CHATTER_KINDS = [k for k in KINDS if k.ent not in ("customer", "team_year", "year")]
EXTERNAL_CHATTER_KINDS = [k for k in CHATTER_KINDS if k.external]

# =============================================================================================
# Sentence banks
# =============================================================================================

CHAT = _bank([
    "[Heads up|FYI|Quick heads up]: {system} [deploy|rollout] [is going out|goes out] at {time}[ today|].",
    "Anyone else seeing [timeouts|502s|slow responses] from {system}?[ p95 is at {ms} ms.|]",
    "[Merged|Shipped] the {feature} fix for {customer}[, thanks for the review {first}|].",
    "Can someone [review|take a look at] PR {pr}? It touches the {component} [config|settings].",
    "{customer} [just|] renewed[ for another year|]! [Great work|Nice one] {first}.",
    "[Reminder|Friendly reminder]: [expense reports|timesheets|access reviews] are due [on {weekday}|by end of week].",
    "[Lunch|Coffee] [anyone|at noon]? [The new place near the {city} office|Usual spot].",
    "[I'm|I'll be] [out|OOO|offline] [on {weekday}|tomorrow|this afternoon][, {first} is covering|].",
    "The {component} on {system} is at {pct}% [CPU|memory|disk][, keeping an eye on it|, might need to scale it before month-end|].",
    "[Thanks|Thank you] {first}, [that fixed it|that did the trick|much appreciated].",
    "[Does anyone know|Who knows] [who owns|where the runbook is for] {system}?",
    "{ticket} is [blocked on|waiting for] {customer}[, pinged them again|].",
    "[Staging|Canary] is [green|broken again|back up] after the {component} change.",
    "We're at {num} open tickets for {product}[, {n} of them P2|].",
    "{customer} [wants|is asking for] {feature} [before their renewal|by {month}|this quarter].",
    "[Demo|Call] with {customer} [moved to|is on] {weekday} at {time}.",
    "[Rolling back|Reverting] {version} of {system}[, error rate jumped to {pct2}%|].",
    "[Invoice|Bill] from {vendor} came in at ${amount}[ for {month}|].",
    "[Nice|Great] [write-up|doc|summary], {first}.",
    "[On it|Looking now|Taking this one].",
    "[Can we|Let's] move the {team} sync to {time}? [Clashes with|I have] the {customer} call.",
    "[Just|] noticed the {metric} dashboard for {product} is [empty|lagging by {n} hours|showing zeros].",
    "{first}, [did|have] you [get a chance to|] look at the {customer} [contract|SOW|security questionnaire]?",
    "[Pushed|Uploaded] the [slides|numbers|draft] for {weekday}[ to the shared drive|].",
    "The {vendor} [status page|rep] says the [issue|degradation] is [resolved|still ongoing].",
    "[Who's|Is anyone] on call [this week|tonight] for {system}?",
    "[Quick poll|Poll]: [tacos or pizza|in-person or remote] for the {month} offsite?",
    "[Ugh|Argh], the {component} [flaked|timed out] again in CI.",
    "[Congrats|Congratulations] to {first} on closing {customer}!",
    "[Done|Fixed|Resolved], [closing|closed] {ticket}.",
    "[Anyone have|Does anyone have] [a template|an example] for the {customer} [QBR|renewal deck|security review]?",
    "{customer} [signed|countersigned] the [order form|DPA|renewal] this morning.",
    "[Quick question|Question]: is {feature} [on|in] the {product} roadmap for {quarter}?",
    "Migrating {system} to the new {component} [tonight|this weekend|on {weekday}].",
    "[Is the|Where's the] {ksubj} [written down|documented] [anywhere|somewhere]?",
    "{customer} asked about our {xsubj} [again|on today's call|in their renewal].",
    "[Adding|Putting] the {ksubj} on [next week's|{weekday}'s] agenda.",
    "[Can someone point me to|Where do I find] the [current|latest] {ksubj}?",
    "[Not sure who owns|Who owns] the {ksubj} [now|these days]?",
    "[Does the|Is the] {xsubj} [apply|in effect] for {customer} too?",
    "We should [revisit|look at] the {ksubj} [at some point|next quarter|after month-end].",
])

BANKS = {
    "eng": _bank([
        "The {system} migration to the new {component} is [about {pct}% done|on track for {month}|slipping by a week].",
        "p95 latency on {system} is {ms} ms [this week|after the release|at peak][, {ms2} ms at the median|].",
        "We [shipped|released] {feature} for {product} [behind a feature flag|to {pct}% of customers|to everyone].",
        "PR {pr} [refactors|rewrites|cleans up] the {component} code in {system}.",
        "Error rate on {system} [spiked to|settled at] {pct2}% [after|during] the {version} rollout.",
        "[The team|We] [paired on|spent {weekday} on] the flaky {component} tests; [{n} are fixed|still {n} to go].",
        "{customer} reported that {feature} [breaks|times out] when [importing|exporting] more than {big} {items}.",
        "The [spike|design doc] for moving {system} off the old {component} is ready for review.",
        "Tech debt: {system} still depends on {version} of the {vendor} SDK.",
        "[We|The team] [closed|burned down] {num} story points this sprint, [about|roughly] {pct}% of the plan.",
        "Staging now mirrors production for {system}, including the {component}.",
        "The nightly {system} job [took|ran for] {dur} [last night|on {weekday}], [well above|close to] the usual.",
        "{first} [proposed|suggested] splitting {system} into [two|three] services to isolate the {component}.",
        "[We need|I'd like] a second reviewer for the {component} change before [it ships|{weekday}].",
        "CI time for {system} is down to {n} minutes after caching the {component} build.",
        "The {feature} API returns [duplicate|stale] {items} when the {component} lags.",
        "[Rolled out|Deployed] {version} of {system} to [canary|{region}|all regions].",
        "The {product} [web app|API|mobile client] now [batches|caches] {items} [lookups|requests] through the {component}.",
    ]),
    "sre": _bank([
        "The {component} in {region} [hit|reached] {pct}% [disk|CPU|memory] [over the weekend|during month-end|overnight].",
        "[On-call|The on-call engineer] [was paged|got] {n} [times|pages] this week, mostly for {system}.",
        "We [rotated|renewed] the {component} [certificates|credentials] for {system} [ahead of expiry|on {weekday}].",
        "Failover drill for {system} in {region} [took|completed in] {dur}[, within the target|, slower than planned].",
        "Error budget for {product} is [{pct}% used|nearly exhausted|healthy] [this month|for {quarter}].",
        "The {vendor} [bill|invoice] for {month} was ${money}k, [mostly|largely] [storage|compute|egress].",
        "[Autoscaling|The autoscaler] [added|removed] {n} nodes [during|after] the {month} peak.",
        "[Metrics|Trace] sampling on {system} is [{pct}%|{pct2}%] [to keep costs down|for now].",
        "Runbook for {system} [updated|rewritten] after last week's page.",
        "Replication lag between {region} and {region2} [stayed under|peaked at] {ms} ms.",
        "We [moved|are moving] {system} [to|onto] the new {component} in {region}.",
        "Synthetic checks for {product} [passed|failed {n} times] [overnight|in {region}].",
    ]),
    "security": _bank([
        "The {framework} evidence collection for {quarter} is [{pct}% complete|due on {weekday}].",
        "{n} laptops [are missing|still lack] the [disk encryption|EDR agent] [update|check-in].",
        "Access review for {system}: {n} accounts [removed|flagged] as [stale|over-privileged].",
        "The {month} phishing simulation was clicked by {pct}% of [staff|recipients].",
        "[Pen test|Penetration test] findings for {product}: {n} [medium|low], [none|one] high.",
        "{customer} sent a {num}-question security questionnaire [due {weekday}|for their renewal].",
        "[MFA|SSO] enforcement for {system} [goes live|went live] [on {weekday}|this week].",
        "We [revoked|rotated] the API keys [exposed|found] in a [public gist|log file] for {system}.",
        "The {vendor} [DPA|security review] is [signed|still pending legal].",
        "[Vulnerability|CVE] scan on {system} [found|shows] {n} [critical|high] issues in {version}.",
    ]),
    "support": _bank([
        "{customer} [opened|escalated] {ticket} about {feature} [in|on] {product}.",
        "Median first response this week was {dur}, [with|across] {num} tickets.",
        "{n} customers [asked|wrote in] about [missing|delayed] {items} [since|after] the {version} release.",
        "Month-end [volume|load] [is|was] [up|roughly] {pct}% [on|versus] last month.",
        "The [macro|help-center article] for {feature} [is|was] [updated|rewritten] [with screenshots|for the new flow].",
        "{customer} [is|was] [unhappy|frustrated] [about|with] [slow|missed] responses on {ticket}.",
        "CSAT [for|in] {month} [was|came in at] {pct}% [, up|, down] from last month.",
        "[Backlog|The queue] for {product} [is|sits] at {num} [tickets|open cases], {n} [older than a week|waiting on engineering].",
        "{first} [is covering|covers] the {city} [queue|shift] [on {weekday}|next week].",
        "Top [contact reason|ticket driver] [this week|in {month}]: {feature} [questions|errors].",
    ]),
    "sales": _bank([
        "{customer} [is|came back] [asking for|with a request for] a {pct}% discount on a [two|three]-year renewal.",
        "Pipeline for {quarter} [is|stands at] ${money}k[, {pct}% of target|, thin in {region}|].",
        "[Lost|We lost] {customer} to a competitor[ on price| over {feature}|].",
        "{customer} [wants|needs] {feature} and a [written|contractual] SLA before they sign.",
        "The {customer} [POC|pilot] [starts|ends] on {weekday} with {num} users.",
        "[Closed|Signed] {customer}: ${money}k ARR [over {n} years|, starting {month}].",
        "{customer} procurement [wants|asks for] net-{days} payment terms.",
        "Forecast call: [commit|best case] for {quarter} is ${money}k.",
        "{customer} [renewal|expansion] is [at risk|on track], [champion left|usage down {pct}%|usage up {pct}%].",
        "[Deal desk|Finance] [approved|rejected] the {customer} order form [with changes|as is].",
    ]),
    "finance": _bank([
        "[Bookings|Revenue] for {month} [came in|landed] {pct}% [above|below] plan[ at ${money2}k|].",
        "{team} [spent|has spent] ${money}k of a ${money2}k budget [for {quarter}|this quarter].",
        "The {vendor} [contract|renewal] [goes up|increases] {pct}% [from {month}|next year].",
        "[Expense reports|Receipts] for {month} are due by the {dom}[; {n} are still missing|].",
        "[Cash|Runway] [is|stays] [healthy|on plan] [at|with] {n} months [of runway|].",
        "The [board|audit committee] pack for {quarter} is [due|in draft] [on {weekday}|next week].",
        "[DSO|Days sales outstanding] [rose|fell] to {days} days in {month}.",
        "[AWS|Cloud] spend [was|came in] {pct}% [over|under] plan in {month}.",
        "[Travel|Software] spend for {team} [was|is] ${money}k [in {quarter}|year to date].",
        "[Invoice|PO] {ticket} from {vendor} [needs|is waiting for] approval.",
    ]),
    "people": _bank([
        "[We have|There are] {n} open roles in {team}[, {n2} in final rounds|].",
        "Onboarding for {first} [starts|is scheduled] [on {weekday}|next week] in {city}.",
        "[The engagement survey|The pulse survey] [closes|closed] [on {weekday}|last week] with {pct}% participation.",
        "Benefits enrollment [opens|closes] [on {weekday}|in {month}].",
        "The {city} office [is|will be] closed [on {weekday}|next {weekday}] for [maintenance|a holiday].",
        "[Performance reviews|Calibration] for {team} [start|are due] in {month}.",
        "{n} people [joined|started] in {month}, [mostly|including {n2}] in {team}.",
        "[Referral bonus|Learning budget] requests [go|should go] through the People portal.",
        "The {month} offsite [is|will be] in {city}[, agenda to follow|].",
        "[Attrition|Voluntary attrition] [for|in] {quarter} [was|came in at] {pct2}%.",
    ]),
    "product": _bank([
        "[Roadmap|Planning] for {quarter}: {feature} [is|stays] the top [priority|item] for {product}.",
        "{n} customers [requested|upvoted] {feature} [this month|in {month}], including {customer}.",
        "[Usability tests|Interviews] with {n} {customer} users [showed|found] [confusion|friction] [around|with] {feature}.",
        "We [cut|descoped] {feature} from the {month} release [to hit the date|after feedback].",
        "{feature} adoption [is|reached] {pct}% of active {product} accounts.",
        "The {product} [pricing page|changelog|release notes] [goes live|went out] [on {weekday}|this week].",
        "Beta for {feature} [opens|opened] to {num} accounts [on {weekday}|last week].",
        "Design review for {feature} [is|moved to] {weekday} at {time}.",
        "[Churned|Lost] accounts [cited|mentioned] {feature} in {n} of {num} exit interviews.",
    ]),
    "legal": _bank([
        "{customer} [redlined|pushed back on] the [liability cap|indemnity clause|DPA] [in the MSA|again].",
        "The {vendor} [contract|order form] [renews|auto-renews] on {month} {days}[ unless we give notice|].",
        "[Trademark|Privacy] review for {product} [is|was] [done|pending].",
        "{customer} [asks|asked] for a [data residency|audit rights] clause.",
    ]),
    "marketing": _bank([
        "The {product} [webinar|launch post] [got|drove] {num} [signups|visits] [in {n} days|on launch day].",
        "[Campaign|Email] [open rate|click rate] for {month} was {pct2}%.",
        "{customer} agreed to a [case study|logo placement|reference call].",
        "[Leads|MQLs] from {region} [were|are] [up|down] {pct}% [in {quarter}|this month].",
    ]),
}
FUNC_BANKS = {
    "eng": ("eng", "sre", "product"), "sre": ("sre", "eng", "security"), "security": ("security", "sre", "legal"),
    "support": ("support", "product", "sales"), "cs": ("support", "sales", "product"),
    "sales": ("sales", "support", "finance"), "finance": ("finance", "sales", "people"),
    "people": ("people", "finance"), "product": ("product", "eng", "support"),
    "design": ("product", "eng"), "legal": ("legal", "sales", "security"),
    "marketing": ("marketing", "product", "sales"),
    "exec": ("finance", "sales", "product", "eng", "people", "sre"),
}

POLICY_LINES = _bank([
    "This [policy|standard] applies to all {org} employees and contractors[ in every office|, including {city}|].",
    "[Exceptions|Any exception] must be approved in writing by [the policy owner|a VP|the {team} lead].",
    "[Managers|Team leads] are responsible for [making sure|ensuring] their teams [follow|know] these rules.",
    "Requests are [submitted|filed] through the [People portal|{system} form|help desk] and answered within {n} business days.",
    "[Receipts|Supporting documents] must be [attached|uploaded] within {days} days.",
    "The policy is reviewed [every year|twice a year|at the end of each quarter] by its owner.",
    "[Violations|Repeated violations] may lead to [loss of access|disciplinary action].",
    "[Questions|Any questions] go to the [#policies channel|{team} team|policy owner].",
    "[Contractors|Interns] follow the same rules unless their contract says otherwise.",
    "Records [are kept|must be retained] for {n} years [for audit purposes|per {framework}].",
    "[New hires|Employees] [acknowledge|confirm] this policy during onboarding [in {system}|].",
    "Approvals above ${amount} need [a second approver|Finance sign-off].",
    "[Customer data|Personal data] may only be [accessed|exported] for a documented business reason.",
    "[Travel|Equipment] bookings go through {vendor} [where possible|unless agreed otherwise].",
    "[Urgent|Emergency] cases can be [approved|handled] after the fact within {n} business days.",
    "The [previous|older] wiki pages on this topic are [archived|no longer maintained].",
    "[Each team|Every department] keeps a [list|register] of [approved tools|exceptions] in {system}.",
    "[Audits|Spot checks] [happen|are run] [quarterly|every {n} months] [by Finance|by Security].",
    "[Definitions|Terms]: \"employee\" includes [part-time staff|fixed-term contracts] [in all offices|in {city}].",
    "[Purchases|Subscriptions] [under|below] ${amount} can be made on a company card [with a receipt|].",
    "The {system} [team|owners] [maintain|own] the technical controls that enforce this [policy|standard].",
    "[Changes|Updates] to this [page|policy] are announced in #announcements [and by email|].",
    "[Where|If] local law [differs|is stricter], local law applies.",
    "[Shared accounts|Personal email accounts] must not be used for company business.",
    "[Requests|Approvals] older than {days} days [expire|must be resubmitted].",
    "[Vendors|Third parties] with access to customer data must pass a security review [first|before onboarding].",
    "The [owner|policy owner] reports [exceptions|usage] to the leadership team [each quarter|twice a year].",
    "[Employees|Staff] on leave are [exempt|covered] [until they return|as usual].",
    "[Training|A short course] on this [policy|topic] is [mandatory|required] for new hires within {days} days.",
    "[Costs|Charges] are booked to the [team|department] budget [of the requester|that benefits].",
    "[Incidents|Breaches] of this policy are reported to [Security|the policy owner] within {n} business days.",
    "[Annual|Yearly] attestation [happens|is collected] in {month} [through the People portal|in {system}].",
])

BG_POLICIES = ["Visitor Policy", "Equipment and Laptop Policy", "Acceptable Use Policy", "Parental Leave Policy",
               "Vendor Onboarding Policy", "Open Source Contribution Policy", "Data Classification Standard",
               "Incident Communication Policy", "Customer Data Access Policy", "Conference Attendance Policy",
               "Gift and Entertainment Policy", "Meeting-Free Fridays Guideline", "Access Review Procedure",
               "Change Management Policy", "Backup and Restore Procedure", "Social Media Policy",
               "Referral Bonus Policy", "Learning Budget Policy", "Home Office Stipend Policy", "Purchasing Policy",
               "Mobile Device Policy", "Clean Desk Policy", "Company Card Policy", "Secondary Employment Policy"]

FILLER = _bank([
    "Yeah.", "Right, okay.", "Can everyone hear me?", "Sorry, you're on mute.", "Let me share my screen.",
    "I think that's fair.", "Good question.", "Can we take that offline?", "So, moving on.",
    "I'll follow up on that.", "Hmm, not sure about that.", "Let's come back to that.", "Does that make sense?",
    "Yeah, that matches what I saw.", "One sec, pulling up the dashboard.", "I have a hard stop at {time}.",
    "Okay, next item.", "Sure.", "Mm-hm.", "Exactly.", "[Sorry|Apologies], go ahead.", "Can you repeat that?",
    "I [can|could] take that one.", "Let's [timebox|park] this.", "Who's taking notes today?",
    "[Wait|Hold on], [which|what] number was that?", "[Okay|Alright], I'm back.", "That's [a good point|fair].",
    "I'm not sure we have data on that.", "[Let me|I'll] check with {first}.", "[Any|Other] questions?",
    "We're [a bit|slightly] over time.", "[Thanks|Thank you], everyone.", "[Uh|Um], yes.",
])
SPOKEN = ["So ", "I think ", "Honestly, ", "From my side, ", "Just to flag, ", "Quick update: ", "Yeah, so ",
          "And ", "Also ", "On that, ", "", "", "", ""]

CHATTER_ALT = ["[Thanks|Thanks!|Ok, thanks|Got it].", "[Makes sense|Sounds good|Agreed].", "[+1|Same here|Seeing it too]."]

# Decision reasons. {old} {new} {subj} {e} and the pinned facts ({customer} {n} {pct} {money} {month}
# {quarter} {ms} {framework} {region} {component} {city} {vendor}) are shared with trigger documents.
FAMILY = {
    "capacity": {
        "more": ["{customer} and [two|three|several] other large accounts kept hitting the old {noun} during [month-end|peak hours|batch imports]",
                 "traffic on {e} grew {pct}% since [the spring|last quarter|the last launch]",
                 "the [new|upgraded] {component} gives us [headroom|spare capacity] of about {pct}%"],
        "less": ["a few clients were [saturating|overloading] the {component} at the old setting",
                 "load tests showed p99 latency above {ms} ms at {old}",
                 "we need to protect [shared|multi-tenant] capacity during [month-end|peak hours]"],
        "switch": ["the old setting no longer matched how {e} is used"],
        "cond": ["to be reviewed after [the next load test|{quarter}|the {region} migration]",
                 "customers can request a [temporary|written] exception through support",
                 "as long as p95 latency on {e} stays below {ms} ms",
                 "until the [new|second] {component} is in place"],
        "triggers": ["escalation", "incident", "loadtest"],
    },
    "reliability": {
        "more": ["[enterprise|large] prospects such as {customer} [ask for|require] it in their contracts",
                 "the {region} [failover|replica] is now [live|in production]",
                 "we [missed|nearly missed] our internal objective [twice|three times] in {quarter}"],
        "less": ["we [breached|missed] the old {noun} {n} times in {quarter} and it was not credible",
                 "the on-call team cannot sustain it with the current staffing",
                 "it costs roughly ${money}k a year more than the contracts justify"],
        "switch": ["the old slot collided with [month-end processing|peak traffic in {region}]"],
        "cond": ["to be reviewed at the end of {quarter}", "exceptions need sign-off from the CTO",
                 "only once the {region} failover has passed two drills", "measured monthly, excluding planned maintenance"],
        "triggers": ["incident", "escalation", "deals"],
    },
    "retention": {
        "more": ["investigations needed more history than {old} gave us",
                 "the {framework} auditors expect at least [six months|a year] of history",
                 "{customer}'s contract requires [six months|a year] of logs"],
        "less": ["the {month} cost report showed ${money}k a month on log storage",
                 "storage for {e} logs grew {pct}% in [a quarter|six months]",
                 "[finance|the board] asked for [a {pct}% cut|savings] in [H1|H2|{quarter}]"],
        "switch": ["we changed storage tiers"],
        "cond": ["[hot|searchable] storage for the first 14 days, cold storage after that",
                 "security audit logs are kept separately for one year",
                 "legal holds override this [window|setting]", "to be reviewed after the next {framework} audit"],
        "triggers": ["cost", "audit", "incident"],
    },
    "cost": {
        "more": ["[costs|prices] in {city} rose about {pct}% [this year|since last year]",
                 "the old {noun} did not cover [customer dinners|a hotel near the office|basic meals]",
                 "[{n} expense reports|several reports] in {month} were over the old {noun}"],
        "less": ["we are ${money}k behind plan for {quarter}",
                 "the {month} spend report showed {pct}% over budget",
                 "[the board|finance] asked for [a {pct}% cut|cost savings] in [H1|H2|{quarter}]"],
        "switch": ["[the old|the previous] rule was hard to apply"],
        "cond": ["exceptions need VP approval", "to be reviewed at the end of {quarter}",
                 "customer-facing travel is handled case by case", "receipts are required above ${amount}"],
        "triggers": ["cost", "survey", "escalation"],
    },
    "process": {
        "more": ["[incidents|rollbacks] after releases went up {pct}% in {quarter}",
                 "{customer} asked for [fewer|more predictable] changes [around month-end|during their close]",
                 "the team needs more time for testing"],
        "less": ["batching changes made releases {n}x larger and riskier",
                 "[feature flags|canary releases] now catch most problems early",
                 "the old rule blocked {pct}% of working days"],
        "switch": ["the old slot collided with [month-end processing|peak traffic in {region}|{customer}'s batch runs]",
                   "traffic in {region} is lowest at the new time"],
        "cond": ["hotfixes for SEV1 incidents are exempt", "to be reviewed after {quarter}",
                 "the release manager can grant exceptions", "announced in #releases a week ahead"],
        "triggers": ["incident", "escalation", "survey"],
    },
    "people": {
        "more": ["{pct}% of respondents in the {month} pulse survey asked for it",
                 "the team grew and [the workload|the backlog] grew with it",
                 "[demand|the roadmap] for {quarter} needs more people"],
        "less": ["[burnout|attrition] in the team [was rising|reached {pct}%]",
                 "{pct}% of respondents in the {month} pulse survey said it was too much",
                 "[the budget|the plan] for {quarter} was cut by ${money}k"],
        "switch": ["{pct}% of respondents in the {month} pulse survey preferred the new pattern",
                   "the team now spans [two|three] time zones"],
        "cond": ["to be reviewed after [one quarter|six months]", "managers can agree exceptions",
                 "subject to budget approval in {quarter}", "new joiners follow it from day one"],
        "triggers": ["survey", "cost"],
    },
    "headcount": {
        "more": ["[demand|the roadmap] for {quarter} needs more people", "the backlog grew {pct}% since {month}",
                 "[attrition|burnout] in the team reached {pct}%"],
        "less": ["[the budget|the plan] for {quarter} was cut by ${money}k", "bookings were {pct}% below plan in {quarter}",
                 "we are ${money}k behind plan for {quarter}"],
        "switch": ["priorities changed"],
        "cond": ["subject to budget approval in {quarter}", "backfills do not count against it",
                 "to be reviewed at the end of {quarter}", "contractors need separate approval"],
        "triggers": ["cost", "complaint"],
    },
    "workplace": {
        "more": ["{pct}% of respondents in the {month} pulse survey asked for it",
                 "the {city} office [lease was renewed|expanded] and has room again",
                 "[new joiners|managers] said onboarding suffered"],
        "less": ["{pct}% of respondents in the {month} pulse survey said it was too much",
                 "[attrition|regretted attrition] reached {pct}% in {quarter}",
                 "[unused leave|the accrued liability] cost ${money}k at year end"],
        "switch": ["{pct}% of respondents in the {month} pulse survey preferred the new arrangement"],
        "cond": ["managers can agree exceptions", "to be reviewed after six months",
                 "[local law|local rules] in {city} take precedence", "new joiners follow it from day one"],
        "triggers": ["survey", "cost"],
    },
    "commercial": {
        "more": ["we lost {n} deals in {quarter} where [price|terms] came up",
                 "competitors are offering [{pct}%|much better terms]",
                 "{customer} [threatened to churn|asked for better terms] at renewal"],
        "less": ["gross margin fell to {pct}% in {quarter}",
                 "average [discounts|terms] crept up and finance asked us to hold the line",
                 "win rates held at {pct}% even on deals at the old {noun}"],
        "switch": ["{customer} requires [data residency in the EU|hosting close to their users]",
                   "latency for users in {city} was over {ms} ms"],
        "cond": ["anything beyond it needs [CFO|deal desk] approval", "valid for contracts signed from {month}",
                 "to be reviewed at the end of {quarter}", "existing contracts keep their terms until renewal"],
        "triggers": ["deals", "escalation"],
    },
    "targets": {
        "more": ["bookings came in {pct}% above plan in {quarter}", "pipeline coverage for the rest of the year is {n}x",
                 "{customer} and {n} other accounts expanded earlier than planned"],
        "less": ["bookings were {pct}% below plan in {quarter}", "we lost {customer} and {n} other renewals",
                 "the board asked for a plan we can actually hit"],
        "switch": ["the plan changed"],
        "cond": ["to be reviewed at the end of {quarter}", "assumes net revenue retention above 105%",
                 "hiring is paced against it", "shared with the board in {month}"],
        "triggers": ["deals", "bookings"],
    },
    "security": {
        "more": ["the {framework} auditor flagged the old setting as a gap",
                 "{pct}% of staff clicked the {month} phishing test",
                 "a credential-stuffing attempt against {e} in {month}"],
        "less": ["[forced rotation|the stricter rule] led to [predictable passwords|workarounds]",
                 "[NIST guidance|the auditor] no longer requires it",
                 "help-desk resets went up {pct}% with no security benefit"],
        "switch": ["the old rule was hard to enforce"],
        "cond": ["admins must use hardware keys", "service accounts are handled separately",
                 "to be reviewed after the next {framework} audit", "exceptions need the security lead's sign-off"],
        "triggers": ["audit", "incident"],
    },
    "quality": {
        "more": ["[INC|a SEV2] in {month} was traced to a change that [skipped review|had no tests]",
                 "the {framework} auditor asked for evidence of review on every change",
                 "escaped defects in {e} rose {pct}% in {quarter}"],
        "less": ["[merge|review] times went up {pct}% with no drop in defects",
                 "the stricter gate pushed people to write [low-value|trivial] tests",
                 "the team is too small for the old rule"],
        "switch": ["the old rule was hard to apply"],
        "cond": ["hotfixes can merge with one approval and a follow-up review",
                 "generated code is excluded", "to be reviewed after {quarter}", "enforced by branch protection"],
        "triggers": ["incident", "audit"],
    },
    "vendor": {
        "switch": ["{old} had {n} [outages|settlement delays|missed SLAs] in {quarter}",
                   "{new} is about ${money}k a year cheaper at our volume",
                   "{new} supports [SEPA payouts|multi-region failover|SSO|EU data residency] and {old} does not",
                   "{old} is raising prices by {pct}% from {month}"],
        "cond": ["the migration finishes by the end of {quarter}", "we keep {old} as a fallback for [one|two] quarters",
                 "legal must sign the DPA first", "to be reviewed after a year"],
        "triggers": ["vendor_issue", "cost"],
    },
}
INIT_REASONS = ["there was no written {noun} and teams were giving different answers",
                "{customer} asked for it in writing",
                "we needed one rule for [everyone|all teams] before [{quarter}|the audit|the launch]"]
CONCERNS = _bank([
    "{who} [raised a concern|worried|warned] that [this could|it might] [hurt|upset] {customer}.",
    "{who} asked [what happens|how we handle it] if [traffic|costs|volume] [doubles|jumps again].",
    "{who} [was not fully convinced|had doubts] but agreed to [try it|go ahead] for a quarter.",
    "{who} [asked|wanted to know] whether existing customers [are affected|need notice].",
    "{who} pointed out that [the numbers|the data] only cover {n} months.",
])

# Trigger documents: problems that lead to a revision. doc: (channel, author functions, title, body lines).
TRIGGERS = {
    "complaint": ("email", ("eng", "sre", "support", "sales", "finance", "people", "product"),
                  "[Problems|Issues|Feedback] with the {subj}",
                  ["{n} people on my team [ran into|complained about] the {subj} ({old}) [last month|in {month}|since {quarter}].",
                   "[In practice|Honestly], {old} [doesn't work|isn't working] for [how we operate now|our workload].",
                   "[Can we|I'd like to] [revisit|discuss] it at the next [review|leads meeting]."],
                  ["{n} people ran into problems with the {old} {noun} ({ref})",
                   "the complaints about the {subj} collected in {ref}"]),
    "escalation": ("email", ("support", "cs", "sales"),
                   "[Escalation|Urgent]: {customer} and the {subj}",
                   ["{customer} [ran into|hit] the {subj} ({old}) {n} times [last week|during month-end|this month].",
                    "Their [ops lead|CTO|VP Finance|admin] says it [blocks|slows down] their {items} [processing|sync|imports].",
                    "They are asking [whether we can|if we could] [change|revisit] it before their renewal in {month}.",
                    "[I've|We've] logged it as {ticket} and promised an answer [this week|by {weekday}]."],
                   ["{customer} escalated after running into the {subj} {n} times ({ref})",
                    "{customer}'s escalation ({ref}) showed the {old} {noun} was not working for them"]),
    "incident": ("incident", ("sre", "eng"),
                 "{ref}: {e} [degradation|partial outage|errors] [during|after] [month-end|a traffic spike|a deploy]",
                 ["Severity: SEV{sev}. [Detected by|Alert from] [synthetic checks|the {component} alarm|a customer report].",
                  "[Contributing factor|Finding]: the {subj} ({old}) [made it worse|did not hold up] under load.",
                  "About {n} customers [saw errors|were affected] for {dur}.",
                  "[Follow-up|Action]: [revisit|review] the {subj} with the owners."],
                 ["{ref} showed that the {subj} of {old} [contributed to the outage|did not hold up]",
                  "the {ref} review found the {old} {noun} was part of the problem"]),
    "loadtest": ("ticket", ("eng", "sre"),
                 "Load test: {e} at the current {noun}",
                 ["At {old}, p99 latency [reached|was] {ms} ms and the {component} saturated at {pct}% CPU.",
                  "[Results|Raw numbers] are in the [attached sheet|{system} dashboard].",
                  "[Recommendation|My suggestion]: change the {subj} before the next peak."],
                 ["load tests in {ref} showed p99 latency of {ms} ms at {old}",
                  "{ref} measured {ms} ms p99 at the old {noun}"]),
    "cost": ("email", ("finance",),
             "{month} [cost|spend] review",
             ["[Spend|Cost] [related to|driven by] the {subj} came in at ${money}k for {month}, {pct}% over plan.",
              "[At|With] the current {noun} ({old}) we [cannot|will not] hit the {quarter} budget.",
              "[Can we|I'd like to] discuss options at the next review."],
             ["the {month} cost review showed ${money}k, {pct}% over plan, driven by the {subj}",
              "finance's {month} numbers (${money}k, {pct}% over plan) made the {old} {noun} unaffordable"]),
    "audit": ("email", ("security",),
              "{framework} finding: {subj}",
              ["The {framework} [auditor|assessor] flagged the {subj} ({old}) as [a gap|insufficient|a finding].",
               "[We need|They expect] a remediation plan by {month}.",
               "I've [added|logged] it to the risk register as {ticket}."],
              ["the {framework} auditors flagged {old} as a gap ({ref})",
               "the {framework} finding on the {subj} ({ref})"]),
    "survey": ("email", ("people",),
               "{month} pulse survey results",
               ["{pct}% of respondents [raised|commented on] the {subj} ({old}).",
                "[Participation|Response rate] was {pct}%, [higher than|similar to|lower than] last time.",
                "[Full results are|The breakdown by team is] in the People portal."],
               ["{pct}% of respondents in the {month} survey raised the {subj}",
                "the {month} pulse survey, where {pct}% flagged the {old} {noun}"]),
    "deals": ("email", ("sales",),
              "{quarter} win/loss review",
              ["We lost {n} deals in {quarter}; in [most|several] of them the {subj} ({old}) came up.",
               "{customer} [said so explicitly|put it in writing] when they [walked|signed elsewhere].",
               "[I'd like|Let's] revisit it [before|at] the next pricing committee."],
              ["we lost {n} deals in {quarter} where the {subj} came up",
               "the {quarter} win/loss review, in which {customer} cited the {old} {noun}"]),
    "bookings": ("email", ("finance", "sales"),
                 "{quarter} bookings review",
                 ["{quarter} bookings came in at ${money}k, {pct}% [above|below] plan.",
                  "At this pace the {subj} ({old}) [looks out of reach|is too conservative].",
                  "[Details|The breakdown by segment] [are|is] in the board pack draft."],
                 ["the {quarter} bookings review ({ref}) showed we were {pct}% off plan",
                  "{quarter} bookings of ${money}k, {pct}% off plan ({ref})"]),
    "vendor_issue": ("ticket", ("eng", "sre", "finance"),
                     "{old} problems in {quarter}",
                     ["{old} had {n} [outages|settlement delays|missed SLAs] in {quarter}.",
                      "[Their support|Their account team] [took days to answer|has not given a root cause].",
                      "[I'm|We're] collecting [quotes|options] from [other vendors|{new} and others]."],
                     ["{old}'s {n} [outages|failures] in {quarter} ({ref})",
                      "the problems with {old} tracked in {ref}"]),
}

ROOT_CAUSES = [
    ("database connection pool exhaustion caused by a month-end traffic spike",
     "a connection leak in the {vendor} SDK retry path that never released connections on HTTP 429"),
    ("an expired TLS certificate on the {component}",
     "a certificate renewal job that had silently failed since the {component} migration"),
    ("a bad deploy of {system} ({version})",
     "a race condition in the {component} that the {version} deploy only exposed"),
    ("a full disk on the {component}",
     "debug logging left on by a stale feature flag, which filled the disk"),
    ("a DNS misconfiguration in {region}",
     "a {vendor} CDN configuration push that broke origin routing"),
    ("a slow query in {system}",
     "a missing index dropped by a schema migration two weeks earlier"),
    ("a memory leak in {system}",
     "unbounded cache growth in the {component} after a config change"),
    ("a network partition in {region}",
     "a misconfigured load balancer health check that drained healthy nodes"),
    ("a spike in traffic from a single customer",
     "a retry storm from our own {system} after a timeout change"),
    ("a failed {vendor} API upstream",
     "our own {component} dropping requests once the queue passed its limit"),
]
SYMPTOMS = ["API errors", "slow page loads", "failed logins", "webhook delivery failures", "delayed {items} processing",
            "missing reports", "sync failures", "duplicate notifications", "export timeouts", "login outage",
            "failed payments", "dashboard errors"]


# =============================================================================================
# Small helpers
# =============================================================================================


def _fmt_day(d: datetime, style: int) -> str:
    if style == 0:
        return f"{d.day} {MONTHS[d.month - 1]} {d.year}"
    if style == 1:
        return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"
    if style == 2:
        return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
    if style == 3:
        return f"{MON3[d.month - 1]} {d.day}"
    return f"{d.day} {MON3[d.month - 1]} {d.year}"


def _month_year(d: datetime) -> str:
    return f"{MONTHS[d.month - 1]} {d.year}"


def _quarter(d: datetime) -> str:
    return f"Q{(d.month - 1) // 3 + 1} {d.year}"


def _prev_quarter(d: datetime) -> str:
    q = (d.month - 1) // 3
    y = d.year
    if q == 0:
        return f"Q4 {y - 1}"
    return f"Q{q} {y}"


def _slug(s: str) -> str:
    out = []
    for c in s.lower():
        out.append(c if c.isalnum() else "-")
    return "-".join(p for p in "".join(out).split("-") if p)


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


class _Org:
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
        self.scope = _slug(name)
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
            "quarter": lambda: _quarter(self.now),
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
            "date": lambda: _fmt_day(self.now + timedelta(days=r.randint(-20, 20)), r.randint(0, 4)),
            "room": lambda: "#" + _slug(r.choice(self.team_names)),
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
        return _tidy(_render(choice(bank), self.get_fn(over), choice))

    def fill(self, template: str, over=None, cap: bool = True) -> str:
        """Render a template string (compiled once and cached; used for small, per-topic text)."""
        node = _TPL_CACHE.get(template)
        if node is None:
            node = _TPL_CACHE[template] = _compile(template)
        out = _tidy(_render(node, self.get_fn(over), self.rng.choice))
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
            out.extend(_tidy(_render(t, get, r.choice)) for t in picks)
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


# =============================================================================================
# Storylines: decision topics
# =============================================================================================


def _values_for(org: _Org, kind: Kind, ent: dict) -> list[str]:
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


MEETING_TITLES = {
    "eng": ["{team} weekly sync", "Architecture review", "{team} planning", "Engineering leads meeting"],
    "sre": ["Reliability review", "SRE weekly", "Operations review", "Incident and capacity review"],
    "security": ["Security council", "Risk committee", "Compliance sync"],
    "support": ["Support leads sync", "Customer operations review", "Support weekly"],
    "cs": ["Customer success review", "Renewals sync", "Account health review"],
    "sales": ["Deal desk", "Pipeline review", "Pricing committee", "Sales leadership sync"],
    "finance": ["Finance review", "Budget review", "Spend committee", "Exec staff meeting"],
    "people": ["People team sync", "Leadership offsite", "Workplace committee", "Exec staff meeting"],
    "product": ["Product review", "Roadmap review", "Pricing committee"],
    "design": ["Design review", "Product review"],
    "legal": ["Contracts review", "Risk committee"],
    "marketing": ["Marketing sync", "Go-to-market review"],
    "exec": ["Exec staff meeting", "Leadership meeting", "Operating review"],
}

DECISION_LINES = {
    "init": ["[Decision|Agreed|Outcome]: the {subj} [will be|is set at|is] {new}[, effective {eff}|].",
             "[We|The group] agreed to set the {subj} at {new}[ from {eff}|].",
             "{dfirst} [approved|signed off on] {new} as the {subj}[, effective {eff}|]."],
    "change": ["[Decision|Agreed|Outcome]: the {subj} [moves|changes|goes] from {old} to {new}[, effective {eff}|].",
               "{dfirst} [approved|signed off on] changing the {subj} from {old} to {new}.",
               "[We|The group] agreed to replace the {old} {noun} with {new}[ from {eff}|]."],
}
SPOKEN_PROPOSALS = {
    "init": ["I'd propose we set the {subj} at {new}.",
             "Let me walk through the options for the {subj}; my recommendation is {new}.",
             "[So|Okay], the {subj}. [I think|My view is] we should just write down {new}."],
    "change": ["I'd propose moving the {subj} from {old} to {new}.",
               "I want to raise the {subj}: {old} isn't working anymore, and I'd go to {new}.",
               "Looking at the numbers, I'd argue for {new} instead of {old} for the {subj}."],
}
PROPOSALS = {
    "init": ["{pname} proposed [setting|fixing] the {subj} at {new}.",
             "{pname} [walked through|presented] options for the {subj}[ and recommended {new}|]."],
    "change": ["{pname} proposed [moving|changing] the {subj} from {old} to {new}.",
               "{pname} [raised|brought up] the {subj}: [the current|today's] {old} [is not working|needs to change].",
               "{pname} [presented|shared] [data|numbers] on the {subj} and [recommended|argued for] {new}."],
}


def _make_topic(org: _Org, kind: Kind, ent: dict, t0: datetime, n_rev: int, tracked: bool) -> Story | None:
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
            "month": MONTHS[ref_t.month - 1], "quarter": _quarter(ref_t - timedelta(days=25)),
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
        facts["eff"] = _fmt_day(eff, r.randint(0, 2))
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
        ref = f"{author.first}'s {r.choice(('email', 'note', 'write-up', 'analysis'))} of {_fmt_day(t, 3)}"
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
    lines.append(f"{title}, {_fmt_day(mt, r.choice((0, 1, 2)))}. {head}: {org.attendees(attendees, mt)}."
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
    thread = f"MEET-{_slug(title).upper()}-{mt:%Y-%m-%d}"
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
        transcript = _transcript(org, st, mt, title, attendees, topic_spoken, thread, emit)
    return notes, transcript


ACTIONS = ["update the wiki page", "send the summary to the team", "follow up with {customer}",
           "open a ticket for the {component} work", "check the numbers with Finance", "draft the announcement",
           "book a follow-up in {n} weeks", "update the runbook", "talk to {vendor}", "share the dashboard"]


def _transcript(org, st, mt, title, attendees, topic_spoken, thread, emit):
    r = org.rng
    target = r.randint(2000, 6000)
    words = 0
    turns = [f"Transcript: {title}, {_fmt_day(mt, 2)} (recording, {r.choice((30, 45, 50, 60))} minutes)."]
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
                             "After the {mtitle} on {mday},", "")), {"mtitle": mtitle, "mday": _fmt_day(mt, r.randint(0, 3))})
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
        )), {**f, "pmonth": _month_year(pm), "pname": pa.name if r.random() < 0.6 else pa.first}))
    intro = r.choice(("Why: ", "The reasons: ", "Reasoning: ", "Background: ", ""))
    lines.append(_tidy(intro + "; ".join(reasons) + "."))
    lines.append(_tidy(r.choice(("Conditions: ", "Caveats: ", "Note: ", "")) + "; ".join(conds) + "."))
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
        thread = f"POLICY-{_slug(title).upper()}"
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
        thread = f"#{_slug(p.team(t))}/{t:%Y%m%d-%H%M}"
    d = org.add(st, ch, p, t, text, thread)
    return {"doc": d, "author": p, "claimed": claimed, "t": t}


DISCUSS_OPEN = {
    "change": ["[Should we|Can we|Is it time to] revisit the {subj}? [It's|We're at] {old} [today|right now] and [it's causing problems|that's not working|I keep hearing complaints].",
               "[Raising|Flagging] the {subj} again: {old} [is|looks] [too tight|too generous|wrong] [for where we are now|given the last few weeks].",
               "[Before|Ahead of] the {mtitle}, [can we|I'd like to] [agree|line up] options for the {subj} (currently {old})."],
    "init": ["Do we have [a written|an agreed] {subj}? [People|Teams] are quoting anything from {alt} to {alt2}.",
             "[Can we|We should] [pin down|agree] a {subj} before [the launch|{quarter}|the next audit]."],
}
DISCUSS_REPLY = [
    "I'd [go|argue] for {alt}[; {new} feels like too big a jump|; anything else is hard to explain to customers|].",
    "{new} [seems|sounds] [about right|reasonable] to me, [but|as long as] we tell {who} first.",
    "[Can we|Let's] put the {subj} on the agenda for the {mtitle}?",
    "[Before we change|If we change] the {subj}, [let's check with|we need to warn] {who}.",
    "[My vote|My preference] is {alt}, [mostly because of|given] the [cost|risk|support load].",
    "[I don't|I wouldn't] go below {alt}[ without data|]. [Do we have numbers?|What do the dashboards say?]",
    "[Either|Both] {alt} or {new} [works|would work] for [my team|us]; [just|please] give us [a week|two weeks] of notice.",
]


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
        room = "#" + _slug(ppl[0].team(t))
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
    f = {**ver["facts"], "subj": subj, "dday": _fmt_day(ver["t"], r.randint(0, 3)), "val": ver["value"]}
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


MENTIONS = [
    "[Reminder|FYI|PSA]: the {subj} is {val}[ now|]{since}.",
    "[Updated|Fixed] the [wiki|runbook|FAQ] to say the {subj} is {val}.",
    "[Heads up|Note] for {weekday}: [we're|we are] [now|] on {val} for the {subj}.",
    "[Confirming|Just confirming] the {subj} is {val}[, right|]?",
    "Per the [new|current|updated] {subj} ({val}), I [pushed back on|had to turn down] {first}'s request.",
    "[Quick question|Question]: is the {subj} ({val}) [written down|documented] [anywhere|in the handbook]?",
]
MENTIONS_EXT = MENTIONS[:4] + [
    "Per the [new|current|updated] {subj} ({val}), [I told|we told] {customer} [no|that we can't go beyond it].",
    "[Quick question|Question]: does the {subj} of {val} apply to {customer} too?",
    "{customer} asked about the {subj}; [I said|told them] it's {val}.",
]
STALE = [
    "I thought the {subj} was still {old}?",
    "[Our|The] [onboarding deck|runbook|handbook page] still says {old} for the {subj}.",
]
STALE_EXT = STALE + [
    "{customer} is quoting {old} back at us for the {subj}; [that's|isn't that] the old number[, right|]?",
    "The [sales deck|order form template] still says {old} for the {subj}.",
]


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
             "since": r.choice(("", f" since {_month_year(vt)}", f" as of {_fmt_day(vt, 3)}", ""))}
        p = org.pick_people(t)[0]
        if ver["old"] and r.random() < 0.25:
            f["old"] = ver["old"]
            first = org.fill(r.choice(STALE_EXT if kind.external else STALE), f)
            q = org.pick_people(t, exclude=(p,))[0]
            reply = org.fill(r.choice(("No, it changed to {val} in {m}.", "It's {val} since {m}[, see the announcement|].",
                                       "That's outdated, it's {val} now.")), {**f, "m": _month_year(vt)})
            room = "#" + _slug(p.team(t))
            org.chat_burst(st, t, room, [p, q], [(p, first), (q, reply)])
            continue
        text = org.fill(r.choice(MENTIONS_EXT if kind.external else MENTIONS), f)
        ch = r.random()
        if ch < 0.6:
            extra = org.say(CHAT) if r.random() < 0.4 else ""
            org.add(st, "chat", p, t, (text + " " + extra).strip(), f"#{_slug(p.team(t))}/{t:%Y%m%d-%H%M}")
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


# =============================================================================================
# Storylines: incidents (conflicting accounts, corrected root causes) and deal disputes
# =============================================================================================


def _incident(org: _Org, t: datetime, tracked: bool, corrected: bool) -> Story:
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
        {"product": product, "d2": str(d2), "day": _fmt_day(t, 3)}),
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
        fbody = [f"While working on the {inc} follow-ups ({symptom} on {product}, {_fmt_day(t, r.randint(0, 3))}) I found that "
                 f"the postmortem's explanation does not hold.",
                 f"Evidence: {org.fill(r.choice(('the {component} metrics show the problem starting before the spike', 'we reproduced it in staging without any extra load', 'the same pattern shows up in logs from {n} earlier days')), over)}.",
                 f"It looks like {cause_b}."]
        fbody.extend(org.bank_lines("eng", r.randint(1, 4)))
        finding = org.add(st, "ticket", eng, ft, f"{key}: {inc} root cause re-examined\nReporter: {eng.name} ({eng.role(ft)}). Priority: P2.\n" + " ".join(fbody), key)
        corr_author = org.decider(ft, ("eng", "sre"), exclude=(lead,))
        ct = org.at_work(ft, r.uniform(2, 12))
        org.now = ct
        cbody = [f"Correction to the {inc} postmortem of {_fmt_day(pt, r.randint(0, 2))} "
                 f"({r.choice(('the ', ''))}{product} {r.choice(('outage', 'incident', symptom))} of {_fmt_day(t, r.randint(0, 3))}).",
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


def _dispute(org: _Org, t: datetime) -> Story:
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
    notes = ["Deal desk, " + _fmt_day(t, 0) + ". Present: " + org.attendees(att, t) + ".",
             f"{cust} {years} renewal: {ae.first} asked for room on price because {org.fill(r.choice(('a competitor offered {pct}% off', 'their budget was cut', 'they are consolidating vendors')))}.",
             r.choice((f"{approver.first} agreed to a discount but the number was not written down.",
                       f"Discussion of the discount; {approver.first} to confirm the final number by email.",
                       f"General agreement to be flexible on {cust}; exact cap to be confirmed."))]
    notes.extend(org.bank_lines("sales", r.randint(6, 14)))
    thread = f"DEAL-{_slug(cust).upper()}"
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
                     f"#{_slug('finance')}/{t4:%Y%m%d-%H%M}")
    st.data.update(cust=cust, cap=cap, claimed=claimed, signed=signed, approver=approver, ae=ae, fin=fin,
                   notes=n1, ae_doc=ae_doc, fin_doc=fin_doc, sg=sg, t=t, years=years)
    return st


# =============================================================================================
# Background traffic
# =============================================================================================


EMAIL_SUBJECTS = _bank([
    "{product} [update|status] for {weekday}", "{customer} [renewal|onboarding|escalation]", "{system} [migration|upgrade] plan",
    "[Notes|Follow-up] from the {customer} call", "{quarter} [planning|priorities]", "[Question|Quick question] about {feature}",
    "{month} [numbers|metrics|report]", "[Hiring|Interview] [update|loop] for {team}", "{vendor} [contract|renewal|invoice]",
    "[Offsite|Team event] in {city}", "{feature} [launch|beta|rollout]", "[Access|Permissions] for {system}",
    "[Security questionnaire|DPA] from {customer}", "[Incident follow-up|Action items] for {system}",
])
TICKET_TITLES = _bank([
    "{customer}: {feature} [fails|errors|times out] [on large exports|for some users|after the {version} release]",
    "{system}: [flaky|slow] {component} [tests|queries]", "[Upgrade|Replace] the {component} in {system}",
    "{customer} [cannot|can't] [log in|see {items}|export {items}] in {product}", "Add [metrics|alerts|dashboards] for {system}",
    "[Access request|Permission change]: {system} for {first}", "{product}: [typo|layout bug] on the {feature} page",
    "[Rotate|Renew] {component} [credentials|certificates] for {system}", "{vendor} invoice {ticket} [mismatch|approval]",
    "[Laptop|Equipment] request for {first}", "{customer} data deletion request",
])


def _bg_chat(org, t, budget):
    r = org.rng
    team = r.choice(org.team_names) if r.random() < 0.75 else None
    room = "#" + (_slug(team) if team else r.choice(("general", "random", "announcements", "help-it", "incidents")))
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


def _bg_email(org, t, budget):
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


def _bg_ticket(org, t, budget):
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


def _bg_meeting(org, t, budget):
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
    lines = [f"{title}, {_fmt_day(t, r.choice((0, 1, 2)))}. {r.choice(('Present', 'Attendees'))}: {org.attendees(att, t)}."]
    lines.extend(org.bank_lines(func, n - 2))
    if r.random() < 0.3:
        lines.insert(r.randint(1, len(lines)), org.fill(r.choice((
            "[Decision|Agreed]: {first} owns the {feature} rollout for {product}.",
            "[Decision|Agreed]: push the {system} migration to {month}.",
            "[Decision|Agreed]: keep the current {ksubj} for now; revisit in {month}.",
        ))))
    owners = r.sample(att, min(len(att), r.randint(1, 3)))
    lines.append("Action items: " + "; ".join(f"{p.first} to {org.fill(r.choice(ACTIONS), cap=False)}" for p in owners) + ".")
    thread = f"MEET-{_slug(title).upper()}-{t:%Y-%m-%d}"
    emit = t + timedelta(days=r.uniform(1.5, 6)) if r.random() < 0.12 else None
    org.add(None, "meeting", scribe, t, "\n".join(lines), thread, emit=emit)
    used = 1
    if budget > 1 and r.random() < 0.15:
        _transcript(org, None, t, title, att, [], thread, emit)
        used += 1
    return used


def _bg_policy(org, t, budget):
    r = org.rng
    title = r.choice(BG_POLICIES)
    owner = org.decider(t, ("people", "finance", "security", "legal"))
    lines = [f"{title} (owner: {owner.name}, {owner.role(t)}; effective {_fmt_day(t + timedelta(days=r.randint(0, 20)), 0)})."]
    prior = org._counters.get("policy:" + title, 0)
    if prior and r.random() < 0.8:
        lines.append(f"This revision replaces the previous {title.lower()}.")
    org._counters["policy:" + title] = prior + 1
    lines.extend(org.say_many(POLICY_LINES, r.randint(10, 30)))
    org.add(None, "policy", owner, t, "\n".join(lines), f"POLICY-{_slug(title).upper()}")
    return 1


def _role_change_doc(org, t, p, kind, before):
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


# =============================================================================================
# Questions
# =============================================================================================

Q_SUPERSESSION = [
    "What is the current {q}, and what did it replace?",
    "What's the {q} now, and what was it before the latest change?",
    "Has the {q} changed? What is it today and what was the previous value?",
    "Which {q} is in force now, and which earlier decision does it override?",
    "What {q} do we use today, and what did {pref}'s change replace?",
    "Is the {old} {q} still valid? If not, what replaced it?",
    "What's the latest word on the {q}, and what did it supersede?",
    "Remind me what the {q} is these days and what it used to be.",
]
Q_PROVENANCE = [
    "Who decided the {q}, when, and why?",
    "Who made the call to set the {q} to {val}, and on what grounds?",
    "Where was the {val} {q} agreed, and by whom?",
    "Which meeting produced the decision on the {q}, and who signed off?",
    "Who is behind the {q} of {val}, and what reasons did they give?",
    "When was the {q} of {val} decided, and who decided it?",
    "Who approved {val} as the {q}?",
    "Who changed the {q} to {val}, and what was the reasoning?",
]
Q_PROVENANCE_FIRST = [
    "Who originally set the {q}, and why?",
    "Who made the first decision on the {q}, and in which meeting?",
]
Q_BITEMPORAL = [
    "What was the {q} on {d}?",
    "As of {d}, what {q} was in force?",
    "What {q} would we have quoted on {d}?",
    "Back on {d}, what did we have as the {q}?",
    "What was the {q} at that point?",
    "What did the record say the {q} was at the time?",
]
Q_AUDIT = [
    "What was on record about the {q} as of {d}?",
    "Reconstruct what we knew about the {q} on {d}.",
    "List what had been written about the {q} up to {d}.",
    "For an audit: what did our records say about the {q} on {d}?",
    "What had been decided and discussed about the {q} by {d}?",
    "What did we have on file about the {q} at that date?",
]
Q_JUSTIFY = [
    "Why was the {q} changed from {old} to {new}?",
    "What led {pref} to change the {q}?",
    "What is the reasoning behind the {q} being {new}?",
    "Walk me through why the {q} moved to {new}.",
    "What problems with the {old} {q} prompted the change?",
    "Why did we move the {q} away from {old}?",
]
Q_VENDOR_JUSTIFY = [
    "Why did we switch the {q} from {old} to {new}?",
    "What led {pref} to replace {old}?",
    "Why is {new} now our {q}?",
]
Q_INC_CONTRA = [
    "How long did the {ir} last, and how many customers were affected?",
    "Do the accounts of the {ir} agree on its duration and impact?",
    "What impact did the {ir} have on customers?",
    "How many customers were hit by the {ir}, and for how long?",
    "How bad was the {ir}?",
]
Q_DEAL_CONTRA = [
    "What discount was approved for {cust}'s renewal?",
    "Was {cust}'s renewal discount within the approved cap?",
    "How much of a discount did we agree to give {cust}?",
    "What did the deal desk approve for the {cust} {years} renewal?",
]
Q_RECAP_CONTRA = [
    "What {q} was agreed at the {m} on {d}?",
    "Do people agree on what the {m} decided about the {q}?",
    "What did the {m} in {my} settle for the {q}?",
]


def _inc_ref(org, st, style=None):
    r = org.rng
    d = st.data
    s = r.random() if style is None else style
    if s < 0.25:
        return f"incident {d['inc']}"
    if s < 0.6:
        return f"{d['product']} outage on {_fmt_day(d['t'], r.choice((0, 1, 3)))}"
    if s < 0.85:
        return f"{d['symptom']} incident of {_month_year(d['t'])}"
    return f"{d['product']} incident in {_month_year(d['t'])}"


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


def _questions(org: _Org, stories: list[Story]):
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
                return f"{v['author'].name} ({v['author'].role(v['t'])}, {_fmt_day(v['t'], 0)})"

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
                  f"{who(v)} decided {v['value']} at the {v['meeting_title']} on {_fmt_day(v['meeting_t'], 0)}; "
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
                text = _qtext(org, tpl, {"q": r.choice(qs), "d": _fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
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
                text = _qtext(org, tpl, {"q": r.choice(qs), "d": _fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
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
                  f"{v['author'].name} changed it from {p['value']} to {v['value']} on {_fmt_day(v['t'], 0)} because "
                  f"{'; '.join(v['reasons'])}.", pri=0 if vi == pick else 1)
            # contradiction: a recap that disagrees with the decision
            for v in vers:
                if v["recap"]:
                    rc = v["recap"]
                    tpl = r.choice(Q_RECAP_CONTRA)
                    mt = v["meeting_t"]
                    text = _qtext(org, tpl, {"q": r.choice(qs), "m": v["meeting_title"], "d": _fmt_day(mt, r.randint(0, 3)),
                                             "my": _month_year(mt)})
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
                              {"ir": _inc_ref(org, st), "d": _fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
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
                                  {"ir": _inc_ref(org, st), "d": _fmt_day(datetime(a.year, a.month, a.day), r.randint(0, 2))})
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
    org = _Org(idx, n_org, seed, n_orgs, used, n_total)
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
            st = _make_topic(org, k, ent, t0, n_rev, tracked)
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
            st = _incident(org, t, True, r.random() < 0.6)
        else:
            t = org.start + timedelta(days=r.uniform(0.05, 0.85) * span)
            st = _dispute(org, t)
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
        _incident(org, t, False, r.random() < 0.15)
    for t, p, kind, before in org.role_changes:
        _role_change_doc(org, t, p, kind, before)
    # ---- background traffic up to the requested size ----
    remaining = n_org - len(org.docs)
    if remaining < 0:
        _trim(org, stories, -remaining)
        remaining = n_org - len(org.docs)
    units = [(_bg_chat, 0.36 / 3.3), (_bg_email, 0.25 / 1.8), (_bg_ticket, 0.16 / 1.9),
             (_bg_meeting, 0.14 / 1.15), (_bg_policy, 0.03)]
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
    cands = _questions(org, stories)
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
    n_docs = int(n_docs)
    n_orgs = max(1, int(n_orgs))
    if n_docs < MIN_DOCS_PER_ORG * n_orgs:
        raise ValueError(f"n_docs={n_docs} is too small for {n_orgs} organization(s) "
                         f"(need at least {MIN_DOCS_PER_ORG} per organization)")
    sizes = [n_docs // n_orgs + (1 if i < n_docs % n_orgs else 0) for i in range(n_orgs)]
    used: set = set()
    all_docs: list[dict] = []
    all_qs: list[dict] = []
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
        all_docs.extend(out_docs)
        all_qs.extend(out_qs)
    return all_docs, all_qs


def write(out_dir, n_docs: int, seed: int = 0, n_orgs: int = 1) -> dict:
    """Write ``docs.jsonl`` and ``questions.jsonl`` under ``out_dir``; returns a summary."""
    t0 = time.perf_counter()
    docs, questions = generate(n_docs, seed, n_orgs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
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
    args = ap.parse_args(argv)
    try:
        s = write(args.out, args.docs, args.seed, args.orgs)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cats = " ".join(f"{c}={n}" for c, n in s["by_category"].items())
    print(f"orgbench: {s['docs']} docs, {s['questions']} questions ({cats}), {s['scopes']} scope(s), "
          f"{s['authors']} authors, seed {args.seed}, {s['seconds']}s -> {s['out']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
