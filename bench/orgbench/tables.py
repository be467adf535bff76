"""OrgBench's data: vocabularies, sentence templates and scenario tables, read from ``data/*.json``.

Owns loading the JSON files shipped with the package, checking each against its schema (a
wrong type, a missing or unknown key, or a template that does not parse raises
:class:`TableError` naming the file and the entry), and the module-level names the generator
reads (``FIRST_NAMES``, ``KINDS``, ``CHAT``, ...), built once at import. Templates of the
banks are compiled here (``templates``). Imports only the standard library and ``templates``;
never the generator's other modules, which import it.
"""

from __future__ import annotations

import json
from importlib import resources

from .templates import bank, compile_template

DATA = "data"  # the folder of JSON files, beside this module


class TableError(ValueError):
    """A data file does not match its schema; the message names the file and the entry."""


class _Schema:
    def conv(self, value, where: str):
        raise NotImplementedError


class _Scalar(_Schema):
    def __init__(self, kind: type, name: str) -> None:
        self.kind, self.name = kind, name

    def conv(self, value, where):
        if type(value) is not self.kind:
            raise TableError(f"{where}: expected {self.name}, got {type(value).__name__} {value!r:.60}")
        return value


STR = _Scalar(str, "a string")
INT = _Scalar(int, "an integer")
BOOL = _Scalar(bool, "true or false")


class List(_Schema):
    def __init__(self, item: _Schema) -> None:
        self.item = item

    def conv(self, value, where):
        if type(value) is not list:
            raise TableError(f"{where}: expected a list, got {type(value).__name__}")
        return [self.item.conv(x, f"{where}[{i}]") for i, x in enumerate(value)]


class TupleOf(List):
    """A list of any length, kept as a tuple."""

    def conv(self, value, where):
        return tuple(super().conv(value, where))


class Set(List):
    def conv(self, value, where):
        return set(super().conv(value, where))


class Tuple(_Schema):
    """A list of exactly these items, kept as a tuple."""

    def __init__(self, *items: _Schema) -> None:
        self.items = items

    def conv(self, value, where):
        if type(value) is not list or len(value) != len(self.items):
            raise TableError(f"{where}: expected a list of {len(self.items)} items, got {value!r:.80}")
        return tuple(s.conv(x, f"{where}[{i}]") for i, (s, x) in enumerate(zip(self.items, value)))


class Dict(_Schema):
    """An object of any keys, all values of one schema."""

    def __init__(self, value: _Schema) -> None:
        self.value = value

    def conv(self, value, where):
        if type(value) is not dict:
            raise TableError(f"{where}: expected an object, got {type(value).__name__}")
        return {k: self.value.conv(v, f"{where}[{k!r}]") for k, v in value.items()}


class Record(_Schema):
    """An object with these keys (``optional`` ones may be absent; no others)."""

    def __init__(self, required: dict[str, _Schema], optional: dict[str, _Schema] | None = None) -> None:
        self.required, self.optional = required, optional or {}

    def conv(self, value, where):
        if type(value) is not dict:
            raise TableError(f"{where}: expected an object, got {type(value).__name__}")
        missing = [k for k in self.required if k not in value]
        unknown = [k for k in value if k not in self.required and k not in self.optional]
        if missing or unknown:
            raise TableError(f"{where}: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown {', '.join(unknown)}"] if unknown else [])
            ))
        return {k: {**self.required, **self.optional}[k].conv(v, f"{where}.{k}") for k, v in value.items()}


class Templates(List):
    """A bank of sentence templates, compiled (``templates.compile_template``)."""

    def __init__(self) -> None:
        super().__init__(STR)

    def conv(self, value, where):
        items = super().conv(value, where)
        for i, s in enumerate(items):
            try:
                compile_template(s)
            except ValueError as e:
                raise TableError(f"{where}[{i}]: {e}") from None
        return bank(items)


TEMPLATES = Templates()

KIND = Record(
    {"key": STR, "ent": STR, "funcs": TupleOf(STR), "fam": STR, "subj": List(STR), "qsubj": List(STR), "values": List(STR)},
    {"policy": STR, "ordered": BOOL, "more": BOOL, "noun": STR, "qsubj_extra": List(STR)},
)

SCHEMAS: dict[str, dict[str, _Schema]] = {
    "vocabulary.json": {
        "first_names": List(STR),
        "last_names": List(STR),
        "product_words": List(STR),
        "product_suffix": List(STR),
        "sys_a": List(STR),
        "sys_b": List(STR),
        "cust_a": List(STR),
        "cust_b": List(STR),
        "vendor_a": List(STR),
        "vendor_b": List(STR),
        "vcats": List(Tuple(STR, TupleOf(STR))),
        "cities": List(STR),
        "regions": List(STR),
        "frameworks": List(STR),
        "segments": List(STR),
        "accts": List(STR),
        "tiers": List(STR),
        "industries": List(Tuple(STR, STR, STR)),
        "org_a": List(STR),
        "org_b": List(STR),
        "features": List(STR),
        "components": List(STR),
        "months": List(STR),
        "weekdays": List(STR),
    },
    "organization.json": {
        "teams": List(Tuple(STR, STR, INT)),
        "ladders": Dict(List(STR)),
        "exec_titles": List(STR),
        "exec_funcs": Dict(TupleOf(STR)),
        "related": Dict(TupleOf(STR)),
        "ticket_project": Dict(STR),
    },
    "kinds.json": {
        "external_kinds": Set(STR),
        "kinds": List(KIND),
    },
    "sentences.json": {
        "chat": TEMPLATES,
        "banks": Dict(TEMPLATES),
        "func_banks": Dict(TupleOf(STR)),
        "policy_lines": TEMPLATES,
        "bg_policies": List(STR),
        "filler": TEMPLATES,
        "spoken": List(STR),
        "chatter_alt": List(STR),
        "email_subjects": TEMPLATES,
        "ticket_titles": TEMPLATES,
    },
    "decisions.json": {
        "family": Dict(Dict(List(STR))),
        "init_reasons": List(STR),
        "concerns": TEMPLATES,
        "triggers": Dict(Tuple(STR, TupleOf(STR), STR, List(STR), List(STR))),
        "meeting_titles": Dict(List(STR)),
        "decision_lines": Dict(List(STR)),
        "spoken_proposals": Dict(List(STR)),
        "proposals": Dict(List(STR)),
        "actions": List(STR),
        "discuss_open": Dict(List(STR)),
        "discuss_reply": List(STR),
        "mentions": List(STR),
        "mentions_ext_extra": List(STR),
        "stale": List(STR),
        "stale_ext_extra": List(STR),
    },
    "incidents.json": {
        "root_causes": List(Tuple(STR, STR)),
        "symptoms": List(STR),
    },
    "questions.json": {
        "q_supersession": List(STR),
        "q_provenance": List(STR),
        "q_provenance_first": List(STR),
        "q_bitemporal": List(STR),
        "q_audit": List(STR),
        "q_justify": List(STR),
        "q_vendor_justify": List(STR),
        "q_inc_contra": List(STR),
        "q_deal_contra": List(STR),
        "q_recap_contra": List(STR),
    },
}


def check(name: str, raw: object, schemas: dict[str, _Schema] | None = None) -> dict:
    """The tables of data file ``name`` (parsed JSON ``raw``), checked and converted; :class:`TableError` otherwise."""
    schema = Record({k: s for k, s in (schemas or SCHEMAS[name]).items()}, {"_about": STR})
    try:
        out = schema.conv(raw, "")
    except TableError as e:
        raise TableError(f"{name}: {str(e).lstrip('.: ') or e}") from None
    out.pop("_about", None)
    return out


def load(name: str) -> dict:
    """Read and check one data file of the package (``data/<name>``)."""
    text = resources.files(__package__).joinpath(DATA, name).read_text(encoding="utf-8")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise TableError(f"{name}: not valid JSON: {e}") from None
    return check(name, raw)


class Kind:
    __slots__ = ("key", "ent", "funcs", "fam", "policy", "subj", "qsubj", "values", "ordered", "more", "noun", "external")

    def __init__(self, key, ent, funcs, fam, subj, qsubj, values, *, policy=None, ordered=True, more=True,
                 noun="setting"):
        self.key, self.ent, self.funcs, self.fam = key, ent, funcs, fam
        self.subj, self.qsubj, self.values = subj, qsubj, values
        self.policy, self.ordered, self.more, self.noun = policy, ordered, more, noun
        self.external = key in EXTERNAL_KINDS


_vocabulary = load("vocabulary.json")
FIRST_NAMES = _vocabulary["first_names"]
LAST_NAMES = _vocabulary["last_names"]
PRODUCT_WORDS = _vocabulary["product_words"]
PRODUCT_SUFFIX = _vocabulary["product_suffix"]
SYS_A = _vocabulary["sys_a"]
SYS_B = _vocabulary["sys_b"]
CUST_A = _vocabulary["cust_a"]
CUST_B = _vocabulary["cust_b"]
VENDOR_A = _vocabulary["vendor_a"]
VENDOR_B = _vocabulary["vendor_b"]
VCATS = _vocabulary["vcats"]
CITIES = _vocabulary["cities"]
REGIONS = _vocabulary["regions"]
FRAMEWORKS = _vocabulary["frameworks"]
SEGMENTS = _vocabulary["segments"]
ACCTS = _vocabulary["accts"]
TIERS = _vocabulary["tiers"]
INDUSTRIES = _vocabulary["industries"]
ORG_A = _vocabulary["org_a"]
ORG_B = _vocabulary["org_b"]
FEATURES = _vocabulary["features"]
COMPONENTS = _vocabulary["components"]
MONTHS = _vocabulary["months"]
MON3 = [m[:3] for m in MONTHS]
WEEKDAYS = _vocabulary["weekdays"]

_organization = load("organization.json")
TEAMS = _organization["teams"]  # (name, function, weight); functions choose ladders and sentence banks
LADDERS = _organization["ladders"]
EXEC_TITLES = _organization["exec_titles"]
EXEC_FUNCS = _organization["exec_funcs"]
RELATED = _organization["related"]
TICKET_PROJECT = _organization["ticket_project"]

_kinds = load("kinds.json")
EXTERNAL_KINDS = _kinds["external_kinds"]  # settings customers see (their mentions may involve a customer)
KINDS = []
for _k in _kinds["kinds"]:
    _extra = _k.pop("qsubj_extra", [])
    KINDS.append(Kind(**_k))
    KINDS[-1].qsubj = KINDS[-1].qsubj + _extra
KIND_BY_KEY = {k.key: k for k in KINDS}
CHATTER_KINDS = [k for k in KINDS if k.ent not in ("customer", "team_year", "year")]
EXTERNAL_CHATTER_KINDS = [k for k in CHATTER_KINDS if k.external]

_sentences = load("sentences.json")
CHAT = _sentences["chat"]
BANKS = _sentences["banks"]
FUNC_BANKS = _sentences["func_banks"]
POLICY_LINES = _sentences["policy_lines"]
BG_POLICIES = _sentences["bg_policies"]
FILLER = _sentences["filler"]
SPOKEN = _sentences["spoken"]
CHATTER_ALT = _sentences["chatter_alt"]
EMAIL_SUBJECTS = _sentences["email_subjects"]
TICKET_TITLES = _sentences["ticket_titles"]

_decisions = load("decisions.json")
FAMILY = _decisions["family"]
INIT_REASONS = _decisions["init_reasons"]
CONCERNS = _decisions["concerns"]
TRIGGERS = _decisions["triggers"]
MEETING_TITLES = _decisions["meeting_titles"]
DECISION_LINES = _decisions["decision_lines"]
SPOKEN_PROPOSALS = _decisions["spoken_proposals"]
PROPOSALS = _decisions["proposals"]
ACTIONS = _decisions["actions"]
DISCUSS_OPEN = _decisions["discuss_open"]
DISCUSS_REPLY = _decisions["discuss_reply"]
MENTIONS = _decisions["mentions"]
MENTIONS_EXT = MENTIONS[:4] + _decisions["mentions_ext_extra"]
STALE = _decisions["stale"]
STALE_EXT = STALE + _decisions["stale_ext_extra"]

_incidents = load("incidents.json")
ROOT_CAUSES = _incidents["root_causes"]
SYMPTOMS = _incidents["symptoms"]

_question_tables = load("questions.json")
Q_SUPERSESSION = _question_tables["q_supersession"]
Q_PROVENANCE = _question_tables["q_provenance"]
Q_PROVENANCE_FIRST = _question_tables["q_provenance_first"]
Q_BITEMPORAL = _question_tables["q_bitemporal"]
Q_AUDIT = _question_tables["q_audit"]
Q_JUSTIFY = _question_tables["q_justify"]
Q_VENDOR_JUSTIFY = _question_tables["q_vendor_justify"]
Q_INC_CONTRA = _question_tables["q_inc_contra"]
Q_DEAL_CONTRA = _question_tables["q_deal_contra"]
Q_RECAP_CONTRA = _question_tables["q_recap_contra"]
