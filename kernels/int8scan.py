"""The int8 scan of one query: masked top-k, "rows above a threshold" and every masked row's score, over a segment's int8 copy.

Owns the portable kernels (int32 products), the VNNI ones (``vpdpbusd``, prefetching, the
high-byte bound that skips most rows' low half) and the AVX2 ones for x86 CPUs without VNNI
(``vpmaddwd``, prefetching), the row ``order`` of a copy stored in date order, and
:class:`Int8Query`, which picks the fastest kernel this machine has (:func:`kernel_path` names
it). Imports only numpy, numba and the kernels it builds on (``vnni``, ``avx2``, ``int8quant``,
``intrinsics``, ``topk``); never the batch kernels (``int8batch``), which import it.

Never imports: int8batch, int8dot, mempp.storage.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from .avx2 import HAS_AVX2, STEP, avx2_dot8, avx2_dot16
from .int8quant import error_bound, quantize_query, vnni_bytes
from .intrinsics import prefetch_row
from .topk import heap_push
from .vnni import HAS_VNNI, UNROLL, vnni_dot

# Candidate rows prefetched ahead of the one being scored, into L2 (prefetcht1). Measured on the
# 1M bench store held on huge pages (storage/resident.py), 100 queries x 4 rounds side by side:
# 8 rows into L2 read the span at 87% of the bandwidth, 6 rows into L1 at 82% (12 into L2: 84%,
# 8 into L3: 86%); at 100k, where the copy sits in L3, L2 cost 2% (19.9 against 20.3 GB/s).
# Once the scan skipped most rows' low half (2026-12-01, queries interleaved, 3 rounds x 100):
# 12 rows read the span 2% faster than 8 (1.087 / 1.079 against 1.066 / 1.062 of the old kernel),
# 16 the same as 12, 5 slower than the old kernel; at 100k 8, 12 and 16 are the same.
# On a 2-core AMD EPYC with AVX-512 VNNI (32 MiB L3), the top-k scan over the bench workload's own
# masks and date spans, every distance compiled in one process and interleaved, 5 rounds of 40
# queries: at 100k 1.14 ms a leg with 12 rows, 0.99 with 24, 0.93 with 48; at 1M 12.4 ms with 12,
# 11.3 to 11.6 with 24 to 64. 32 rows (12 KiB ahead) sit in that plateau.
PREFETCH_AHEAD = 32


@njit(cache=True, nogil=True, fastmath=True)
def dot_qw(x, qw):
    acc = np.int32(0)
    for j in range(x.shape[0]):
        acc = np.int32(acc + np.int32(np.int32(x[j]) * np.int32(qw[j])))  # int32 products: vpmaddwd
    return acc


@njit(cache=True, nogil=True)
def masked_dot_topk_q8(q8, scale, qw, qscale, mask, base, k, heap_scores, heap_ids, n_heap, order, start, stop):
    """Push every masked row's approximate score into the heap (portable kernel); return the fill.

    ``q8``: (n, d) int8; ``scale``: (n,) float32; ``qw``/``qscale`` from :func:`quantize_query`;
    ``mask``: global candidates; score ``scale[row] * (qscale * float32(q8[row] · qw))``.
    ``order``: the segment row of each stored row (the copy is stored in date order;
    :func:`identity_order` when it is not); only stored rows ``start .. stop`` are scanned
    (a span holding every candidate). Doc ids are ``base + order[row]``.
    """
    qs = np.float32(qscale)
    for row in range(start, stop):
        g = base + order[row]
        if mask[g]:
            s = scale[row] * (qs * np.float32(dot_qw(q8[row], qw)))
            if n_heap < k or s > heap_scores[0] or (s == heap_scores[0] and g > heap_ids[0]):
                n_heap = heap_push(heap_scores, heap_ids, n_heap, k, s, g)
    return n_heap


@njit(cache=True, nogil=True)
def masked_dot_above_q8(q8, scale, qw, qscale, mask, base, threshold, out, n_out, order, start, stop):
    """Append to ``out`` (from ``n_out``) every masked row whose approximate score is
    ``>= threshold``; returns the new count, or -1 when ``out`` is full (portable kernel).
    ``order``, ``start``, ``stop``: as in :func:`masked_dot_topk_q8`."""
    qs = np.float32(qscale)
    for row in range(start, stop):
        g = base + order[row]
        if mask[g]:
            s = scale[row] * (qs * np.float32(dot_qw(q8[row], qw)))
            if s >= threshold:
                if n_out == out.shape[0]:
                    return -1
                out[n_out] = g
                n_out += 1
    return n_out


@njit(cache=True, nogil=True)
def masked_dot_dense_q8(q8, scale, qw, qscale, mask, base, out, order, start, stop):
    """``out[g]`` = the approximate score of every masked row (portable kernel; others untouched).
    ``order``, ``start``, ``stop``: as in :func:`masked_dot_topk_q8`."""
    qs = np.float32(qscale)
    for row in range(start, stop):
        g = base + order[row]
        if mask[g]:
            out[g] = scale[row] * (qs * np.float32(dot_qw(q8[row], qw)))


@njit(cache=True, nogil=True)
def candidate_rows(mask, base, order, start, stop, rows):
    """List the stored rows of ``[start, stop)`` whose document is a candidate (``mask[base +
    order[row]]``) into ``rows``, in stored order, without a branch on the mask; returns how many.

    The prefetching kernels score ``rows[:m]``: listed first, the addresses feed the prefetcher."""
    m = 0
    for row in range(start, stop):
        rows[m] = row
        m += 1 if mask[base + order[row]] else 0
    return m


if HAS_VNNI:

    @njit(cache=True, nogil=True, inline="always")
    def _vnni_high(q8, row, hi, rowsum):
        """The high-byte half of ``q8[row] · qw`` for an int16 query (bytes of :func:`vnni_bytes`):
        ``256 * (q8[row] · (qw >> 8))`` (int64); the whole is ``high + q8[row] · lo``."""
        return (vnni_dot(q8, row, hi) - 128 * np.int64(rowsum[row])) * 256

    @njit(cache=True, nogil=True, inline="always")
    def _high_bound(high, row, rowsum, l1):
        """The largest ``q8[row] · qw`` can be given its high half: ``qw``'s low bytes are 0..255,
        so they add at most 255 x the row's positive bytes, ``(sum |q8| + sum q8) / 2``."""
        return high + 255 * ((np.int64(l1[row]) + rowsum[row]) >> 1)

    @njit(cache=True, nogil=True)
    def masked_dot_topk_vnni(q8, scale, rowsum, l1, hi, lo, qscale, base, k, heap_scores, heap_ids, n_heap, rows, m, order):
        """:func:`masked_dot_topk_q8` with ``vpdpbusd`` and prefetching, over the stored rows
        ``rows[:m]`` (:func:`candidate_rows`), prefetched a few ahead.

        Once the heap is full, a row whose high half bounds its score below the heap's root
        skips the low half (about 99% of the rows on the bench workload): half the work, and
        the same heap, since the bound is exact in integers and float rounding is monotone.
        """
        qs = np.float32(qscale)
        for i in range(min(PREFETCH_AHEAD, m)):
            prefetch_row(q8, rows[i])
        for i in range(m):
            if i + PREFETCH_AHEAD < m:
                prefetch_row(q8, rows[i + PREFETCH_AHEAD])
            row = rows[i]
            high = _vnni_high(q8, row, hi, rowsum)
            if n_heap == k and scale[row] * (qs * np.float32(_high_bound(high, row, rowsum, l1))) < heap_scores[0]:
                continue
            g = base + order[row]
            s = scale[row] * (qs * np.float32(np.int32(high + vnni_dot(q8, row, lo))))
            if n_heap < k or s > heap_scores[0] or (s == heap_scores[0] and g > heap_ids[0]):
                n_heap = heap_push(heap_scores, heap_ids, n_heap, k, s, g)
        return n_heap

    @njit(cache=True, nogil=True)
    def masked_dot_above_vnni(q8, scale, rowsum, l1, hi, lo, qscale, mask, base, threshold, out, n_out, order, start, stop):
        """:func:`masked_dot_above_q8` with ``vpdpbusd``; the low half only where the high half's
        bound reaches ``threshold`` (as in :func:`masked_dot_topk_vnni`)."""
        qs = np.float32(qscale)
        for row in range(start, stop):
            g = base + order[row]
            if mask[g]:
                high = _vnni_high(q8, row, hi, rowsum)
                if scale[row] * (qs * np.float32(_high_bound(high, row, rowsum, l1))) < threshold:
                    continue
                s = scale[row] * (qs * np.float32(np.int32(high + vnni_dot(q8, row, lo))))
                if s >= threshold:
                    if n_out == out.shape[0]:
                        return -1
                    out[n_out] = g
                    n_out += 1
        return n_out

    @njit(cache=True, nogil=True)
    def masked_dot_dense_vnni(q8, scale, rowsum, hi, lo, qscale, base, out, rows, m, order):
        """:func:`masked_dot_dense_q8` with ``vpdpbusd`` and prefetching (both halves of every
        row), over the stored rows ``rows[:m]`` (:func:`candidate_rows`)."""
        qs = np.float32(qscale)
        for i in range(min(PREFETCH_AHEAD, m)):
            prefetch_row(q8, rows[i])
        for i in range(m):
            if i + PREFETCH_AHEAD < m:
                prefetch_row(q8, rows[i + PREFETCH_AHEAD])
            row = rows[i]
            high = _vnni_high(q8, row, hi, rowsum)
            out[base + order[row]] = scale[row] * (qs * np.float32(np.int32(high + vnni_dot(q8, row, lo))))

else:
    masked_dot_topk_vnni = masked_dot_above_vnni = masked_dot_dense_vnni = None


if HAS_AVX2:

    @njit(cache=True, nogil=True, inline="always")
    def _avx2_qw(q8, row, qw):
        """``q8[row] · qw`` (int32, as :func:`dot_qw`): ``vpmaddwd`` over whole 32-byte steps, the rest one by one."""
        acc = avx2_dot16(q8, row, qw)
        for j in range(q8.shape[1] - q8.shape[1] % STEP, q8.shape[1]):
            acc += np.int64(q8[row, j]) * np.int64(qw[j])
        return np.int32(acc)

    @njit(cache=True, nogil=True, inline="always")
    def avx2_qb(q8, row, qb):
        """``q8[row] · qb`` for an int8 query (``|qb| <= 127``; int32, as :func:`dot_qw`):
        ``vpmaddubsw`` + ``vpmaddwd`` over whole 32-byte steps, the rest one by one."""
        acc = avx2_dot8(q8, row, qb)
        for j in range(q8.shape[1] - q8.shape[1] % STEP, q8.shape[1]):
            acc += np.int64(q8[row, j]) * np.int64(qb[j])
        return np.int32(acc)

    @njit(cache=True, nogil=True)
    def masked_dot_topk_avx2(q8, scale, qw, qscale, base, k, heap_scores, heap_ids, n_heap, rows, m, order):
        """:func:`masked_dot_topk_q8` with AVX2 (``vpmovsxbw`` + ``vpmaddwd``: the same int32 dot
        products) over the stored rows ``rows[:m]`` (:func:`candidate_rows`), prefetched a few ahead."""
        qs = np.float32(qscale)
        for i in range(min(PREFETCH_AHEAD, m)):
            prefetch_row(q8, rows[i])
        for i in range(m):
            if i + PREFETCH_AHEAD < m:
                prefetch_row(q8, rows[i + PREFETCH_AHEAD])
            row = rows[i]
            g = base + order[row]
            s = scale[row] * (qs * np.float32(_avx2_qw(q8, row, qw)))
            if n_heap < k or s > heap_scores[0] or (s == heap_scores[0] and g > heap_ids[0]):
                n_heap = heap_push(heap_scores, heap_ids, n_heap, k, s, g)
        return n_heap

    @njit(cache=True, nogil=True)
    def masked_dot_above_avx2(q8, scale, qw, qscale, mask, base, threshold, out, n_out, order, start, stop):
        """:func:`masked_dot_above_q8` with AVX2 (the same int32 dot products)."""
        qs = np.float32(qscale)
        for row in range(start, stop):
            g = base + order[row]
            if mask[g]:
                s = scale[row] * (qs * np.float32(_avx2_qw(q8, row, qw)))
                if s >= threshold:
                    if n_out == out.shape[0]:
                        return -1
                    out[n_out] = g
                    n_out += 1
        return n_out

    @njit(cache=True, nogil=True)
    def masked_dot_dense_avx2(q8, scale, qw, qscale, base, out, rows, m, order):
        """:func:`masked_dot_dense_q8` with AVX2 (the same int32 dot products) and prefetching, over
        the stored rows ``rows[:m]`` (:func:`candidate_rows`)."""
        qs = np.float32(qscale)
        for i in range(min(PREFETCH_AHEAD, m)):
            prefetch_row(q8, rows[i])
        for i in range(m):
            if i + PREFETCH_AHEAD < m:
                prefetch_row(q8, rows[i + PREFETCH_AHEAD])
            row = rows[i]
            out[base + order[row]] = scale[row] * (qs * np.float32(_avx2_qw(q8, row, qw)))

else:
    _avx2_qw = avx2_qb = masked_dot_topk_avx2 = masked_dot_above_avx2 = masked_dot_dense_avx2 = None


def avx2_ok(q8) -> bool:
    """Whether the AVX2 kernels serve this int8 copy (where the VNNI ones do not)."""
    return HAS_AVX2 and q8.flags.c_contiguous


def kernel_path(q8=None, precise: bool = True) -> str:
    """The kernel :meth:`Int8Query.scan` runs (``q8``: a segment's int8 copy; None: a 384-wide one)."""
    if q8 is None:
        q8 = np.zeros((1, 384), dtype=np.int8)
    if precise and vnni_ok(q8):
        return "vnni (vpdpbusd)"
    if avx2_ok(q8):
        return "avx2 (vpmaddwd)"
    return "portable (int32 loop)"


def vnni_ok(q8) -> bool:
    return HAS_VNNI and q8.shape[1] % (32 * UNROLL) == 0 and q8.flags.c_contiguous


_scratch = threading.local()


_IDENTITY = np.arange(0, dtype=np.int32)
_IDENTITY_LOCK = threading.Lock()


def identity_order(n: int) -> np.ndarray:
    """``arange(n)`` as int32 (read only, shared): the ``order`` of a copy stored in row order."""
    ident = _IDENTITY
    if len(ident) < n:
        with _IDENTITY_LOCK:
            ident = _IDENTITY
            if len(ident) < n:
                ident = np.arange(max(n, 2 * len(ident)), dtype=np.int32)
                ident.flags.writeable = False
                globals()["_IDENTITY"] = ident
    return ident[:n]


def _order_span(q8, order, span) -> tuple[np.ndarray, int, int]:
    order = identity_order(len(q8)) if order is None else order
    start, stop = (0, len(q8)) if span is None else span
    return order, int(start), int(stop)


def _rows_scratch(n: int) -> np.ndarray:
    """This thread's candidate-row list for the VNNI scan (a fresh one per query page-faulted in every time)."""
    rows = getattr(_scratch, "rows", None)
    if rows is None or len(rows) < n:
        rows = _scratch.rows = np.empty(max(n, 1024), dtype=np.int64)
    return rows


def listed_rows(q8, mask, base, order, start, stop, reuse: dict | None) -> tuple[np.ndarray, int]:
    """``(rows, m)``: the candidate rows of a segment's span (:func:`candidate_rows`).

    ``reuse``: a dict kept for the scans of one mask (a query's vector leg and its feedback scan
    read the same candidates); the list is made once per segment, span and mask and kept there.
    Without it, this thread's scratch list is filled again.
    """
    if reuse is None:
        rows = _rows_scratch(stop - start)
        return rows, candidate_rows(mask, base, order, start, stop, rows)
    key = (id(q8), id(mask), base, start, stop)
    got = reuse.get(key)
    if got is None:
        rows = np.empty(max(stop - start, 1), dtype=np.int64)
        got = reuse[key] = (rows, candidate_rows(mask, base, order, start, stop, rows), mask)  # the mask kept alive: its id stays its own
    return got[0], got[1]


class Int8Query:
    """A query prepared for the int8 scans: quantized once, reused for every segment.

    ``precise``: an int16 query (single queries); else int8 (bulk scoring, :func:`batch_scan`).
    ``stats``: the segment's :func:`segment_stats` (``SegmentEntry.q8_stats``).
    """

    def __init__(self, query: np.ndarray, precise: bool = True):
        self.query = np.asarray(query, dtype=np.float32)
        self.precise = precise
        self.qw, self.qscale = quantize_query(self.query, precise)
        self.hi, self.lo = vnni_bytes(self.qw, precise)

    def scan(self, q8, scale, stats, mask, base, k, heap_scores, heap_ids, n_heap, order=None, span=None, reuse: dict | None = None) -> int:
        """Offer the segment's masked rows to the heap; the fastest kernel this machine has.

        ``order``: the segment row of each stored row of ``q8`` (None: row order); ``span``:
        ``(start, stop)``, the stored rows to scan, which must hold every candidate (None: all);
        ``reuse``: as in :func:`listed_rows` (the mask must not change while it is kept).
        """
        order, start, stop = _order_span(q8, order, span)
        if self.precise and vnni_ok(q8):
            rows, m = listed_rows(q8, mask, base, order, start, stop, reuse)
            return masked_dot_topk_vnni(q8, scale, stats[0], stats[1], self.hi, self.lo, self.qscale, base, k, heap_scores, heap_ids, n_heap, rows, m, order)
        if avx2_ok(q8):
            rows, m = listed_rows(q8, mask, base, order, start, stop, reuse)
            return masked_dot_topk_avx2(q8, scale, self.qw, self.qscale, base, k, heap_scores, heap_ids, n_heap, rows, m, order)
        return masked_dot_topk_q8(q8, scale, self.qw, self.qscale, mask, base, k, heap_scores, heap_ids, n_heap, order, start, stop)

    def above(self, q8, scale, stats, mask, base, threshold: float, out: np.ndarray, n_out: int, order=None, span=None) -> int:
        """Append the masked rows scoring ``>= threshold`` (approximately) to ``out``; -1 when it
        fills. ``order``, ``span``: as in :meth:`scan`."""
        order, start, stop = _order_span(q8, order, span)
        t = np.float32(threshold)
        if t > threshold:  # round down: a row at the threshold must not be missed
            t = np.nextafter(t, np.float32(-np.inf))
        if self.precise and vnni_ok(q8):
            return masked_dot_above_vnni(q8, scale, stats[0], stats[1], self.hi, self.lo, self.qscale, mask, base, t, out, n_out, order, start, stop)
        if avx2_ok(q8):
            return masked_dot_above_avx2(q8, scale, self.qw, self.qscale, mask, base, t, out, n_out, order, start, stop)
        return masked_dot_above_q8(q8, scale, self.qw, self.qscale, mask, base, t, out, n_out, order, start, stop)

    def dense(self, q8, scale, stats, mask, base, out: np.ndarray, order=None, span=None, reuse: dict | None = None) -> None:
        """Write every masked row's approximate score into ``out`` (global doc ids; others untouched).
        ``order``, ``span``, ``reuse``: as in :meth:`scan`."""
        order, start, stop = _order_span(q8, order, span)
        if self.precise and vnni_ok(q8):
            rows, m = listed_rows(q8, mask, base, order, start, stop, reuse)
            masked_dot_dense_vnni(q8, scale, stats[0], self.hi, self.lo, self.qscale, base, out, rows, m, order)
        elif avx2_ok(q8):
            rows, m = listed_rows(q8, mask, base, order, start, stop, reuse)
            masked_dot_dense_avx2(q8, scale, self.qw, self.qscale, base, out, rows, m, order)
        else:
            masked_dot_dense_q8(q8, scale, self.qw, self.qscale, mask, base, out, order, start, stop)

    def error_bound(self, stats) -> float:
        return error_bound(stats, self.query, self.qscale)
