"""Segment-sharded bulk scoring (mempp.shards, mempp.gather) against one process's query_batch.

The shards run in this process here (the same classes the Ray actors hold: ``test_distributed``
runs them on a Ray cluster); the oracle is ``Store.query_batch`` on the whole store, row for row.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import mempp
from mempp.gather import Driver, chunk_options, plan_shards
from mempp.shards import Shard

WORDS = "budget review sla uptime outage plan vendor contract hiring travel policy launch roadmap incident security audit".split()
AUTHORS = ["Ann Lee", "Ben Ortiz", "Carla Diaz", "Dev Rao", "Eve Kim"]


def build(path, *, seed=0, threads=True, windows=False, copy="int8", commits=5, per=80):
    """A store of several units (merges off) with threads, supersessions, undated documents and ties."""
    rng = random.Random(seed)
    idx = mempp.IndexConfig(window_stride=40 if windows else None, vector_copy=copy)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(32), merge="manual", index=idx) as s:
        n = 0
        dates: list[str | None] = []
        for _ in range(commits):
            docs = []
            for _ in range(per):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 260 if windows else 25)))
                d = {
                    "id": f"d{n}", "text": text, "author": rng.choice(AUTHORS),
                    "date": f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}" if rng.random() < 0.95 else None,
                    "thread": f"T{rng.randint(0, 40)}" if threads and rng.random() < 0.8 else None,
                    "channel": rng.choice(["email", "chat"]),
                }
                if n > 10 and rng.random() < 0.05:
                    j = rng.randint(0, n - 1)
                    if d["date"] is not None and (dates[j] is None or dates[j] < d["date"]):  # else it would need backdate
                        d["supersedes"] = f"d{j}"
                dates.append(d["date"])
                docs.append(d)
                n += 1
            s.add(docs)
    return path


def questions(seed, n=30):
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS + ["Ann", "Ortiz", "nothing"]) for _ in range(rng.randint(1, 4))) for _ in range(n)]
    texts += ["", "nothing", "Carla Diaz budget"]
    as_ofs = [None if i % 3 == 0 else f"2023-{rng.randint(1, 12):02d}-15" for i in range(len(texts))]
    return texts, as_ofs


def sharded(store, texts, as_ofs, n_shards, k=10, first_top=None, **options):
    searcher = store.searcher()
    specs = plan_shards(searcher, n_shards)
    shards = [Shard(spec) for spec in specs]

    def call(method, args):
        return [getattr(shard, method)(*a) for shard, a in zip(shards, args)]

    driver = Driver(searcher, specs, first_top=first_top)
    opts = chunk_options(searcher, as_ofs, k, len(texts), options, sharded=True)
    vecs, blank = searcher.embed_questions(texts) if opts[0].weights[2] else (None, [False] * len(texts))
    batches = [
        driver.score_chunk(call, a, texts[a : a + 16], opts[a : a + 16], None if vecs is None else vecs[a : a + 16], blank[a : a + 16])
        for a in range(0, len(texts), 16)
    ]
    return pa.Table.from_batches(batches), driver


OPTIONS = [
    {},
    {"context_mode": "sum"},
    {"context": ()},
    {"context_length": 8, "k": 15},
    {"authors": ["Ann Lee", "Dev Rao"], "reserve": False},
    {"threads": ["T1", "T2", "T3", "T4"], "channels": "email"},
    {"date_from": "2023-03-01", "date_to": "2023-09-30", "depth": 20, "k": 25},
    {"weights": (1, 1, 4), "context_mode": "sum", "context_length": 5},
    {"legs": ["lexical", "tag"]},
    {"legs": ["vector"]},
    {"siblings": 0, "reserve_rule": "paper"},  # the thread stage and reserve rule off: the paper's pipeline
    {"siblings": 0},
    {"siblings": 3, "reserve_rule": "paper"},
    {"siblings": 40, "context": ()},
    {"feedback": 0, "tag_rank": "lexical"},  # feedback and the fused tag order off: the vector leg scans once
    {"feedback": 10, "context": ()},
    {"feedback": 1, "legs": ["vector"], "k": 30},
    {"chain": 0},  # the chain stage off
    {"chain": 5, "siblings": 0},
]


def test_feedback_and_tag_rank_change_these_answers(threaded):
    """The equality tests above would not notice a driver that skipped feedback or the tag order
    unless both change some answers on this store."""
    texts, as_ofs = questions(1)
    with mempp.Store.open(threaded, read_only=True) as store:
        full = store.query_batch(texts, as_of=as_ofs)
        assert not full.equals(store.query_batch(texts, as_of=as_ofs, feedback=0))
        assert not full.equals(store.query_batch(texts, as_of=as_ofs, tag_rank="lexical"))


@pytest.fixture(scope="module")
def threaded(tmp_path_factory):
    return build(tmp_path_factory.mktemp("sh") / "s")


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_sharded_rows_equal_query_batch(threaded, options):
    texts, as_ofs = questions(1)
    options = dict(options)
    k = options.pop("k", 10)
    with mempp.Store.open(threaded, read_only=True) as store:
        want = store.query_batch(texts, as_of=as_ofs, k=k, **options)
        for n_shards in (2, 3):
            got, _ = sharded(store, texts, as_ofs, n_shards, k=k, **options)
            assert got.equals(want), (n_shards, options)


def test_sharded_equal_with_a_people_directory(tmp_path):
    """Roles and aliases in questions and in authors= resolve in the shards' driver as in query_batch."""
    path = build(tmp_path / "s", seed=6, commits=2, per=60)
    with mempp.Store.open(path) as store:
        store.add_people([{"name": "Ben Ortiz", "aliases": ["bo"], "roles": [{"role": "CTO", "to": "2023-06-30"}]},
                          {"name": "Eve Kim", "roles": [{"role": "CTO", "from": "2023-07-01"}]}])
    texts, as_ofs = questions(7, n=12)
    texts += ["what did the cto say about the budget", "bo budget"] * 2
    as_ofs += ["2023-03-15", "2023-03-15", "2023-11-15", None]
    with mempp.Store.open(path, read_only=True) as store:
        for options in ({}, {"authors": "CTO"}, {"authors": ["bo"], "reserve": False}):
            want = store.query_batch(texts, as_of=as_ofs, **options)
            assert want.num_rows and (not options or set(want.column("key").to_pylist()) < {r.key for r in store.documents()})
            got, _ = sharded(store, texts, as_ofs, 3, **options)
            assert got.equals(want), options
        assert store.query_batch(["budget"], as_of="2023-11-15", authors="CTO").num_rows  # Eve Kim's, through the role


@pytest.mark.parametrize("kind", ["windows", "float32 copy, no threads", "windows and threads, float32"])
def test_sharded_equal_on_other_stores(tmp_path, kind):
    path = {
        "windows": lambda: build(tmp_path / "s", seed=2, threads=False, windows=True, commits=3, per=40),
        "float32 copy, no threads": lambda: build(tmp_path / "s", seed=3, threads=False, copy=None),
        "windows and threads, float32": lambda: build(tmp_path / "s", seed=4, windows=True, copy=None, commits=3, per=40),
    }[kind]()
    texts, as_ofs = questions(5, n=20)
    with mempp.Store.open(path, read_only=True) as store:
        for options in ({}, {"context_mode": "sum"}):
            got, _ = sharded(store, texts, as_ofs, 3, **options)
            assert got.equals(store.query_batch(texts, as_of=as_ofs, **options)), (kind, options)


def test_sharded_earlier_version_and_one_or_many_shards(threaded):
    texts, as_ofs = questions(7, n=15)
    with mempp.Store.open(threaded, read_only=True, version=3) as store:
        want = store.query_batch(texts, as_of=as_ofs)
        for n in (1, 2, 99):  # 99: one shard per unit
            got, _ = sharded(store, texts, as_ofs, n)
            assert got.equals(want)


def test_sum_mode_needs_more_rounds_and_still_equals(threaded):
    # In sum mode a neighbour can lift a document far above its own score: the first top M rarely
    # certifies, M doubles (round trips after the first) until it does.
    texts, as_ofs = questions(9, n=20)
    with mempp.Store.open(threaded, read_only=True) as store:
        got, driver = sharded(store, texts, as_ofs, 3, context_mode="sum")
        assert sum(driver.rounds) > 0
        assert got.equals(store.query_batch(texts, as_of=as_ofs, context_mode="sum"))
        got, driver = sharded(store, texts, as_ofs, 3)
        assert sum(driver.rounds) == 0  # max mode: the top M certifies at once (the depth-th beats the bound)


@pytest.mark.parametrize("options", [{}, {"context_mode": "sum"}, {"context_length": 6}, {"authors": "Ben Ortiz", "depth": 10}])
def test_certificate_from_a_top_of_one(threaded, options):
    # The shards first send only their best raw score per leg: the driver must ask for more
    # (M doubles) until the bound certifies the top depth; the rows stay those of one process.
    texts, as_ofs = questions(11, n=12)
    with mempp.Store.open(threaded, read_only=True) as store:
        got, driver = sharded(store, texts, as_ofs, 3, first_top=1, **options)
        assert got.equals(store.query_batch(texts, as_of=as_ofs, **options))
        assert sum(driver.rounds) >= len(driver.rounds)


def test_moment_sums_of_shards_add_up_to_the_whole():
    # The mean and deviation of a z-scored leg come from integer sums (kernels.context, fixed
    # point): a shard's partial sums, added by the driver, give the floats of one process exactly,
    # however the documents are split.
    from mempp.kernels import candidate_moments, fixed_sums, fixed_sums_masked, merge_sums, moments_from_sums, sparse_moments

    rng = np.random.default_rng(0)
    for trial in range(20):
        n = int(rng.integers(1, 3000))
        scores = (rng.random(n) * (30 if trial % 2 else 1)).astype(np.float32)
        mask = (rng.random(n) < 0.6).astype(np.uint8)
        want = candidate_moments(scores, mask)
        cuts = np.sort(rng.integers(0, n + 1, size=int(rng.integers(0, 6))))
        bounds = [0, *cuts.tolist(), n]
        parts = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            sums = np.zeros(4, dtype=np.int64)
            fixed_sums_masked(scores[lo:hi], mask[lo:hi], sums)
            parts.append(sums)
        assert moments_from_sums(merge_sums(parts), int(mask.sum())) == want  # bit for bit
        touched = np.flatnonzero(mask).astype(np.int64)
        rng.shuffle(touched)
        halves = np.array_split(touched, 3)
        sparse = []
        for h in halves:
            sums = np.zeros(4, dtype=np.int64)
            fixed_sums(scores, h, len(h), sums)
            sparse.append(sums)
        n_cand = n + 7
        assert moments_from_sums(merge_sums(sparse), n_cand) == sparse_moments(scores, touched, len(touched), n_cand)
        if mask.any():
            v = scores[mask.astype(bool)].astype(np.float64)
            assert want[0] == pytest.approx(v.mean(), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("use_max", [True, False])
@pytest.mark.parametrize("scaled", [True, False])
def test_context_bound_bounds_every_document_below_it(use_max, scaled):
    # Brute force: random raw scores, threads and scales; every document whose own z and whose
    # neighbours' z are at most z_T scores at most context_bound(z_T).
    from mempp.kernels import context_bound, context_topk

    rng = np.random.default_rng(1 + use_max + 2 * scaled)
    n = 400
    for _ in range(20):
        scores = rng.normal(size=n).astype(np.float32)
        threads = rng.integers(0, 30, size=n)
        prev = np.full(n, -1, dtype=np.int64)
        nxt = np.full(n, -1, dtype=np.int64)
        last: dict = {}
        for d, t in enumerate(threads):
            if t in last:
                prev[d], nxt[last[t]] = last[t], d
            last[t] = d
        mask = (rng.random(n) < 0.8).astype(np.uint8)
        betas = rng.random(rng.integers(0, 4)) * 1.5
        scale = rng.random(n).astype(np.float32) if scaled else np.zeros(0, dtype=np.float32)
        mu, sd = float(scores[mask == 1].mean()), float(scores[mask == 1].std())
        z = (scores.astype(np.float64) - mu) * (1.0 / sd)  # the kernel's z-scores
        cut = float(np.quantile(z, 0.7))
        ids = np.flatnonzero(mask).astype(np.int64)
        out = np.empty(len(ids))
        context_topk(scores, mu, sd, ids, len(ids), prev, nxt, betas, scale, mask, 0, np.empty(0, np.int64), np.empty(0), out, use_max)
        bound = context_bound(cut, betas, scaled, use_max)
        below = 0
        for j, d in enumerate(ids):
            near = [d]
            for links in (prev, nxt):
                p = d
                for _ in range(len(betas)):
                    p = links[p] if p >= 0 else -1
                    if p >= 0 and mask[p]:
                        near.append(p)
            if all(z[x] <= cut for x in near):
                below += 1
                assert out[j] <= bound, (d, out[j], bound)
        assert below > 0


def test_a_store_with_an_ann_index_is_sharded_only_with_the_exact_scan(tmp_path):
    # query_batch may answer a vector leg from the (approximate) index; shards scan exactly, so
    # the driver refuses unless vector_index="exact", where both scan and the rows are equal.
    path = build(tmp_path / "s", seed=6, commits=2, per=70)
    with mempp.Store.open(path, merge="manual") as s:
        assert s.build_ann(min_docs=10) is not None
    texts, as_ofs = questions(13, n=10)
    with mempp.Store.open(path, read_only=True) as store:
        assert store.searcher().snapshot.ann and store.searcher().snapshot.ann[0].wait(60)
        with pytest.raises(mempp.ValidationError, match="vector_index"):
            sharded(store, texts, as_ofs, 2)
        got, _ = sharded(store, texts, as_ofs, 2, vector_index="exact")
        assert got.equals(store.query_batch(texts, as_of=as_ofs, vector_index="exact"))
