"""The people directory (``mempp.people``, ``tags.NameMatcher``): a question's names, aliases and
roles resolve to every author label of the person they mean, at the time asked about; checked
against a plain Python model of the rule, end to end through queries, filters, versions, readers,
export and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
import mempp.people
from mempp.people import name_key
from mempp.storage.analyzer import STOPWORDS
from mempp.tags import NameMatcher

FIRST = ["sarah", "bob", "ann"]
LAST = ["chen", "ray", "lee"]
TITLES = ["cto", "head of sales", "staff engineer", "vp people", "staff engineer, platform", "platform"]
FILLER = ["what", "the", "say", "of", "in", "our"]
DAY0 = date(2023, 1, 1)


def us(d: date, end: bool = False) -> int:
    t = datetime.combine(d, datetime.max.time() if end else datetime.min.time(), tzinfo=timezone.utc)
    return (t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


def words(text: str) -> list[str]:
    import re

    return re.findall(r"[a-z0-9]+", text.lower())


def model(labels: list[str], people: list[dict], question: str, at: int) -> list[int]:
    """The matching rule written out: label -> person, then forms, tokens and roles by plain loops."""
    def key(name: str) -> tuple:
        if "@" in name and not name.startswith("@"):
            return tuple(words(name.split("@")[0]))
        if name.count(",") == 1 and all(words(p) for p in name.split(",")):
            last, first = name.split(",")
            return tuple(words(first) + words(last))
        return tuple(words(name))

    persons: list[dict] = []
    for p in people:
        forms = {key(p["name"]), tuple(words(p["name"]))} | {f for a in p["aliases"] for f in (key(a), tuple(words(a)))}
        persons.append({"forms": {f for f in forms if f}, "codes": [], "roles": p["roles"]})
    for code, label in enumerate(labels):
        keys = {k for k in (key(label), tuple(words(label))) if k}
        owner = None
        for k in sorted(keys):
            owner = next((i for i, q in enumerate(persons) if k in q["forms"] and (i < len(people) or True)), None)
            if owner is not None:
                break
        if owner is None:
            persons.append({"forms": keys, "codes": [], "roles": []})
            owner = len(persons) - 1
        persons[owner]["codes"].append(code)
    ws = words(question)
    found = set()
    for i, p in enumerate(persons):
        if not p["codes"]:
            continue
        for f in p["forms"]:
            if any(tuple(ws[j:j + len(f)]) == f for j in range(len(ws))):
                found.add(i)
            if any(len(t) >= 2 and t not in STOPWORDS and not t.isdigit() and t in ws for t in {f[0], f[-1]}):
                found.add(i)
        for r in p["roles"]:
            title = {w for w in words(r["role"]) if w not in STOPWORDS} or set(words(r["role"]))
            held = (r["from"] is None or us(date.fromisoformat(r["from"])) <= at) and (r["to"] is None or at <= us(date.fromisoformat(r["to"]), True))
            # every word of the title but stop words, in any order, from a title word on within len + 2 words
            if held and any(ws[j] in title and title <= set(ws[j:j + len(title) + 2]) for j in range(len(ws))):
                found.add(i)
    return sorted(c for i in found for c in persons[i]["codes"])


name = st.tuples(st.sampled_from(FIRST), st.sampled_from(LAST))
label = st.one_of(
    name.map(lambda n: f"{n[0].title()} {n[1].title()}"),
    name.map(lambda n: f"{n[1].title()}, {n[0].title()}"),
    name.map(lambda n: f"{n[0]}.{n[1]}@acme.com"),
    name.map(lambda n: f"{n[0][0]}{n[1]}"),
)
role = st.builds(
    lambda t, a, n: {"role": t, "from": None if a is None else (DAY0 + timedelta(days=a)).isoformat(),
                     "to": None if n is None else (DAY0 + timedelta(days=(a or 0) + n)).isoformat()},
    st.sampled_from(TITLES), st.none() | st.integers(0, 600), st.none() | st.integers(0, 400),
)
person = st.builds(
    lambda n, aliases, roles: {"name": f"{n[0].title()} {n[1].title()}", "aliases": sorted(set(aliases)), "roles": roles},
    name, st.lists(label, max_size=2), st.lists(role, max_size=2),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    labels=st.lists(label, min_size=1, max_size=6, unique=True),
    people=st.lists(person, max_size=3, unique_by=lambda p: p["name"]),
    question=st.lists(st.sampled_from(FIRST + LAST + TITLES + TITLES + FILLER + ["engineer", "staff", "platform", "sales"]),
                      min_size=1, max_size=8).map(" ".join),
    day=st.integers(0, 900),
)
def test_matcher_is_the_model(labels, people, question, day):
    checked = [mempp.people.check_person(p, i) for i, p in enumerate(people)]
    at = us(DAY0 + timedelta(days=day), True)
    assert NameMatcher(labels, checked).match(question, at) == model(labels, checked, question, at)


def test_name_forms_fold_together():
    assert name_key("Chen, Sarah") == name_key("sarah.chen@acme.com") == name_key("Sarah  Chen") == ("sarah", "chen")
    assert name_key("@schen") == ("schen",)
    m = NameMatcher(["Chen, Sarah", "sarah.chen@acme.com", "Bob Ray"])
    assert m.match("What did Sarah Chen decide?") == [0, 1]  # one person, however the labels write her


def test_role_words_in_any_order_within_a_window_and_the_first_entry_owns_a_shared_alias():
    people = [mempp.people.check_person(p) for p in (
        {"name": "Sam Lee", "aliases": ["slee"], "roles": [{"role": "Staff Engineer, Platform"}]},
        {"name": "Sue Lee", "aliases": ["slee"]},
    )]
    m = NameMatcher(["slee", "Sue Lee"], people)
    assert m.match("what did the platform staff engineer say?") == [0]
    assert m.match("the staff engineer on the platform team") == [0]  # 5 words: the title's 3 and 2 more
    assert m.match("the staff engineer who joined the platform") == []  # 6 words apart
    assert m.match("what did Sam say?") == [0]  # the label "slee" belongs to the first entry that lists it
    assert m.match("what did slee say?") == [0, 1]  # the word names both people who go by it
    assert m.resolve(["Platform staff engineer"]) == ["slee"] and m.resolve(["the platform"]) == []


def test_named_phrases_are_the_names_as_written_and_never_roles():
    """What ``name_free`` takes out of a question's vector: each name or alias of a person with an
    author label, as the question writes it; a word inside a longer match is not named again;
    titles and people without a label in the store are not names."""
    people = [mempp.people.check_person(p) for p in (
        {"name": "Sarah Chen", "aliases": ["schen"], "roles": [{"role": "CTO"}]},
        {"name": "Dana Cruz"},  # no author label: nothing of the store goes by her
    )]
    m = NameMatcher(["Chen, Sarah", "schen", "Bob Ray"], people)
    assert m.named_phrases("What did Sarah Chen approve?") == ["sarah chen"]
    assert m.named_phrases("what did schen and Bob say to Sarah's team?") == ["bob", "sarah", "schen"]
    assert m.named_phrases("What did the CTO approve in March 2024?") == []
    assert m.named_phrases("what did Dana Cruz say?") == []
    assert m.match("What did the CTO approve in March 2024?", us(date(2024, 3, 31), True)) == [0, 1]  # the role still matches


DOCS = [
    {"id": "pg", "text": "Approved: we move the billing database to Postgres 16.", "author": "bob.ray@acme.com", "date": "2023-06-01"},
    {"id": "office", "text": "Approved: the budget for the new office.", "author": "Lee, Ann", "date": "2024-03-10"},
    {"id": "lunch", "text": "Approved: the lunch menu for Friday.", "author": "Sam Poe", "date": "2024-03-11"},
    {"id": "chat", "text": "approved the rollout of the new runbook", "author": "bray", "date": "2023-07-02"},
]
PEOPLE = [
    {"name": "Bob Ray", "aliases": ["bray"], "roles": [{"role": "CTO", "from": "2023-02-01", "to": "2024-02-15"}]},
    {"name": "Ann Lee", "roles": [{"role": "CTO", "from": "2024-02-16"}]},
]


@pytest.fixture
def org(tmp_path):
    with mempp.Store.open(tmp_path / "org", embedder=mempp.HashEmbedder()) as s:
        s.add(DOCS)
        yield s


def test_a_role_means_its_holder_at_the_time_asked(org):
    assert org.query("what did the CTO approve?", as_of="2023-08-01").plan.matched_authors == ()
    org.add_people(PEOPLE)
    ask = lambda q, **kw: org.query(q, k=4, **kw).plan.matched_authors  # noqa: E731
    assert ask("what did the CTO approve?", as_of="2023-08-01") == ("bob.ray@acme.com", "bray")
    assert ask("what did the CTO approve in March 2024?") == ("Lee, Ann",)  # the question's date, not now
    assert ask("what did the CTO approve in February 2024?") == ("bob.ray@acme.com", "Lee, Ann", "bray")  # both held it that month
    assert ask("what did the CTO approve?") == ("Lee, Ann",)  # no date: whoever holds it now
    assert ask("what did bray approve?", as_of="2024-12-31") == ("bob.ray@acme.com", "bray")  # an alias: every label of his
    top = org.query("what did the CTO approve?", k=1, as_of="2023-08-01")[0]
    assert top.key in ("pg", "chat") and top.author in ("bob.ray@acme.com", "bray")  # a document keeps its author as written


def test_the_authors_filter_resolves_names_aliases_and_roles(org):
    org.add_people(PEOPLE)
    keys = lambda **kw: sorted(h.key for h in org.query("approved", k=10, reserve=False, **kw))  # noqa: E731
    assert keys(authors="CTO", as_of="2023-12-31") == ["chat", "pg"]
    assert keys(authors="the CTO") == ["office"]
    assert keys(authors=["Bob Ray"]) == ["chat", "pg"]
    assert keys(authors="CTO", date_from="2024-01-01", date_to="2024-03-31") == ["office"]  # Bob's documents are older
    assert keys(authors="lee, ann") == ["office"]  # a label as written still works
    assert sorted(r.key for r in org.documents(authors="CTO", as_of="2023-12-31")) == ["chat", "pg"]
    assert keys(authors="nobody at all") == []
    rows = list(org.query_batch(["approved", "approved"], as_of=["2023-12-31", None], authors="CTO", k=10, reserve=False).to_pylist())
    assert sorted(r["key"] for r in rows if r["query"] == 0) == ["chat", "pg"] and [r["key"] for r in rows if r["query"] == 1] == ["office"]


def test_directory_is_committed_versioned_and_replaced_by_name(tmp_path, org):
    v = org.version
    assert org.add_people(PEOPLE) == 2 and org.version == v + 1
    assert org.add_people(PEOPLE) == 0 and org.version == v + 1  # nothing changed: no commit
    assert org.add_people([{"name": "ann  lee", "aliases": ["al"]}]) == 1  # the same person by name: replaced whole
    path = org.searcher().path
    org.close()
    with mempp.Store.open(path) as again:
        got = {p["name"]: p for p in again.people()}
        assert set(got) == {"Bob Ray", "ann lee"} and got["ann lee"] == {"name": "ann lee", "aliases": ["al"], "roles": []}
        assert again.query("what did the CTO approve?").plan.matched_authors == ()  # Ann holds no role any more
        assert [v["kind"] for v in again.versions()][-2:] == ["access", "access"]


@pytest.mark.parametrize("bad, field", [
    ({"name": ""}, "name"),
    ({"aliases": ["x"]}, "name"),
    ({"name": "X", "title": "CTO"}, "title"),
    ({"name": "X", "aliases": "bray"}, "aliases"),
    ({"name": "X", "roles": [{"role": "CTO", "from": "2024-13-01"}]}, "roles[0].from"),
    ({"name": "X", "roles": [{"role": "CTO", "from": "2024-02-01", "to": "2024-01-01"}]}, "roles[0].to"),
    ({"name": "X", "roles": [{"from": "2024-02-01"}]}, "roles[0].role"),
    ({"name": "X", "roles": ["CTO"]}, "roles[0]"),
])
def test_bad_people_are_refused_naming_the_field_and_nothing_is_committed(org, bad, field):
    org.add_people(PEOPLE)
    v = org.version
    with pytest.raises(mempp.ValidationError) as err:
        org.add_people([{"name": "Zed Ok"}, bad])
    assert err.value.field == field and err.value.record == 1
    assert org.version == v and [p["name"] for p in org.people()] == ["Bob Ray", "Ann Lee"]


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["name", "aliases", "roles", "role", "from", "to", "x"]), c, max_size=3),
                    max_leaves=8))
def test_any_input_is_checked_or_refused(value):
    try:
        got = mempp.people.check_people(value if isinstance(value, list) else [value])
    except mempp.ValidationError as exc:
        assert str(exc)
    else:
        for p in got:
            assert set(p) == {"name", "aliases", "roles"} and mempp.people.check_person(p) == p


def test_a_reader_resolves_only_to_authors_it_may_read_and_its_export_carries_them(tmp_path, org):
    org.add_people(PEOPLE)
    org.set_readers("pg", ["user:cto-office"])
    org.set_readers("chat", ["user:cto-office"])
    assert [p["name"] for p in org.people(principal="user:someone")] == ["Ann Lee"]
    assert org.query("what did the CTO approve?", as_of="2023-08-01", principal="user:someone").plan.matched_authors == ()
    assert org.query("what did the CTO approve?", as_of="2023-08-01", principal="user:cto-office").plan.matched_authors == ("bob.ray@acme.com", "bray")
    out = tmp_path / "mine.parquet"
    import pyarrow.parquet as pq

    pq.write_table(org.export(principal="user:someone"), out)
    from mempp.export import add_export, read_export, read_header

    with mempp.Store.open(tmp_path / "copy", embedder=mempp.HashEmbedder()) as copy:
        add_export(copy, list(read_export(out)), header=read_header(out))
        assert copy.people() == org.people(principal="user:someone")
        for q in ("what did the CTO approve in March 2024?", "what did Ann approve?"):
            mine = org.query(q, principal="user:someone")
            theirs = copy.query(q)
            assert [h.key for h in mine] == [h.key for h in theirs] and mine.plan.matched_authors == theirs.plan.matched_authors


def test_people_command_and_eval_directory(tmp_path, org):
    path = org.searcher().path
    org.close()
    people = tmp_path / "people.jsonl"
    people.write_text("".join(json.dumps(p) + "\n" for p in PEOPLE))
    run = lambda *a: subprocess.run([sys.executable, "-m", "mempp", *a], capture_output=True, text=True)  # noqa: E731
    out = run("people", str(path), str(people))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["Bob Ray  aka bray  CTO (2023-02-01 to 2024-02-15)", "Ann Lee  CTO (2024-02-16 to now)"]
    people.write_text(json.dumps({"name": "X", "roles": [{"role": "CTO", "to": "soon"}]}) + "\n")
    bad = run("people", str(path), str(people))
    assert bad.returncode != 0 and f"{people}:1" in bad.stderr and "roles[0].to" in bad.stderr

    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "docs.jsonl").write_text("".join(json.dumps({**d, "scope": "s"}) + "\n" for d in DOCS))
    (bench / "questions.jsonl").write_text(json.dumps({"id": "q", "scope": "s", "text": "What did the CTO approve?", "as_of": "2023-06-30",
                                                       "evidence": ["pg"], "category": "role"}) + "\n")
    from mempp.bench.evaluate import EvalConfig, evaluate

    cfg = EvalConfig(ks=(1,), embedder="hash", chain=0)
    without = evaluate(bench / "docs.jsonl", bench / "questions.jsonl", cfg, progress=False)
    (bench / "people.jsonl").write_text("".join(json.dumps({**p, "scope": "s"}) + "\n" for p in PEOPLE))
    with_dir = evaluate(bench / "docs.jsonl", bench / "questions.jsonl", cfg, progress=False)
    assert without["config"]["people"] == 0 and with_dir["config"]["people"] == 2
    assert with_dir["overall"]["recall@1"] == 1.0


def test_a_parquet_file_of_people(tmp_path, org):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"name": "Bob Ray", "aliases": ["bray"], "roles": [{"role": "CTO", "from": "2023-02-01", "to": None}]},
                                         {"name": "Ann Lee", "aliases": None, "roles": None}]), tmp_path / "people.parquet")
    assert org.add_people(tmp_path / "people.parquet") == 2
    assert org.people()[0] == {"name": "Bob Ray", "aliases": ["bray"], "roles": [{"role": "CTO", "from": "2023-02-01", "to": None}]}
    pq.write_table(pa.Table.from_pylist([{"name": "X", "roles": [{"role": "CTO", "from": "never", "to": None}]}]), tmp_path / "bad.parquet")
    with pytest.raises(mempp.ValidationError, match=r"bad.parquet: row 1.*roles\[0\].from"):
        org.add_people(tmp_path / "bad.parquet")


def test_evidence_names_the_person_beside_the_label_as_written(org):
    assert org.get("chat").person is None  # no directory: the label alone
    org.add_people(PEOPLE)
    rec = org.get("chat")
    assert (rec.author, rec.person, rec.to_dict()["person"]) == ("bray", "Bob Ray", "Bob Ray")
    assert "person" not in org.get("lunch").to_dict()  # Sam Poe is in no entry
    hits = org.query("what did the CTO approve?", as_of="2023-08-01", k=2)
    text = mempp.format_evidence(hits)
    assert "Bob Ray (as bray):" in text or "Bob Ray (as bob.ray@acme.com):" in text
    assert org.history("office")[0].person == "Ann Lee"


def test_agents_see_the_person_too(org):
    from mempp.mcp_server import record_dict

    org.add_people(PEOPLE)
    assert record_dict(org.get("chat"))["person"] == "Bob Ray" and "person" not in record_dict(org.get("lunch"))
    pytest.importorskip("langchain_core")
    from mempp.langchain import hit_document

    hits = org.query("what did the CTO approve?", as_of="2023-08-01", k=4)
    assert {hit_document(h).metadata.get("person") for h in hits if h.author in ("bray", "bob.ray@acme.com")} == {"Bob Ray"}
