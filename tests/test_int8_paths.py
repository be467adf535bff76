"""Every int8 kernel path this CPU has (VNNI, AVX2, the portable loop) against a brute-force
oracle: the dot products in exact integers (numpy int64), then the kernels' own float32 formula,
the best ``k`` by (score, id). In this process each path the CPU offers is called directly; a child
process with ``MEMPP_VNNI=0 MEMPP_AVX2=0`` runs the portable fallback, as on a CPU with neither, and
must give this process's heaps bit for bit.

Shapes the vector kernels must get right: widths that are not a multiple of the 32-byte step
(the tail), empty and full masks, ties (equal rows), row bytes of -128, int16 queries at ±32767.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mempp.kernels import TopK
from mempp.kernels import int8dot as K
from mempp.kernels.int8scan import masked_dot_above_q8, masked_dot_topk_q8

PATHS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def oracle_scores(q8, scale, qw, qscale) -> np.ndarray:
    """Every row's approximate score as the kernels define it: ``scale * (qscale * float32(int32 dot))``."""
    ints = q8.astype(np.int64) @ qw.astype(np.int64)
    assert np.abs(ints).max(initial=0) < 2**31
    return scale * (np.float32(qscale) * ints.astype(np.int32).astype(np.float32))


def oracle_top(scores, mask, base, k) -> tuple[list, list]:
    """The best ``k`` candidates by (score, id), best first, as :meth:`TopK.result` orders them."""
    rows = [r for r in range(len(scores)) if mask[base + r]]
    best = sorted(rows, key=lambda r: (-float(scores[r]), -(base + r)))[:k]
    return [base + r for r in best], [float(scores[r]) for r in best]


def listed(mask, base, order, n) -> tuple[np.ndarray, int]:
    """``(rows, m)`` for the prefetching kernels: the candidate rows, checked against numpy."""
    rows = np.full(n + 1, -1, dtype=np.int64)
    m = K.candidate_rows(mask, base, order, 0, n, rows)
    assert rows[:m].tolist() == [r for r in range(n) if mask[base + order[r]]]
    return rows, m


def single_paths(q8):
    """The single-query top-k kernels this CPU runs for ``q8``: name -> call(prepared, mask, base, k, heap)."""
    from mempp.kernels import int8scan as S

    order = K.identity_order(len(q8))
    n = len(q8)
    paths = {
        "portable": lambda p, scale, mask, base, k, h: masked_dot_topk_q8(q8, scale, p.qw, p.qscale, mask, base, k, h.scores, h.ids, h.n, order, 0, n)
    }
    if S.HAS_AVX2:
        paths["avx2"] = lambda p, scale, mask, base, k, h: S.masked_dot_topk_avx2(
            q8, scale, p.qw, p.qscale, base, k, h.scores, h.ids, h.n, *listed(mask, base, order, n), order
        )
    if S.vnni_ok(q8):
        paths["vnni"] = lambda p, scale, mask, base, k, h: p.scan(q8, scale, K.segment_stats(q8, scale), mask, base, k, h.scores, h.ids, h.n)
    return paths


@st.composite
def int8_cases(draw):
    n = draw(st.integers(1, 400))
    d = draw(st.sampled_from([1, 7, 31, 32, 33, 64, 100, 128, 384, 391]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lo = draw(st.sampled_from([-128, -127]))  # -128 only from hand-made copies: quantize_rows stays within ±127
    q8 = rng.integers(lo, 128, (n, d)).astype(np.int8)
    if draw(st.booleans()):
        q8[rng.random(n) < 0.3] = q8[0]  # equal rows: ties broken by id
    scale = (rng.random(n).astype(np.float32) + 0.01) if draw(st.booleans()) else np.full(n, 0.5, np.float32)
    frac = draw(st.sampled_from([0.0, 0.05, 0.5, 1.0]))
    base = draw(st.integers(0, 3))
    mask = np.zeros(base + n, dtype=np.uint8)
    mask[base:] = rng.random(n) < frac
    query = rng.standard_normal(d).astype(np.float32)
    if draw(st.booleans()):
        query[int(rng.integers(0, d))] = 100.0  # one large coordinate: qw at its largest there
    k = draw(st.integers(1, 50))
    return q8, scale, mask, base, query, k


@PATHS
@given(int8_cases(), st.booleans())
def test_every_single_query_path_equals_the_oracle(case, precise):
    q8, scale, mask, base, query, k = case
    p = K.Int8Query(query, precise=precise)
    want = oracle_top(oracle_scores(q8, scale, p.qw, p.qscale), mask, base, k)
    for name, call in single_paths(q8).items():
        h = TopK(k)
        h.n = call(p, scale, mask, base, k, h)
        ids, scores = h.result()
        assert (ids.tolist(), scores.tolist()) == want, name
    h = TopK(k)  # and the kernel Int8Query picks itself
    h.n = p.scan(q8, scale, K.segment_stats(q8, scale), mask, base, k, h.scores, h.ids, h.n)
    ids, scores = h.result()
    assert (ids.tolist(), scores.tolist()) == want


@PATHS
@given(int8_cases(), st.integers(0, 2**32 - 1))
def test_rows_listed_once_serve_every_scan_of_their_mask(case, seed):
    """``reuse`` (a query's vector leg and its feedback scan): the candidate rows listed by the
    first scan of a mask serve the next ones, and a scan of another mask does not take them (the
    list is kept per mask). The copy is stored in a shuffled order (as in date order); every heap
    and dense score equals the oracle's."""
    q8, scale, mask, base, query, k = case
    n = len(q8)
    order = np.random.default_rng(seed).permutation(n).astype(np.int32)
    other = mask.copy()
    other[base:] = 1 - mask[base:]
    stats = K.segment_stats(q8, scale)
    reuse: dict = {}
    for m, q in ((other, query), (mask, query), (mask, -query), (other, -query)):
        p = K.Int8Query(q)
        scores = oracle_scores(q8, scale, p.qw, p.qscale)  # by stored row; stored row r is document base + order[r]
        cand = [r for r in range(n) if m[base + order[r]]]
        best = sorted(cand, key=lambda r: (-float(scores[r]), -(base + int(order[r]))))[:k]
        h = TopK(k)
        h.n = p.scan(q8, scale, stats, m, base, k, h.scores, h.ids, h.n, order, reuse=reuse)
        ids, got = h.result()
        assert (ids.tolist(), got.tolist()) == ([base + int(order[r]) for r in best], [float(scores[r]) for r in best])
        dense = np.full(base + n, -9.0, dtype=np.float32)
        p.dense(q8, scale, stats, m, base, dense, order, reuse=reuse)
        expect = np.full(base + n, -9.0, dtype=np.float32)
        expect[base + order[cand]] = scores[cand]
        assert np.array_equal(dense, expect)
    if K.HAS_AVX2:
        assert len(reuse) == 2  # one list per mask, made once


@PATHS
@given(int8_cases())
def test_every_threshold_pass_equals_the_oracle(case):
    q8, scale, mask, base, query, k = case
    p = K.Int8Query(query)
    scores = oracle_scores(q8, scale, p.qw, p.qscale)
    cand = [r for r in range(len(q8)) if mask[base + r]]
    if not cand:
        t = np.float32(0.0)
    else:
        t = np.float32(np.sort(scores[cand])[::-1][min(k, len(cand)) - 1])
    want = [base + r for r in cand if scores[r] >= t]
    n = len(q8)
    order = K.identity_order(n)
    outs = {"portable": masked_dot_above_q8(q8, scale, p.qw, p.qscale, mask, base, t, out := np.empty(n, np.int64), 0, order, 0, n)}
    got = {"portable": out}
    if K.HAS_AVX2:
        got["avx2"] = np.empty(n, np.int64)
        outs["avx2"] = K.masked_dot_above_avx2(q8, scale, p.qw, p.qscale, mask, base, t, got["avx2"], 0, order, 0, n)
    got["picked"] = np.empty(n, np.int64)
    outs["picked"] = p.above(q8, scale, K.segment_stats(q8, scale), mask, base, float(t), got["picked"], 0)
    for name in outs:
        assert got[name][: outs[name]].tolist() == want, name
    if len(want) > 1 and K.HAS_AVX2:  # a full output says so
        assert K.masked_dot_above_avx2(q8, scale, p.qw, p.qscale, mask, base, t, np.empty(len(want) - 1, np.int64), 0, order, 0, n) == -1


@PATHS
@given(int8_cases())
def test_every_dense_path_equals_the_oracle(case):
    """Every masked row's approximate score written where it belongs (thread context's first
    scores), nothing else touched, on every path this CPU has and the one Int8Query picks."""
    q8, scale, mask, base, query, _ = case
    p = K.Int8Query(query)
    n = len(q8)
    want = np.full(base + n, -9.0, dtype=np.float32)
    rows = np.flatnonzero(mask[base:])
    want[base + rows] = oracle_scores(q8, scale, p.qw, p.qscale)[rows]
    order = K.identity_order(n)
    got = {name: np.full(base + n, -9.0, dtype=np.float32) for name in ("portable", "avx2", "vnni", "picked")}
    K.masked_dot_dense_q8(q8, scale, p.qw, p.qscale, mask, base, got["portable"], order, 0, n)
    if K.HAS_AVX2:
        K.masked_dot_dense_avx2(q8, scale, p.qw, p.qscale, base, got["avx2"], *listed(mask, base, order, n), order)
    else:
        del got["avx2"]
    stats = K.segment_stats(q8, scale)
    if K.HAS_VNNI and q8.shape[1] % (32 * K.UNROLL) == 0:
        K.masked_dot_dense_vnni(q8, scale, stats[0], p.hi, p.lo, p.qscale, base, got["vnni"], *listed(mask, base, order, n), order)
    else:
        del got["vnni"]
    p.dense(q8, scale, stats, mask, base, got["picked"])
    for name, out in got.items():
        assert np.array_equal(out, want), name


@PATHS
@given(int8_cases(), st.integers(1, 9))
def test_every_batch_path_equals_the_oracle(case, n_q):
    q8, scale, mask, base, query, k = case
    rng = np.random.default_rng(len(q8) * 7 + n_q)
    d = q8.shape[1]
    masks = np.repeat(mask[None, :], n_q, axis=0)
    masks[1:, base:] = rng.random((n_q - 1, len(q8))) < 0.5
    qs = rng.standard_normal((n_q, d)).astype(np.float32)
    qs[0] = query
    batch = K.Int8Batch.quantize(qs)
    want = [oracle_top(oracle_scores(q8, scale, batch.qw[b], batch.qscale[b]), masks[b], base, k) for b in range(n_q)]
    order = K.identity_order(len(q8))
    kernels = {"portable": lambda *a: K.batch_scan_q8(q8, scale, batch.qw, batch.qscale, *a)}
    if K.HAS_AVX2:
        kernels["avx2"] = lambda *a: K.batch_scan_avx2(q8, scale, batch.qw.astype(np.int8), batch.qscale, *a, False, 0)
    kernels["picked"] = None
    for name, kern in kernels.items():
        hs, hi, hn = np.zeros((n_q, k), np.float32), np.zeros((n_q, k), np.int64), np.zeros(n_q, np.int64)
        if kern is None:
            K.batch_scan(q8, scale, K.segment_stats(q8, scale), batch, masks, base, k, hs, hi, hn)
        else:
            kern(masks, base, k, hs, hi, hn, order)
        for b in range(n_q):
            h = TopK(k)
            h.scores[:], h.ids[:], h.n = hs[b], hi[b], int(hn[b])
            ids, scores = h.result()
            assert (ids.tolist(), scores.tolist()) == want[b], (name, b)


@PATHS
@given(int8_cases(), st.integers(1, 6), st.sampled_from([1, 7, 256, 100000]))
def test_the_avx2_batch_kernel_on_a_copy_in_date_order(case, n_q, chunk):
    """A copy stored in another order than its rows' (``order``: the row of each stored row, as
    the writer stores the copy by date): the kernel gathers each query's mask bytes into stored
    order ``chunk`` rows at a time; any chunk gives the oracle's heaps (ids: the rows')."""
    if not K.HAS_AVX2:
        pytest.skip("no AVX2 here")
    q8, scale, mask, base, query, k = case
    rng = np.random.default_rng(len(q8) * 3 + n_q + chunk)
    n, d = q8.shape
    order = rng.permutation(n).astype(np.int32)
    stored_q8 = np.ascontiguousarray(q8[order])  # stored row i is segment row order[i]
    masks = np.repeat(mask[None, :], n_q, axis=0)
    masks[1:, base:] = rng.random((n_q - 1, n)) < 0.5
    qs = rng.standard_normal((n_q, d)).astype(np.float32)
    qs[0] = query
    batch = K.Int8Batch.quantize(qs)
    hs, hi, hn = np.zeros((n_q, k), np.float32), np.zeros((n_q, k), np.int64), np.zeros(n_q, np.int64)
    K.batch_scan_avx2(stored_q8, np.ascontiguousarray(scale[order]), batch.qw.astype(np.int8), batch.qscale, masks, base, k, hs, hi, hn, order, True, chunk)
    for b in range(n_q):
        want = oracle_top(oracle_scores(q8, scale, batch.qw[b], batch.qscale[b]), masks[b], base, k)
        h = TopK(k)
        h.scores[:], h.ids[:], h.n = hs[b], hi[b], int(hn[b])
        ids, scores = h.result()
        assert (ids.tolist(), scores.tolist()) == want, b


def test_the_kernel_path_names_what_runs():
    path = K.kernel_path()
    if K.HAS_VNNI:
        assert path.startswith("vnni")
    elif K.HAS_AVX2:
        assert path == "avx2 (vpmaddwd)"
    else:
        assert path.startswith("portable")
    assert K.kernel_path(np.zeros((3, 100), np.int8)) != "vnni (vpdpbusd)" or K.HAS_VNNI  # widths VNNI does not take


_HEAPS = """
import json
import numpy as np
from mempp.kernels import TopK
from mempp.kernels import int8dot as K
rng = np.random.default_rng(11)
q8 = rng.integers(-128, 128, (900, 391)).astype(np.int8)
q8[rng.random(900) < 0.1] = q8[3]
scale = rng.random(900).astype(np.float32)
stats = K.segment_stats(q8, scale)
qs = rng.standard_normal((5, 391)).astype(np.float32)
masks = (rng.random((5, 900)) < 0.4).astype(np.uint8)
out = {"path": K.kernel_path(q8), "single": [], "batch": []}
for b in range(5):
    p = K.Int8Query(qs[b])
    h = TopK(40)
    h.n = p.scan(q8, scale, stats, masks[b], 0, 40, h.scores, h.ids, h.n)
    ids, scores = h.result()
    out["single"].append([ids.tolist(), scores.tolist()])
    dense = np.zeros(900, np.float32)
    p.dense(q8, scale, stats, masks[b], 0, dense)
    out.setdefault("dense", []).append(dense.tolist())
hs, hi, hn = np.zeros((5, 40), np.float32), np.zeros((5, 40), np.int64), np.zeros(5, np.int64)
K.batch_scan(q8, scale, stats, K.Int8Batch.quantize(qs), masks, 0, 40, hs, hi, hn, tiled=False)
out["batch"] = [sorted(zip(hs[b, : hn[b]].tolist(), hi[b, : hn[b]].tolist())) for b in range(5)]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_forced_fallback_gives_this_process_heaps(tmp_path):
    """``MEMPP_VNNI=0 MEMPP_AVX2=0``: the portable kernels run (``kernel_path`` says so), and the
    heaps equal those of the fastest kernels this process has."""
    env = {**os.environ, "MEMPP_VNNI": "0", "MEMPP_AVX2": "0", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    proc = subprocess.run([sys.executable, "-c", _HEAPS], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    forced = json.loads(proc.stdout.strip().splitlines()[-1])
    here: dict = {}
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(_HEAPS, here)
    mine = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert forced["path"].startswith("portable")
    assert forced["single"] == mine["single"]
    assert forced["dense"] == mine["dense"]
    assert [[list(p) for p in h] for h in forced["batch"]] == [[list(p) for p in h] for h in mine["batch"]]
