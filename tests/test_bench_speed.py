"""``mempp bench`` end to end on a small store: its checks are oracles (workload masks, numpy BM25, float32 scan)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from mempp.bench import workload as W
from mempp.cli import main

from conftest import SHARED

PEERS = SHARED / "bench" / "peers" if SHARED is not None else None


@pytest.mark.skipif(PEERS is None or not (PEERS / "workload.py").exists(), reason="shared/bench/peers/workload.py not found (CI has it)")
def test_workload_is_the_peers_workload():
    sys.path.insert(0, str(PEERS))
    try:
        import workload as peers
    finally:
        sys.path.remove(str(PEERS))
    ours = W.generate(3000)
    theirs = peers.generate(3000)
    for name in ("offs", "toks", "dates", "active", "emb", "qtok", "qemb", "as_of"):
        assert np.array_equal(getattr(ours, name), theirs[name]), name


def test_clustered_variant_shares_everything_but_the_vectors():
    a, b = W.generate(2000), W.generate(2000, clustered=True)
    for name in ("offs", "toks", "dates", "active", "qtok", "as_of"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert np.allclose(np.linalg.norm(b.emb, axis=1), 1, atol=1e-5)
    # queries sit near document clusters: their best match is far closer than on isotropic vectors
    assert np.median((b.emb @ b.qemb[:50].T).max(0)) > 0.5 > np.median((a.emb @ a.qemb[:50].T).max(0))


@pytest.mark.slow
def test_bench_checks_pass_on_a_small_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PERF_DATA", str(tmp_path / "data"))
    out = tmp_path / "report.json"
    assert main(["bench", "--n", "3000", "--queries", "40", "--check", "40", "--dir", str(tmp_path / "stores"), "--json", str(out)]) == 0
    run = json.loads(out.read_text())["runs"][0]
    s = run["session"]
    assert s["masks_equal_workload"] == 40
    assert s["lexical_top10_equal_numpy_oracle"] == 40
    assert s["lexical_k10_equal_numpy_oracle"] == 40
    assert s["vector_recall10_vs_float32"] == 1.0
    assert run["build"]["store_mb"] > 0 and s["open_s"] > 0
    assert run["build"]["fresh_memory_gbs"] > 0
    assert s["lexical_alone"]["p50_ms"] > 0
    assert len(s["batch"]["qps_runs"]) == 3 and s["batch"]["qps"] == float(np.median(s["batch"]["qps_runs"]))  # the middle run
    assert len(s["membw_session_gbs"]) == 2 and min(s["membw_session_gbs"]) > 0  # measured beside the int8 scans
    assert set(s["membw_session_by_method"]) == {"numpy_sum", "int64_loop"}
    assert s["membw_session_gbs"][0] == max(v[0] for v in s["membw_session_by_method"].values())  # the higher of the two
    # 40 queries: the masked scan in 2 rounds of 20, the every-row scan in 4 rounds of 10, each beside its probes
    assert len(s["int8_masked_scan"]["share_rounds"]) == 2 and len(s["int8_scan_all_rows"]["share_rounds"]) == 4
    # the median of the rounds (each figure rounded to 3 places apart: they may differ in the last one)
    assert abs(s["int8_masked_scan"]["share_side_by_side"] - float(np.median(s["int8_masked_scan"]["share_rounds"]))) <= 0.001
    printed = capsys.readouterr().out
    assert "| 3,000 | hybrid |" in printed and "| 3,000 | lexical_alone |" in printed
    assert f"memory not used before filled at {run['build']['fresh_memory_gbs']} GB/s" in printed
    from mempp.kernels.int8dot import batch_kernel_path, kernel_path

    # which kernel each figure used: the int8 scan's (VNNI, AVX2 or the portable loop) and query_batch's
    assert s["kernels"]["int8 scan"] == kernel_path() and s["kernels"]["query_batch"] == batch_kernel_path()
    assert f"int8 scan: {kernel_path()}; query_batch: {batch_kernel_path()}" in printed


def test_a_large_workload_is_written_chunk_by_chunk_with_the_same_arrays(tmp_path, monkeypatch):
    """From ``STREAM_FROM`` documents the cache is written one chunk at a time (10M documents would
    not fit in memory at once): the arrays equal ``generate``'s, and the word ids come back mapped."""
    monkeypatch.setenv("PERF_DATA", str(tmp_path))
    monkeypatch.setattr(W, "STREAM_FROM", 200_000)
    streamed = W.load(200_000)
    whole = W.generate(200_000)
    for k in ("offs", "toks", "dates", "active", "emb", "qtok", "qemb", "as_of"):
        assert np.array_equal(np.asarray(getattr(streamed, k)), getattr(whole, k)), k
    assert isinstance(streamed.toks, np.memmap) and isinstance(streamed.emb, np.memmap)
    assert not list(tmp_path.rglob(".*.tmp.npy"))


@pytest.mark.slow
def test_scaling_runner_measures_each_size_in_a_fresh_process(tmp_path, monkeypatch):
    """The scaling table's runner on two small sizes: each row has its ingest, open, memory, the
    default query beside its bandwidth limit (two scans with feedback: twice the bytes of one),
    query_batch, and with HNSW the share of the exact hits it returns; a second run reuses the stores."""
    from mempp.bench import scaling

    monkeypatch.setenv("PERF_DATA", str(tmp_path / "data"))
    out = tmp_path / "rows.jsonl"
    args = ["--dir", str(tmp_path / "stores"), "--sizes", "1000,3000", "--queries", "12", "--ann-up-to", "1000", "--json", str(out)]
    assert scaling.main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["n"] for r in rows] == [1000, 3000]
    for r in rows:
        assert r["build"]["ingest_docs_per_s"] > 0 and r["open_s"] > 0 and r["peak_rss_mb"] >= r["rss_mb_after_open"] > 0
        assert r["default"]["p50_ms"] > 0 and r["query_batch_qps"] > 0
        assert r["lexical leg, top 10"]["p50_ms"] > 0 and r["vector leg, top 10"]["p50_ms"] > 0
        assert r["default"]["limit_ms"] == pytest.approx(2 * r["feedback=0"]["limit_ms"], rel=0.01, abs=0.002)  # rounded to 3 places
    assert 0 <= rows[0]["default, HNSW"]["hits_of_exact"] <= 1 and "default, HNSW" not in rows[1]
    assert (tmp_path / "stores" / "n1000-ann").is_dir() and (tmp_path / "stores" / "n3000").is_dir()
    assert scaling.main(args[:-2]) == 0  # built: measured again without a rebuild
    md = scaling.table(rows)
    assert md.splitlines()[0] == "| | 1,000 | 3,000 |" and "| default query with HNSW, p50 (ms) | " in md and "| not built |" in md
