"""OrgBench, the seeded synthetic organizational-memory benchmark (``mempp.bench.orgbench``)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import date, datetime, time
from functools import lru_cache

import pytest

from mempp.bench import orgbench
from mempp.bench.orgbench import CATEGORIES, generate, write

CHANNELS = {"email", "chat", "meeting", "transcript", "ticket", "incident", "policy"}


@lru_cache(maxsize=None)
def _gen(n_docs: int, seed: int = 0, n_orgs: int = 1):
    return generate(n_docs, seed, n_orgs)


def _as_of_limit(as_of: str) -> datetime:
    """FORMAT.md: a date without a time means the end of that day."""
    if "T" in as_of:
        return datetime.fromisoformat(as_of)
    return datetime.combine(date.fromisoformat(as_of), time.max)


def _digest(docs, questions) -> str:
    h = hashlib.sha256()
    for rec in docs + questions:
        h.update(json.dumps(rec, sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------ determinism
def test_same_seed_same_output_and_different_seed_differs():
    a = generate(600, seed=3, n_orgs=2)
    b = generate(600, seed=3, n_orgs=2)
    assert a == b
    c = generate(600, seed=4, n_orgs=2)
    assert _digest(*c) != _digest(*a)
    assert [d["text"] for d in c[0]] != [d["text"] for d in a[0]]


def test_output_does_not_depend_on_python_hash_salt():
    code = ("import hashlib, json; from mempp.bench.orgbench import generate; d, q = generate(400, 5, 2); "
            "h = hashlib.sha256();\nfor r in d + q: h.update(json.dumps(r, sort_keys=True).encode())\nprint(h.hexdigest())")
    out = set()
    for salt in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": salt}
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        out.add(res.stdout.strip())
    assert len(out) == 1


def test_write_is_byte_identical(tmp_path):
    s1 = write(tmp_path / "a", 500, seed=1, n_orgs=1)
    s2 = write(tmp_path / "b", 500, seed=1, n_orgs=1)
    for name in ("docs.jsonl", "questions.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert s1["docs"] == s2["docs"] == 500


# ------------------------------------------------------------------------------------------ FORMAT validity
@pytest.mark.parametrize("n_docs,n_orgs", [(2000, 1), (2000, 2)])
def test_format_validity(n_docs, n_orgs):
    docs, questions = _gen(n_docs, 0, n_orgs)
    ids = [d["id"] for d in docs]
    assert len(ids) == len(set(ids))
    scope_of = {d["id"]: d["scope"] for d in docs}
    assert len({d["scope"] for d in docs}) == n_orgs
    date_of = {}
    for d in docs:
        assert isinstance(d["text"], str) and d["text"].strip()
        assert isinstance(d["author"], str) and isinstance(d["thread"], str)
        assert d["channel"] in CHANNELS
        assert "supersedes" not in d  # the engine would act on it; held-out data does not have it
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", d["date"]), d["date"]
        date_of[d["id"]] = datetime.fromisoformat(d["date"])
        if "revises" in d:
            assert d["revises"] in scope_of and scope_of[d["revises"]] == d["scope"]
            assert date_of[d["revises"]] <= date_of[d["id"]]
    qids = [q["id"] for q in questions]
    assert len(qids) == len(set(qids))
    for q in questions:
        assert q["category"] in CATEGORIES
        assert isinstance(q["text"], str) and q["text"].endswith(("?", "."))
        assert isinstance(q["answer"], str) and q["answer"]
        assert q["evidence"], q
        assert len(set(q["evidence"])) == len(q["evidence"])
        limit = None
        if q["as_of"] is not None:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2})?", q["as_of"]), q["as_of"]
            limit = _as_of_limit(q["as_of"])
        for e in q["evidence"]:
            assert e in scope_of, e
            assert scope_of[e] == q["scope"]
            if limit is not None:
                assert date_of[e] <= limit, (q["id"], e)
    # ingest order is date order, except a small fraction of late-filed documents
    for scope in {d["scope"] for d in docs}:
        seq = [date_of[d["id"]] for d in docs if d["scope"] == scope]
        back = sum(1 for a, b in zip(seq, seq[1:]) if b < a)
        assert 0 < back < 0.05 * len(seq)


def test_texts_are_unique_per_author():
    # the engine treats identical text from the same author as a re-ingest of one document
    docs, _ = _gen(5000)
    keys = Counter((d["scope"], d["author"], " ".join(d["text"].split())) for d in docs)
    assert max(keys.values()) == 1


# ------------------------------------------------------------------------------------------ size and shape
@pytest.mark.parametrize("n_docs,n_orgs", [(500, 1), (5000, 1), (5000, 3)])
def test_size_control(n_docs, n_orgs):
    docs, questions = _gen(n_docs, 0, n_orgs)
    assert abs(len(docs) - n_docs) <= 0.05 * n_docs
    assert abs(len(questions) - n_docs / 20) <= 0.25 * n_docs / 20 + 6


@pytest.mark.parametrize("n_orgs", [1, 2])
def test_all_categories_at_2000_docs(n_orgs):
    _, questions = _gen(2000, 0, n_orgs)
    counts = Counter(q["category"] for q in questions)
    assert set(counts) == set(CATEGORIES)
    assert min(counts.values()) >= 12, counts


def test_channels_lengths_and_authors():
    docs, _ = _gen(2000)
    by = defaultdict(list)
    for d in docs:
        by[d["channel"]].append(d)
    assert set(by) == CHANNELS
    for d in by["chat"]:
        assert 1 <= len(re.split(r"(?<=[.!?])\s+", d["text"].strip())) <= 3, d["text"]
    for d in by["transcript"]:
        n_words = len(d["text"].split())
        assert 2000 <= n_words <= 6500
        turns = d["text"].split("\n")[1:]
        assert all(re.match(r"^[^:\n]{2,40}: ", t) for t in turns)
    for d in by["meeting"]:
        assert d["text"].count(".") >= 10
    n10 = len({d["author"] for d in _gen(500)[0]})
    assert 7 <= n10 <= 14
    assert 15 <= len({d["author"] for d in docs}) <= 40


def test_threads_group_related_documents():
    docs, _ = _gen(2000)
    threads = defaultdict(set)
    for d in docs:
        threads[d["thread"]].add(d["channel"])
    assert any({"meeting", "transcript"} <= chans for chans in threads.values())
    assert any(len(chans) >= 2 and "incident" in chans for chans in threads.values())
    assert sum(1 for t, chans in threads.items() if t.startswith(("ENG-", "OPS-", "SUP-", "FIN-"))
               and chans == {"ticket"}) > 10


def test_roles_change_and_are_stated():
    docs, _ = _gen(2000)
    roles = defaultdict(set)
    pat = re.compile(r"([A-Z][a-z]+ [A-Z][a-z]+) \(([^()]{3,60})\)")
    for d in docs:
        if d["channel"] == "meeting":
            for name, role in pat.findall(d["text"].split("\n", 1)[0]):
                roles[name].add(role)
    assert sum(1 for r in roles.values() if len(r) >= 2) >= 2
    assert any(("promot" in d["text"] or "moves" in d["text"]) for d in docs if d["channel"] in ("email", "chat"))


def test_revisions_state_what_they_replace():
    docs, questions = _gen(2000)
    by_id = {d["id"]: d for d in docs}
    sup = [q for q in questions if q["category"] == "supersession"]
    assert sup
    replaces = 0
    for q in sup:
        new = by_id[q["evidence"][0]]
        if len(q["evidence"]) > 1:
            old = by_id[q["evidence"][1]]
            assert old["date"] < new["date"]
            assert old["author"] != new["author"]
        if re.search(r"replace|supersede|no longer applies|correction|corrected", new["text"], re.I):
            replaces += 1
    assert replaces >= 0.8 * len(sup)


def test_as_of_questions_and_null_as_of():
    _, questions = _gen(2000)
    by_cat = defaultdict(list)
    for q in questions:
        by_cat[q["category"]].append(q)
    assert all(q["as_of"] is not None for q in by_cat["bi_temporal"] + by_cat["audit_replay"])
    assert all(q["as_of"] is None for q in by_cat["supersession"])
    assert all(2 <= len(q["evidence"]) <= 4 for q in by_cat["justification_chain"])
    assert all(len(q["evidence"]) >= 2 for q in by_cat["contradiction"])


def test_rejects_too_small():
    with pytest.raises(ValueError):
        generate(10, 0, 1)


# ------------------------------------------------------------------------------------------ CLI and evaluation
def test_cli(tmp_path, capsys):
    rc = orgbench.main(["--docs", "300", "--seed", "2", "--orgs", "2", "--out", str(tmp_path)])
    assert rc == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("orgbench: 300 docs") and "\n" not in line
    assert sum(1 for _ in open(tmp_path / "docs.jsonl")) == 300
    assert sum(1 for _ in open(tmp_path / "questions.jsonl")) > 0


def test_evaluate_smoke(tmp_path):
    from mempp.bench.evaluate import EvalConfig, evaluate

    write(tmp_path, 500, seed=0, n_orgs=1)
    report = evaluate(tmp_path / "docs.jsonl", tmp_path / "questions.jsonl",
                      EvalConfig(ks=(10,), embedder="hash", legs=("lexical",)), progress=False)
    assert set(report["by_category"]) == set(CATEGORIES)
    assert report["questions"] > 0
    assert 0.0 <= report["overall"]["recall@10"] <= 1.0


# ------------------------------------------------------------------------------------------ data files
# sha256 of docs.jsonl and questions.jsonl as `write` made them before the generator's tables moved
# to data files (bench/orgbench/data/*.json): the move, and any later refactoring, must keep them.
GOLDEN = {
    (2000, 0, 1): ("b110dc796a661a64571c25d9f06f43619c4ab11506fec767e8e89bfb76715375",
                   "4250dc517c59115418ad0bb4e0d0ca18e36363c96c852694453adddb49c16567"),
    (2000, 1, 1): ("bcf8aca1f7711f0e25b7fc26e763a58b36c79adce1108f82d0d29cc58448da83",
                   "317f60749d4864f71424936a4c1ec0e2eca40952f5b2cdacbb7ad26d62fd120b"),
    (2000, 0, 2): ("935058904443c35b60438c1edd1022832a61d0e9ea6f2488326449d54e464bd8",
                   "63bbe4b1c044da29e38bdf11bcc9591e18638a95fad123dadd8d7936719169ea"),
    (2000, 1, 2): ("748516b82caec26d8b9d2bfbb144a678578f70d54aeb8dcfd0aec05f21f9e019",
                   "9dfa99b4603da6ff5980fdbfea3a805a7847e0bc3286439f1809628c1b36d200"),
}


@pytest.mark.parametrize("n_docs,seed,n_orgs", sorted(GOLDEN))
def test_output_bytes_are_the_recorded_ones(tmp_path, n_docs, seed, n_orgs):
    write(tmp_path, n_docs, seed=seed, n_orgs=n_orgs)
    got = tuple(hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in ("docs.jsonl", "questions.jsonl"))
    assert got == GOLDEN[(n_docs, seed, n_orgs)]


def _raw(name: str) -> dict:
    from importlib import resources

    return json.loads(resources.files("mempp.bench.orgbench").joinpath("data", name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name,spoil,where",
    [
        ("kinds.json", lambda d: d["kinds"][2].__setitem__("values", "7 days"), "kinds[2].values: expected a list"),
        ("kinds.json", lambda d: d["kinds"][4].__setitem__("ordred", False), "kinds[4]: unknown ordred"),
        ("kinds.json", lambda d: d["kinds"][0].pop("fam"), "kinds[0]: missing fam"),
        ("kinds.json", lambda d: d["kinds"][1]["subj"].__setitem__(1, 3), "kinds[1].subj[1]: expected a string"),
        ("vocabulary.json", lambda d: d["industries"][3].pop(), "industries[3]: expected a list of 3 items"),
        ("organization.json", lambda d: d["teams"][0].__setitem__(2, "3"), "teams[0][2]: expected an integer"),
        ("sentences.json", lambda d: d["banks"]["sre"].__setitem__(2, "[unclosed|choice"), "banks['sre'][2]: unbalanced ["),
        ("decisions.json", lambda d: d.pop("stale"), "missing stale"),
        ("questions.json", lambda d: d.__setitem__("q_new", []), "unknown q_new"),
    ],
)
def test_a_bad_data_file_is_refused_naming_the_file_and_the_entry(name, spoil, where):
    from mempp.bench.orgbench.tables import TableError, check

    raw = _raw(name)
    check(name, raw)  # the shipped file passes
    spoil(raw)
    with pytest.raises(TableError) as err:
        check(name, raw)
    assert str(err.value).startswith(f"{name}: ") and where in str(err.value), str(err.value)


def test_every_data_file_is_package_data_and_checked():
    """pyproject ships bench/orgbench/data/*.json with the package, and each file has a schema."""
    import tomllib
    from importlib import resources
    from pathlib import Path

    from mempp.bench.orgbench.tables import SCHEMAS

    root = Path(__file__).resolve().parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mempp.bench.orgbench"]
    data = resources.files("mempp.bench.orgbench").joinpath("data")
    files = sorted(p.name for p in data.iterdir() if p.name.endswith(".json"))
    assert files == sorted(SCHEMAS)
    assert all(any(Path("data", f).match(g) for g in globs) for f in files)


# ------------------------------------------------------------------------------------------ role-and-alias slice
def test_people_slice_keeps_the_main_benchmark_and_its_questions_are_answerable():
    from mempp.bench.orgbench import generate_with_people
    from mempp.people import check_person, name_key

    plain_docs, plain_qs = generate(2000, seed=5, n_orgs=2)
    docs, questions, people = generate_with_people(2000, seed=5, n_orgs=2)
    assert [{k: v for k, v in d.items() if k != "author"} for d in docs] == [{k: v for k, v in d.items() if k != "author"} for d in plain_docs]
    assert [q for q in questions if q["category"] in CATEGORIES] == plain_qs
    by_id = {d["id"]: d for d in docs}
    plain_author = {d["id"]: d["author"] for d in plain_docs}
    directory = {(p["scope"], name_key(p["name"])): p for p in people}
    for p in people:
        assert check_person({k: v for k, v in p.items() if k != "scope"})["name"] == p["name"]  # Store.add_people takes it
    # every author label is the name or an alias of its person, by channel
    for d in docs:
        entry = directory[(d["scope"], name_key(plain_author[d["id"]]))]
        assert d["author"] == entry["name"] or d["author"] in entry["aliases"]
        assert (d["author"] == entry["name"]) == (d["channel"] not in ("email", "chat", "ticket"))
    sliced = [q for q in questions if q["category"] in ("alias", "role", "role_change")]
    assert {q["category"] for q in sliced} == {"alias", "role", "role_change"}
    for q in sliced:
        ev = [by_id[e] for e in q["evidence"]]
        thread = {d["thread"] for d in ev}
        assert len(thread) == 1 and len({plain_author[d["id"]] for d in ev}) == 1
        assert len({plain_author[d["id"]] for d in docs if d["thread"] in thread}) >= 2  # the thread alone does not pick the person
        assert all(a not in q["text"] for a in {d["author"] for d in ev})  # never asked as the documents write the author
        if q["category"] != "alias":
            person = directory[(q["scope"], name_key(plain_author[ev[0]["id"]]))]
            assert any(r["role"] in q["answer"] for r in person["roles"])


def test_people_slice_cli(tmp_path):
    assert orgbench.main(["--docs", "400", "--seed", "5", "--out", str(tmp_path), "--people"]) == 0
    assert (tmp_path / "people.jsonl").is_file() and (tmp_path / "questions.jsonl").is_file()


def test_varied_threads_change_only_the_threads_and_make_long_and_forked_ones():
    from mempp.bench.orgbench import generate_with_people

    plain_docs, plain_qs = generate(4000, seed=1, n_orgs=2)
    docs, questions, _ = generate_with_people(4000, seed=1, n_orgs=2, people=False, threads="varied")
    assert questions == plain_qs
    assert [{k: v for k, v in d.items() if k != "thread"} for d in docs] == [{k: v for k, v in d.items() if k != "thread"} for d in plain_docs]
    changed = [(a, b) for a, b in zip(plain_docs, docs) if a["thread"] != b["thread"]]
    assert {b["channel"] for _, b in changed} == {"chat", "email"}
    sizes = Counter((d["scope"], d["thread"]) for d in docs if d["channel"] == "chat")
    assert max(sizes.values()) > 8 >= max(Counter((d["scope"], d["thread"]) for d in plain_docs if d["channel"] == "chat").values())
    forks = {b["thread"] for _, b in changed if b["channel"] == "email"}
    assert forks and all(t.endswith("-fork") for t in forks)
    for t in forks:  # a fork holds the later messages of one plain thread, the earlier ones stay
        before = {a["thread"] for a, b in zip(plain_docs, docs) if b["thread"] == t}
        assert len(before) == 1
        assert any(b["thread"] == next(iter(before)) for b in docs)
    with pytest.raises(ValueError, match="threads"):
        generate_with_people(400, threads="long")
