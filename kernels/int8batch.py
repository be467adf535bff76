"""The int8 scan of many queries at once (bulk scoring): row-by-row kernels and the tiled matrix product.

Owns :func:`batch_scan` and its kernels: the portable, AVX2 and VNNI row-by-row kernels (one
capacity for all queries), the tiled kernel (16 rows by 8 queries in 512-bit registers, or
16 by 16 with AMX; score floors, sampling, date stops, buffers of keys cut back in bulk), and
:class:`Int8Batch`, many queries quantized at once. Imports only numpy, numba and the kernels it
builds on (``vnni``, ``int8quant``, ``int8scan``, ``intrinsics``, ``topk``).

Never imports: int8dot, cosine, mempp.storage, mempp.store.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .int8scan import HAS_AVX2, Int8Query, avx2_ok, avx2_qb, dot_qw, vnni_ok, identity_order
from .intrinsics import lowest_bit, prefetch
from .topk import sift_down, heap_push
from .vnni import AMX_CONFIG, AMX_QUERIES, HAS_AMX, HAS_VNNI, HAS_VNNI512, TILE_QUERIES, TILE_ROWS, amx_tile_config, amx_dots, amx_release, amx_tile_scored, vnni512_tile, vnni512_tile_scored, vnni_dot

BATCH_ROWS = 256  # rows per block in batch_scan: 96 KB of 384-byte rows stay in L2 across the queries
AVX2_CHUNK = 16384  # batch_scan_avx2: stored rows whose mask bytes are gathered at a time (a copy in date order)
PENDING = 16384  # batch_scan's tiled kernel: rows that reached a threshold, taken in bulk (see _take_pending)


@njit(cache=True, nogil=True)
def batch_scan_q8(q8, scale, qws, qscales, masks, base, k, heap_s, heap_i, heap_n, order):
    """:func:`masked_dot_topk_q8` of many queries (rows ``qws[b]``, heaps ``heap_*[b]``), row block by row block."""
    n = q8.shape[0]
    for r0 in range(0, n, BATCH_ROWS):
        r1 = min(n, r0 + BATCH_ROWS)
        for b in range(qws.shape[0]):
            qs = np.float32(qscales[b])
            hs = heap_s[b]
            hi = heap_i[b]
            m = heap_n[b]
            for row in range(r0, r1):
                g = base + order[row]
                if masks[b, g]:
                    s = scale[row] * (qs * np.float32(dot_qw(q8[row], qws[b])))
                    if m < k or s > hs[0] or (s == hs[0] and g > hi[0]):
                        m = heap_push(hs, hi, m, k, s, g)
            heap_n[b] = m


if HAS_VNNI:

    @njit(cache=True, nogil=True, inline="always")
    def _vnni_int8(q8, row, hi, rowsum):
        """``q8[row] · qw`` for an int8 query (``hi = qw + 128``). Separate from the int16 one:
        a run-time choice inside the row loop measured 3x slower."""
        return np.int32(vnni_dot(q8, row, hi) - 128 * np.int64(rowsum[row]))

    @njit(cache=True, nogil=True)
    def batch_scan_vnni(q8, scale, rowsum, his, qscales, masks, base, k, heap_s, heap_i, heap_n, order):
        """:func:`batch_scan_q8` with ``vpdpbusd``, for int8 queries (``his[b] = qw + 128``).

        Per block and query the candidate rows are listed first (no branch on the mask: a
        random mask mispredicts half the rows, which cost as much as the dot products).
        """
        n = q8.shape[0]
        rows = np.empty(BATCH_ROWS, dtype=np.int64)
        for r0 in range(0, n, BATCH_ROWS):
            r1 = min(n, r0 + BATCH_ROWS)
            for b in range(his.shape[0]):
                m = 0
                for row in range(r0, r1):
                    rows[m] = row
                    m += 1 if masks[b, base + order[row]] else 0
                qs = np.float32(qscales[b])
                hi_b = his[b]
                hs = heap_s[b]
                hi = heap_i[b]
                fill = heap_n[b]
                for i in range(m):
                    row = rows[i]
                    g = base + order[row]
                    s = scale[row] * (qs * np.float32(_vnni_int8(q8, row, hi_b, rowsum)))
                    if fill < k or s > hs[0] or (s == hs[0] and g > hi[0]):
                        fill = heap_push(hs, hi, fill, k, s, g)
                heap_n[b] = fill

else:
    batch_scan_vnni = None


if HAS_AVX2:

    @njit(cache=True, nogil=True)
    def batch_scan_avx2(q8, scale, qbs, qscales, masks, base, k, heap_s, heap_i, heap_n, order, permuted, chunk):
        """:func:`batch_scan_q8` with AVX2 for int8 queries (``qbs[b]``: ``qw`` as int8;
        ``vpmaddubsw`` + ``vpmaddwd``, the same int32 dot products), the candidate rows of each
        block and query listed first as :func:`batch_scan_vnni` does. (``vpmaddwd`` on the
        sign-extended row, as the single query's kernel, measured 1.21x slower here.)

        With ``permuted`` (a copy in date order) each query's mask bytes are first gathered into
        stored order, ``chunk`` rows at a time (:data:`AVX2_CHUNK`), one query after another: read inside the
        blocks, the mask rows of all the queries at random places missed the cache at nearly
        every candidate, which cost several times the dot products.
        """
        n = q8.shape[0]
        n_q = qbs.shape[0]
        rows = np.empty(BATCH_ROWS, dtype=np.int64)
        step = max(chunk, 1) if permuted else max(n, 1)
        cand = np.empty((n_q, step if permuted else 0), dtype=np.uint8)
        for c0 in range(0, n, step):
            c1 = min(n, c0 + step)
            if permuted:
                for b in range(n_q):
                    for row in range(c0, c1):
                        cand[b, row - c0] = masks[b, base + order[row]] != 0
            for r0 in range(c0, c1, BATCH_ROWS):
                r1 = min(c1, r0 + BATCH_ROWS)
                for b in range(n_q):
                    m = 0
                    if permuted:
                        for row in range(r0, r1):
                            rows[m] = row
                            m += cand[b, row - c0]
                    else:
                        for row in range(r0, r1):
                            rows[m] = row
                            m += 1 if masks[b, base + row] else 0
                    qs = np.float32(qscales[b])
                    qb = qbs[b]
                    hs = heap_s[b]
                    hi = heap_i[b]
                    fill = heap_n[b]
                    for i in range(m):
                        row = rows[i]
                        g = base + order[row]
                        s = scale[row] * (qs * np.float32(avx2_qb(q8, row, qb)))
                        if fill < k or s > hs[0] or (s == hs[0] and g > hi[0]):
                            fill = heap_push(hs, hi, fill, k, s, g)
                    heap_n[b] = fill

else:
    batch_scan_avx2 = None


@njit(cache=True, nogil=True)
def _tile_block(q32, r0, r1, blk):
    """Rows ``r0 .. r1`` of ``q32`` (the int8 rows as int32 words) into ``blk``'s layout (see :func:`vnni512_tile`), zero-padded."""
    n_groups = blk.shape[0]
    d4 = q32.shape[1]
    for g in range(n_groups):
        for r in range(TILE_ROWS):
            row = r0 + g * TILE_ROWS + r
            if row < r1:
                for c in range(d4):
                    blk[g, c, r] = q32[row, c]
            else:
                for c in range(d4):
                    blk[g, c, r] = 0


@njit(cache=True, nogil=True, inline="always")
def _key(bits, gid):
    """A candidate as one uint64 ordered as the heaps order them: score (float32 ``bits``), then id (< 2^32)."""
    ordered = (bits | np.uint32(0x80000000)) if bits < np.uint32(0x80000000) else ~bits
    return (np.uint64(ordered) << np.uint64(32)) | np.uint64(gid)


@njit(cache=True, nogil=True)
def _keep_best(buf, n, k):
    """Move the ``k`` largest of ``buf[:n]`` to its front; return how many are kept (``min(n, k)``)."""
    if n <= k:
        return n
    part = np.partition(buf[:n], n - k)
    buf[:k] = part[n - k :]
    return k


@njit(cache=True, nogil=True, inline="always")
def _key_score(key, ubits, sbits):
    """The score of a :func:`_key` (``ubits``/``sbits``: one uint32 and its float32 view, scratch)."""
    ordered = np.uint32(key >> np.uint64(32))
    ubits[0] = (ordered & np.uint32(0x7FFFFFFF)) if ordered >= np.uint32(0x80000000) else ~ordered
    return sbits[0]


@njit(cache=True, nogil=True)
def _take_pending(pend_b, pend_g, pend_s, n_pend, permuted, masks, mask_rows, ks, floors, buf, fill, tkey, thr, ubits, sbits) -> int:
    """Offer :func:`batch_scan_vnni512`'s pending rows (query, global id, score) to their queries'
    buffers of keys; returns 0 (the pending list emptied).

    The tiles only record the rows that reach their query's threshold, prefetching each one's
    mask byte (a copy in date order reads the mask row by row: a cache miss each, in a mask of
    one byte per document and query). Taken here in bulk, the loads have arrived: one row at a
    time, its branches serialized the misses, and this took half the scan's time. A row reached
    a threshold at most a block of rows old, which only rises: the keys kept are the same.
    ``ubits`` / ``sbits``: the caller's scratch for :func:`_key_score`.
    """
    cap = buf.shape[1]
    for i in range(n_pend):
        b = pend_b[i]
        gid = pend_g[i]
        if permuted and masks[mask_rows[b], gid] == 0:
            continue
        sbits[0] = pend_s[i] + np.float32(0.0)  # -0.0 as 0.0: equal scores, one key order
        key = _key(ubits[0], gid)
        if key <= tkey[b]:
            continue
        if fill[b] == cap:
            k = ks[b]
            fill[b] = _keep_best(buf[b], fill[b], k)
            tkey[b] = buf[b, :k].min()
            thr[b] = max(floors[b], _key_score(tkey[b], ubits, sbits))
            if key <= tkey[b]:
                continue
        buf[b, fill[b]] = key
        fill[b] += 1
    return 0


if HAS_VNNI512:

    @njit(cache=True, nogil=True)
    def batch_scan_vnni512(
        q32, scale, rowsum, qwords, qscales, masks, base, ks, heap_s, heap_i, heap_n, floors, stride, seen, order, permuted, mask_rows, stops,
        amx, amx_config,
    ):
        """:func:`batch_scan_q8` as a tiled int8 matrix product (int8 queries; ``qwords[b]``: ``qw + 128`` as
        int32 words, rows rounded up to a multiple of TILE_QUERIES with any query).

        Per block of ``BATCH_ROWS`` rows, laid out 16 rows to a tile, each tile is multiplied by
        ``TILE_QUERIES`` queries at once and scored and filtered in vector registers
        (:func:`vnni512_tile_scored`: every row, candidate or not, which costs less than choosing).
        A candidate above its query's threshold goes to the query's buffer of keys
        (:func:`_key`), which is cut back to the best ``ks[b]`` when full; the threshold is then
        the worst kept. (A heap push per candidate costs several cache misses, with one heap per
        query.) The heaps end holding the best ``ks[b]`` by (score, id), heapified.
        Global ids must be below 2^32.

        ``floors[b]``: rows scoring below it are not offered (-inf: none; see :func:`batch_scan`).
        ``stride``: scan every ``stride``-th block of rows only (a sample); ``seen[b]`` counts
        the candidates of the blocks scanned when ``stride > 1``.

        ``order``: the segment row of each stored row (see :func:`masked_dot_topk_q8`); when
        ``permuted`` the mask is read per row that reaches its query's threshold (a stored
        tile's rows are not adjacent in the mask), else inside the tile, with the scores.
        ``mask_rows[b]``: the row of ``masks`` of query ``b``. ``stops[b]``: no stored row at or
        after it is a candidate of query ``b`` (a copy in date order, a date bound): the tile
        tests it in registers, and tiles past the last stop of their ``TILE_QUERIES`` queries
        are skipped (callers order queries by stop, so neighbours share their tiles).
        """
        n = q32.shape[0]
        n_q = heap_n.shape[0]
        n_qt = qwords.shape[0]
        kmax = 0
        for b in range(n_q):
            kmax = max(kmax, ks[b])
        cap = 2 * kmax + 64
        buf = np.empty((n_q, cap), dtype=np.uint64)
        fill = np.zeros(n_q, dtype=np.int64)
        tkey = np.zeros(n_q, dtype=np.uint64)  # a key must exceed this to be kept (0: fewer than k kept yet)
        thr = np.full(n_qt, np.inf, dtype=np.float32)  # its score must reach this (+inf: padding query or k = 0)
        qs32 = np.zeros(n_qt, dtype=np.float32)
        mrows = np.zeros(n_qt, dtype=np.int64)
        sbits = np.empty(1, dtype=np.float32)
        ubits = sbits.view(np.uint32)
        for b in range(n_qt):
            mrows[b] = mask_rows[min(b, n_q - 1)]
        for b in range(n_q):
            qs32[b] = np.float32(qscales[b])
            k = ks[b]
            if k <= 0:
                continue
            thr[b] = floors[b]
            for i in range(heap_n[b]):  # the heap from earlier segments
                sbits[0] = heap_s[b, i] + np.float32(0.0)
                buf[b, i] = _key(ubits[0], heap_i[b, i])
            fill[b] = heap_n[b]
            if fill[b] >= k:
                fill[b] = _keep_best(buf[b], fill[b], k)
                tkey[b] = buf[b, :k].min()
                thr[b] = max(floors[b], _key_score(tkey[b], ubits, sbits))
        blk = np.empty((BATCH_ROWS // TILE_ROWS, q32.shape[1], TILE_ROWS), dtype=np.int32)
        # With AMX (``amx``: HAS_AMX, and queries padded to a multiple of AMX_QUERIES), the sums of
        # 16 queries by each tile of the block are made first, 16 x 16 at a time (amx_dots), and
        # each half of them scored as the VNNI tiles are (amx_tile_scored): the same numbers.
        amx = amx and n_qt % AMX_QUERIES == 0 and q32.shape[1] % 16 == 0 and q32.shape[1] > 0  # whole 64-byte tiles, at least one
        sums = np.empty((BATCH_ROWS // TILE_ROWS, AMX_QUERIES, TILE_ROWS), dtype=np.int32)
        if amx:
            amx_tile_config(amx_config)
        boff = np.zeros(BATCH_ROWS, dtype=np.int32)
        bscale = np.zeros(BATCH_ROWS, dtype=np.float32)
        acc = np.empty((TILE_QUERIES, TILE_ROWS), dtype=np.int32)
        out_s = np.empty((TILE_QUERIES, TILE_ROWS), dtype=np.float32)
        out_bits = np.zeros(TILE_QUERIES, dtype=np.int32)
        pend_b = np.empty(PENDING, dtype=np.int64)
        pend_g = np.empty(PENDING, dtype=np.int64)
        pend_s = np.empty(PENDING, dtype=np.float32)
        n_pend = 0
        # With ``permuted`` the tile's mask is a staircase: row ``L - stops[b]`` of ``stair``
        # (rows one byte apart) read at column g0 has ones exactly for stored rows g0 + r < stops[b].
        span = n + TILE_ROWS
        stair_flat = np.zeros(2 * span + TILE_ROWS, dtype=np.uint8)
        stair_flat[:span] = 1
        stair = stair_flat[: span + 1].reshape(span + 1, 1)  # a 2-D view; the kernel reads 16 bytes from row + column
        srows = np.zeros(n_qt, dtype=np.int64)
        gstop = np.zeros((n_qt + TILE_QUERIES - 1) // TILE_QUERIES, dtype=np.int64)  # last stop of each group of queries
        for b in range(n_qt):
            st = min(max(stops[min(b, n_q - 1)], 0), n) if ks[min(b, n_q - 1)] > 0 and b < n_q else 0
            srows[b] = span - st
            gstop[b // TILE_QUERIES] = max(gstop[b // TILE_QUERIES], st)
        for r0 in range(0, n, BATCH_ROWS * stride):
            r1 = min(n, r0 + BATCH_ROWS)
            if stride > 1:
                for b in range(n_q):
                    c = 0
                    mb = mask_rows[b]
                    for row in range(r0, min(r1, stops[b])):
                        c += masks[mb, base + order[row]] != 0
                    seen[b] += c
            _tile_block(q32, r0, r1, blk)
            for r in range(r1 - r0):
                boff[r] = np.int32(128 * np.int64(rowsum[r0 + r]))
                bscale[r] = scale[r0 + r]
            n_groups = (r1 - r0 + TILE_ROWS - 1) // TILE_ROWS
            for q0 in range(0, n_qt, TILE_QUERIES):
                jbase = q0 % AMX_QUERIES
                if amx and jbase == 0:
                    last = gstop[q0 // TILE_QUERIES]
                    if q0 // TILE_QUERIES + 1 < gstop.shape[0]:
                        last = max(last, gstop[q0 // TILE_QUERIES + 1])
                    for g in range(n_groups):
                        g0 = r0 + g * TILE_ROWS
                        if g0 >= last or min(r1, g0 + TILE_ROWS) - g0 < TILE_ROWS:
                            break
                        amx_dots(qwords, q0, blk, g, sums[g])
                for g in range(n_groups):
                    g0 = r0 + g * TILE_ROWS
                    g1 = min(r1, g0 + TILE_ROWS)
                    if g0 >= gstop[q0 // TILE_QUERIES]:
                        break
                    if g1 - g0 == TILE_ROWS and amx and permuted:
                        amx_tile_scored(sums, jbase, g, q0, boff, bscale, qs32, thr, stair, srows, g0, out_s, out_bits)
                    elif g1 - g0 == TILE_ROWS and amx:
                        amx_tile_scored(sums, jbase, g, q0, boff, bscale, qs32, thr, masks, mrows, base + g0, out_s, out_bits)
                    elif g1 - g0 == TILE_ROWS and permuted:
                        vnni512_tile_scored(blk, g, qwords, q0, boff, bscale, qs32, thr, stair, srows, g0, out_s, out_bits)
                    elif g1 - g0 == TILE_ROWS:
                        vnni512_tile_scored(blk, g, qwords, q0, boff, bscale, qs32, thr, masks, mrows, base + g0, out_s, out_bits)
                    else:  # the segment's last, partial tile: scored here
                        vnni512_tile(blk, g, qwords, q0, acc)
                        for j in range(TILE_QUERIES):
                            bits = 0
                            if q0 + j < n_q:
                                for row in range(g0, g1):
                                    dot = np.int32(np.int64(acc[j, row - g0]) - 128 * np.int64(rowsum[row]))
                                    sc = scale[row] * (qs32[q0 + j] * np.float32(dot))
                                    out_s[j, row - g0] = sc
                                    if sc >= thr[q0 + j] and row < stops[q0 + j] and masks[mask_rows[q0 + j], base + order[row]] != 0:
                                        bits |= 1 << (row - g0)
                            out_bits[j] = bits
                    for j in range(TILE_QUERIES):
                        bits = out_bits[j]
                        if bits == 0:
                            continue
                        b = q0 + j
                        while bits:  # the set bits, lowest first
                            r = lowest_bit(bits)
                            bits &= bits - 1
                            gid = base + order[g0 + r]
                            if permuted:
                                prefetch(masks[mask_rows[b]], gid)
                            pend_b[n_pend] = b
                            pend_g[n_pend] = gid
                            pend_s[n_pend] = out_s[j, r]
                            n_pend += 1
                    if n_pend > PENDING - TILE_QUERIES * TILE_ROWS:
                        n_pend = _take_pending(pend_b, pend_g, pend_s, n_pend, permuted, masks, mask_rows, ks, floors, buf, fill, tkey, thr, ubits, sbits)
            n_pend = _take_pending(pend_b, pend_g, pend_s, n_pend, permuted, masks, mask_rows, ks, floors, buf, fill, tkey, thr, ubits, sbits)
        if amx:
            amx_release()
        for b in range(n_q):
            k = ks[b]
            if k <= 0:
                continue
            m = _keep_best(buf[b], fill[b], k)
            hs = heap_s[b]
            hi = heap_i[b]
            for i in range(m):
                hs[i] = _key_score(buf[b, i], ubits, sbits)
                hi[i] = np.int64(buf[b, i] & np.uint64(0xFFFFFFFF))
            for i in range(m // 2 - 1, -1, -1):  # heapify (cheaper than sorting: this runs per query and segment)
                sift_down(hs, hi, m, i)
            heap_n[b] = m

else:
    batch_scan_vnni512 = None


class Int8Batch:
    """Many int8 (bulk-scoring) queries prepared at once: row ``b`` holds the numbers of
    ``Int8Query(queries[b], precise=False)`` (the same operations, on whole arrays).

    ``hi``: the VNNI bytes, rows padded with zero queries to a multiple of ``AMX_QUERIES``.
    """

    def __init__(self, query: np.ndarray, qw: np.ndarray, qscale: np.ndarray):
        self.query, self.qw, self.qscale = query, qw, qscale
        n, d = qw.shape
        self.hi = np.full((-(-n // AMX_QUERIES) * AMX_QUERIES, d), 128, dtype=np.uint8)  # padding queries: qw = 0
        self.hi[:n] = (qw.astype(np.int32) + 128).astype(np.uint8)

    @classmethod
    def quantize(cls, queries: np.ndarray) -> "Int8Batch":
        q = np.ascontiguousarray(queries, dtype=np.float32)
        q = q.reshape(len(q), q.shape[-1] if q.ndim == 2 else -1) if len(q) else q.reshape(0, q.shape[-1] if q.ndim == 2 else 0)
        m = np.abs(q).max(axis=1).astype(np.float64) if q.shape[1] else np.zeros(len(q))
        qscale = np.where(m > 0, m / 127, 1.0)
        qw = np.clip(np.rint(q.astype(np.float64) / qscale[:, None]), -127, 127).astype(np.int16)
        return cls(q, qw, qscale)

    @classmethod
    def of(cls, queries: list[Int8Query]) -> "Int8Batch":
        assert not any(q.precise for q in queries), "batch_scan takes int8 queries: Int8Query(v, precise=False)"
        d = len(queries[0].qw) if queries else 0
        return cls(
            np.array([q.query for q in queries], dtype=np.float32).reshape(len(queries), d),
            np.array([q.qw for q in queries], dtype=np.int16).reshape(len(queries), d),
            np.array([q.qscale for q in queries], dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.qscale)

    def error_bounds(self, stats) -> np.ndarray:
        """:func:`error_bound` of every query (float64 array)."""
        if len(stats[0]) == 0:
            return np.zeros(len(self), dtype=np.float64)
        q = np.abs(self.query.astype(np.float64))
        q1 = q.sum(axis=1)
        qmax = (q.max(axis=1) if q.shape[1] else 0.0) + self.qscale
        return 0.5 * q1 * stats[2] + stats[3] * (0.5 * self.qscale + 4 * 2.0**-24 * qmax) + 1e-7


def batch_kernel_path(q8=None, base: int = 0) -> str:
    """The kernel :func:`batch_scan` runs for the vector leg of ``query_batch`` (``q8``: a segment's
    int8 copy; None: a 384-wide one)."""
    if q8 is None:
        q8 = np.zeros((1, 384), dtype=np.int8)
    if tiled_scan_ok(q8, base):
        return "tiled vnni512 (vpdpbusd zmm" + (", amx tdpbusd)" if HAS_AMX else ")")
    if vnni_ok(q8):
        return "vnni (vpdpbusd)"
    if avx2_ok(q8):
        return "avx2 (vpmaddubsw)"
    return "portable (int32 loop)"


def tiled_scan_ok(q8, base: int) -> bool:
    """Whether :func:`batch_scan` runs the tiled kernel on this segment (and so takes ``floors``)."""
    return HAS_VNNI512 and vnni_ok(q8) and base + len(q8) < 2**32


def batch_scan(
    q8, scale, stats, queries, masks, base, k, heap_s, heap_i, heap_n, tiled: bool = True, floors=None, stride: int = 1, seen=None,
    order=None, stops=None, amx: bool = True,
) -> None:
    """The int8 scan of many int8 queries (an :class:`Int8Batch`, or a list of ``Int8Query(v,
    precise=False)``) over one segment, into heaps ``heap_*[b]``.

    ``k``: the heaps' capacity, one for all or one per query (at most ``heap_s.shape[1]``).
    ``tiled``: the tiled matrix-product kernel where the CPU has 512-bit VNNI (the row-by-row
    kernels otherwise, or when False); all give the same heaps. ``amx``: its sums made with
    AMX tiles where the CPU has them (:data:`HAS_AMX`); the same heaps.

    Tiled kernel only (:func:`tiled_scan_ok`): ``floors[b]`` (float32): rows scoring below it
    are not offered to heap ``b``. The heap is then the best ``k[b]`` of the rows at or above
    the floor, which are the best of all rows when it fills (the caller checks). ``stride``:
    scan every ``stride``-th block of ``BATCH_ROWS`` rows, a sample; ``seen[b]`` (int64)
    is increased by the candidates in the blocks scanned (when ``stride > 1``).

    ``order``: the segment row of each stored row of ``q8`` (None: row order; see
    :meth:`Int8Query.scan`). ``stops[b]``: with ``order``, no stored row at or after it is a
    candidate of query ``b`` (``SegmentEntry.q8_stops``); the tiled kernel then skips the rows
    past it, taking the queries in order of their stops.
    """
    permuted = order is not None
    order = identity_order(len(q8)) if order is None else order
    if not isinstance(queries, Int8Batch):
        queries = Int8Batch.of(list(queries))
    n_q = len(queries)
    ks = np.ascontiguousarray(np.broadcast_to(np.asarray(k, dtype=np.int64), (n_q,)))
    assert n_q == 0 or int(ks.max()) <= heap_s.shape[1]
    if n_q == 0:
        return
    if tiled and tiled_scan_ok(q8, base):
        floors = np.full(n_q, -np.inf, dtype=np.float32) if floors is None else np.ascontiguousarray(floors, dtype=np.float32)
        seen = np.zeros(n_q, dtype=np.int64) if seen is None else seen
        if stops is None or not permuted:
            stops = np.full(n_q, len(q8), dtype=np.int64)
        stops = np.clip(np.asarray(stops, dtype=np.int64), 0, len(q8))
        by_stop = np.argsort(stops, kind="stable")
        moved = not np.all(by_stop[1:] > by_stop[:-1])
        # The queries in order of their stops: heaps and per-query numbers move with them, and back.
        sq = Int8Batch(queries.query[by_stop], queries.qw[by_stop], queries.qscale[by_stop]) if moved else queries
        hs, hi, hn, sn = (heap_s[by_stop], heap_i[by_stop], heap_n[by_stop], seen[by_stop]) if moved else (heap_s, heap_i, heap_n, seen)
        batch_scan_vnni512(
            q8.view(np.int32), scale, stats[0], sq.hi.view(np.int32), sq.qscale, masks, base, ks[by_stop], hs, hi, hn,
            floors[by_stop], int(stride), sn, order, permuted, by_stop.astype(np.int64), stops[by_stop], amx and HAS_AMX, AMX_CONFIG,
        )
        if moved:
            heap_s[by_stop], heap_i[by_stop], heap_n[by_stop], seen[by_stop] = hs, hi, hn, sn
        return
    assert floors is None and stride == 1, "floors and sampling need the tiled kernel"
    if not np.all(ks == ks[0]):
        for b in range(n_q):  # per-query capacities: the row-by-row kernels one query at a time
            one = Int8Batch(queries.query[b : b + 1], queries.qw[b : b + 1], queries.qscale[b : b + 1])
            sub = slice(b, b + 1)
            batch_scan(q8, scale, stats, one, masks[sub], base, int(ks[b]), heap_s[sub], heap_i[sub], heap_n[sub], tiled=False, order=order)
        return
    k = int(ks[0])
    if vnni_ok(q8):
        batch_scan_vnni(q8, scale, stats[0], queries.hi[:n_q], queries.qscale, masks, base, k, heap_s, heap_i, heap_n, order)
    elif avx2_ok(q8):
        batch_scan_avx2(q8, scale, queries.qw.astype(np.int8), queries.qscale, masks, base, k, heap_s, heap_i, heap_n, order, permuted, AVX2_CHUNK)
    else:
        batch_scan_q8(q8, scale, queries.qw, queries.qscale, masks, base, k, heap_s, heap_i, heap_n, order)
