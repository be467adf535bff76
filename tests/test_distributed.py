"""mempp.distributed on a real local Ray cluster: what it computes equals one process's.

One Ray cluster per test process (``ray.init(num_cpus=2)``); the tests are few and small, and
slow (Ray starts its processes, actors load the store or the model). The oracles: ``Store.add``'s
own embeddings and ``Store.query_batch``'s rows.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mempp
from mempp.tables import records_table

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'mempp[ray]' (the test extra pulls it in)")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def cluster():
    """A local Ray cluster of 2 CPUs for the whole test process (GPUs, if any, as Ray finds them)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=256 << 20)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


WORDS = "budget review sla uptime outage plan vendor contract hiring travel policy launch roadmap incident security audit".split()
AUTHORS = ["Ann Lee", "Ben Ortiz", "Carla Diaz", "Dev Rao"]


def corpus(n: int, seed: int = 0, long_every: int = 0) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = rng.randint(300, 420) if long_every and i % long_every == 0 else rng.randint(3, 25)
        d = {
            "id": f"d{i}", "text": " ".join(rng.choice(WORDS) for _ in range(words)), "author": rng.choice(AUTHORS),
            "date": f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", "thread": f"T{rng.randint(0, n // 6)}",
            "channel": rng.choice(["email", "chat"]), "priority": rng.choice([1, "high", None]),
        }
        if i > 5 and rng.random() < 0.06 or i == n - 1:
            j = rng.randint(0, i - 1)
            if i == n - 1:
                d["date"] = "2023-12-31"  # after every other: at least one supersession
            if docs[j]["date"] < d["date"]:  # else it would need backdate
                d["supersedes"] = f"d{j}"
        docs.append(d)
    return docs


def write_jsonl(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def matrix(column) -> np.ndarray:
    col = column.combine_chunks()
    return np.asarray(col.flatten()).reshape(len(col), -1)


@pytest.mark.model
def test_embed_equals_store_add_and_adds_back(cluster, tmp_path):
    # The store's template and windows: the same vectors as Store.add's own (max abs difference
    # <= 1e-5), and the table added back gives the same documents, vectors and window vectors.
    docs = corpus(36, seed=1, long_every=9)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    index = mempp.IndexConfig(embed_template="{author}: {text}", window_stride=96)
    with mempp.Store.open(tmp_path / "a", index=index) as a:
        a.add(docs)
        from mempp import distributed

        table = distributed.embed(src, store=a, num_workers=2, batch_size=8)
        assert table.num_rows == len(docs) and table.column("id").to_pylist() == [d["id"] for d in docs]
        own = a.searcher().snapshot.segments[0]
        assert np.abs(matrix(table.column("embedding")) - own.segment.embeddings).max() <= 1e-5
        wins = table.column("embedding_windows").to_pylist()
        assert sum(map(len, wins)) == len(own.window_rows) > 0
        assert np.abs(np.array([v for w in wins for v in w]) - own.window_embeddings).max() <= 1e-5

        pq.write_table(table, tmp_path / "docs.parquet")
        again = distributed.embed(tmp_path / "docs.parquet", store=a, num_workers=1)  # Parquet, read by the workers
        assert np.abs(matrix(again.column("embedding")) - own.segment.embeddings).max() <= 1e-5

        with mempp.Store.open(tmp_path / "b", index=index) as b:
            assert b.add(table, embeddings="embedding") == list(range(len(docs)))
            ra, rb = a.searcher().snapshot.rows(range(len(a))), b.searcher().snapshot.rows(range(len(b)))
            for x, y in zip(ra, rb):
                assert np.abs(x.pop("embedding") - y.pop("embedding")).max() <= 1e-5
                x.pop("ingested_at"), y.pop("ingested_at")
                assert x == y
            wa, wb = a.searcher().snapshot.segments[0], b.searcher().snapshot.segments[0]
            assert np.array_equal(wa.window_rows, wb.window_rows)
            assert np.abs(wa.window_embeddings - wb.window_embeddings).max() <= 1e-5
            assert a.stats()["superseded"] == b.stats()["superseded"] > 0


@pytest.mark.model
def test_embed_uses_the_stores_model(cluster, tmp_path):
    # A store built with the other shipped model (bge-small): the workers load that one, from the
    # store's model record, and embed as Store.add does.
    docs = corpus(10, seed=8)
    with mempp.Store.open(tmp_path / "bge", embedder="bge-small") as s:
        s.add(docs)
        from mempp import distributed

        table = distributed.embed(records_table(enumerate(docs, 1)), store=s, num_workers=1)
        assert matrix(table.column("embedding")).shape == s.searcher().snapshot.segments[0].segment.embeddings.shape
        assert np.abs(matrix(table.column("embedding")) - s.searcher().snapshot.segments[0].segment.embeddings).max() <= 1e-5


@pytest.mark.model
def test_embed_on_cuda_equals_cpu(cluster, tmp_path):
    import onnxruntime

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        pytest.skip("onnxruntime-gpu is not installed here: the CUDA path (num_gpus=1) is not exercised")
    if not ray.cluster_resources().get("GPU"):
        pytest.skip("the Ray cluster has no GPU: the CUDA path (num_gpus=1) is not exercised")
    from mempp import distributed

    docs = corpus(24, seed=2)
    cpu = distributed.embed(pa.Table.from_pylist([{k: d[k] for k in ("id", "text")} for d in docs]), num_workers=1)
    gpu = distributed.embed(pa.Table.from_pylist([{k: d[k] for k in ("id", "text")} for d in docs]), num_workers=1, num_gpus=1)
    assert np.abs(matrix(cpu.column("embedding")) - matrix(gpu.column("embedding"))).max() <= 1e-4


@pytest.fixture(scope="module")
def threaded(tmp_path_factory):
    """A store of several units (merges off): threads, supersessions, undated and out-of-filter documents."""
    path = tmp_path_factory.mktemp("dist") / "s"
    docs = corpus(600, seed=3)
    for d in docs[::17]:
        d.pop("date")
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(32), merge="manual") as s:
        for a in range(0, len(docs), 120):
            s.add(docs[a : a + 120])
    return path


def questions(seed: int, n: int):
    """``n`` questions (a blank one and one of no known word among them) and an as_of per question."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS + ["Ann", "Ortiz", "nothing"]) for _ in range(rng.randint(1, 4))) for _ in range(n)]
    texts[n // 2 : n // 2 + 2] = ["", "zzz qqq"]
    as_ofs = [None if i % 4 == 0 else f"2023-{rng.randint(1, 12):02d}-15" for i in range(n)]
    return texts, as_ofs


@pytest.mark.parametrize(
    "options",
    [
        {},  # defaults: thread context (max), the thread stage (siblings 8), the reserve (rule "relevant"), all three legs
        {
            "authors": ["Ann Lee", "Dev Rao"], "channels": "email", "date_from": "2023-02-01", "context_mode": "sum", "k": 15,
            "siblings": 3, "reserve_rule": "paper",
        },
        {"reserve": False, "context": (), "threads": ["T1", "T2", "T3", "T5", "T8"], "weights": (1, 1, 4), "siblings": 0},
    ],
    ids=["defaults", "filters-sum-siblings3-paper", "no-reserve-no-context-no-siblings"],
)
def test_score_equals_query_batch(cluster, threaded, options):
    from mempp import distributed

    texts, as_ofs = questions(4, 150)
    options = dict(options)
    k = options.pop("k", 10)
    with mempp.Store.open(threaded, read_only=True) as store:
        want = store.query_batch(texts, as_of=as_ofs, k=k, chunk=32, **options)
    assert want.num_rows > 0 and len(set(want.column("reserved").to_pylist())) == (2 if options.get("reserve", True) else 1)
    parallel = distributed.score(threaded, texts, as_of=as_ofs, k=k, num_workers=2, chunk=32, **options)
    assert parallel.equals(want)
    sharded = distributed.score(threaded, texts, as_of=as_ofs, k=k, shards=3, chunk=32, **options)
    assert sharded.equals(want)


@pytest.mark.model
def test_score_embeds_questions_as_query_batch_does(cluster, tmp_path):
    # With the real model, a question's vector depends (in the last bits) on the batch it is
    # embedded in: both modes embed query_batch's own chunks, so the rows are the same.
    from mempp import distributed

    docs = corpus(80, seed=5)
    texts, as_ofs = questions(6, 40)
    with mempp.Store.open(tmp_path / "s", merge="manual") as s:
        s.add(docs[:40])
        s.add(docs[40:])
        want = s.query_batch(texts, as_of=as_ofs, chunk=8)
    assert distributed.score(tmp_path / "s", texts, as_of=as_ofs, num_workers=2, chunk=8).equals(want)
    assert distributed.score(tmp_path / "s", texts, as_of=as_ofs, shards=2, chunk=8).equals(want)


def test_score_refuses_bad_input_before_any_work(cluster, threaded):
    from mempp import distributed

    with pytest.raises(mempp.ValidationError, match="as_of"):
        distributed.score(threaded, ["a", "b"], as_of=["2023-01-01"], shards=2)
    with pytest.raises(mempp.ValidationError, match="question_dates"):
        distributed.score(threaded, ["a"], question_dates=True)
    with pytest.raises(mempp.ValidationError, match="shards"):
        distributed.score(threaded, ["a"], shards=0)


def test_cli_embed_add_and_query(cluster, tmp_path, threaded):
    # mempp embed -> Parquet -> mempp add --embeddings-column; mempp query --batch --ray [--shards]
    def mempp_cli(*args):
        proc = subprocess.run([sys.executable, "-m", "mempp", *args], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc

    docs = corpus(40, seed=7)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    mempp_cli("add", str(tmp_path / "a"), str(src), "--embedder", "hash", "--quiet")
    out = tmp_path / "docs.parquet"
    assert "40 documents embedded" in mempp_cli("embed", str(src), "--out", str(out), "--store", str(tmp_path / "a"), "--ray", cluster,
                                                "--workers", "1", "--quiet").stdout
    mempp_cli("add", str(tmp_path / "b"), str(out), "--embeddings-column", "embedding", "--embedder", "hash", "--quiet")
    with mempp.Store.open(tmp_path / "a", read_only=True) as a, mempp.Store.open(tmp_path / "b", read_only=True) as b:
        assert [r["key"] for r in a.searcher().snapshot.rows(range(len(a)))] == [r["key"] for r in b.searcher().snapshot.rows(range(len(b)))]
        assert a.stats()["superseded"] == b.stats()["superseded"]

    qs = tmp_path / "q.jsonl"
    texts, as_ofs = questions(8, 30)
    write_jsonl(qs, [{"id": f"q{i}", "text": t, "as_of": a} for i, (t, a) in enumerate(zip(texts, as_ofs))])
    mempp_cli("query", str(threaded), "--batch", str(qs), "--out", str(tmp_path / "one.arrow"))
    mempp_cli("query", str(threaded), "--batch", str(qs), "--out", str(tmp_path / "sharded.arrow"), "--ray", cluster, "--shards", "2")
    one = pa.ipc.open_file(str(tmp_path / "one.arrow")).read_all()
    assert pa.ipc.open_file(str(tmp_path / "sharded.arrow")).read_all().equals(one)


def test_score_reads_as_a_principal_in_both_modes(cluster, tmp_path):
    """A store with restricted documents: Ray scoring refuses a read without a principal in both
    modes and, as mempp.ADMIN (or a principal who may read everything), returns query_batch's rows."""
    from mempp import distributed

    docs = corpus(120, seed=7)
    for d in docs[::5]:
        d["readers"] = ["group:ops"]
    texts, as_ofs = questions(4, 20)
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(32), merge="manual") as s:
        s.add(docs[:60])
        s.add(docs[60:])
        s.add_members("group:ops", ["user:ann"])
        want = s.query_batch(texts, as_of=as_ofs, chunk=8, principal=mempp.ADMIN)
    for mode in ({"num_workers": 2}, {"shards": 2}):
        with pytest.raises(mempp.AccessDenied):
            distributed.score(tmp_path / "s", texts, as_of=as_ofs, chunk=8, **mode)
        assert distributed.score(tmp_path / "s", texts, as_of=as_ofs, chunk=8, principal=mempp.ADMIN, **mode).equals(want)
        assert distributed.score(tmp_path / "s", texts, as_of=as_ofs, chunk=8, principal="user:ann", **mode).equals(want)
    # a reader of part of the store: query-parallel answers as query_batch does; sharded refuses
    with mempp.Store.open(tmp_path / "s", read_only=True) as s:
        mine = s.query_batch(texts, as_of=as_ofs, chunk=8, principal="user:zed")
    assert distributed.score(tmp_path / "s", texts, as_of=as_ofs, chunk=8, principal="user:zed", num_workers=2).equals(mine)
    with pytest.raises(mempp.ValidationError, match="segment-sharded"):
        distributed.score(tmp_path / "s", texts, as_of=as_ofs, chunk=8, principal="user:zed", shards=2)
