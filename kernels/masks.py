"""Candidate masks: which documents are valid at a date, and which pass the filters.

A document is valid at θ when ``date <= θ < valid_until`` (both int64 µs; undated documents
are never valid at a date). Masks are uint8, one byte per document, as the kernels read them.

Built once per version (:class:`ValidIndex`): each document's day numbers (int32), the
documents sorted by date day and by retirement day (a counting sort), and a bitset of the
valid documents at up to :data:`MAX_CHECKPOINTS` checkpoint days spread evenly over the date
and retirement events. A mask at θ (:func:`mask_at`) unpacks the nearest earlier checkpoint
(n / 8 bytes read), applies the events between that checkpoint and θ's day from the sorted
orders, and settles the documents dated or retired on θ's own day from their µs values. On
1M documents that moves about 1.1 MB instead of the 8 MB a pass over the day numbers reads.

Filters narrow a mask: a date range through the date order (:func:`keep_dates`); a facet
(author, thread, channel) through a list of document ids when its values are rare
(:func:`keep_ids`, the ids coming from cached roaring bitmaps) or one pass over the facet
codes when they are common (:func:`keep_codes`).

Owns the validity rule in compiled form (:func:`valid_by_rule`, :func:`mask_at`), :class:`ValidIndex`
and the filter kernels; using them per query is ``mempp.candidates``'.

Never imports: topk, mempp.storage, mempp.candidates.
"""

from __future__ import annotations

import numpy as np
from numba import njit

DAY_US = 86_400 * 10**6
NO_DAY = np.iinfo(np.int32).max  # undated, or never retired
MAX_CHECKPOINTS = 64  # bitsets kept per version: at most 64 bits a document (8 MB on 1M documents)
# and no closer than this many date or retirement events apart. A mask writes the events since
# its checkpoint one by one (random stores into its n bytes): at 100k documents, 2,048 (54
# checkpoints, 0.7 MB) made a mask 14.6 us against 23.1 with 8,192 (13, 0.2 MB); at 1M the
# 64 checkpoints set the spacing (17k events).
EVENTS_PER_CHECKPOINT = 2048

# _UNPACK[b]: the eight mask bytes (0 or 1, one per document) of bitset byte b, as one word.
_UNPACK = np.array([sum(((b >> k) & 1) << (8 * k) for k in range(8)) for b in range(256)], dtype=np.uint64)


@njit(cache=True, nogil=True)
def _day_numbers(us, none, out):
    for i in range(us.shape[0]):
        u = us[i]
        if u == none:
            out[i] = 2147483647
        else:
            d = u // 86_400_000_000
            out[i] = min(max(d, -2147483647), 2147483646)


def day_numbers(us: np.ndarray, none: int) -> np.ndarray:
    """int32 day of each µs timestamp; ``none`` (NAT or FOREVER) maps to :data:`NO_DAY`."""
    out = np.empty(us.shape[0], dtype=np.int32)
    _day_numbers(us, np.int64(none), out)
    return out


@njit(cache=True, nogil=True)
def day_order(days):
    """(order, sorted days): document ids (int32) sorted by day number, stably; :data:`NO_DAY` last.

    A counting sort when the days span at most about four times the number of documents
    (dates of real records do), a merge sort otherwise.
    """
    n = days.shape[0]
    lo, hi = 2147483647, -2147483647
    for i in range(n):
        d = days[i]
        if d != 2147483647:
            lo = min(lo, d)
            hi = max(hi, d)
    if hi < lo or np.int64(hi) - lo > 4 * n + 65536:
        order = np.argsort(days, kind="mergesort").astype(np.int32)
        return order, days[order]
    span = np.int64(hi) - lo + 1  # bucket ``span`` holds NO_DAY
    starts = np.zeros(span + 2, dtype=np.int64)
    for i in range(n):
        d = days[i]
        starts[(d - lo if d != 2147483647 else span) + 1] += 1
    for b in range(1, span + 2):
        starts[b] += starts[b - 1]
    order = np.empty(n, dtype=np.int32)
    for i in range(n):
        d = days[i]
        b = d - lo if d != 2147483647 else span
        order[starts[b]] = i
        starts[b] += 1
    return order, days[order]


@njit(cache=True, nogil=True)
def checkpoint_days(d_sorted, u_sorted, every):
    """Distinct ascending day numbers, one after about every ``every`` date or retirement events."""
    nd = np.searchsorted(d_sorted, 2147483647)  # dated documents (undated sort last)
    nu = np.searchsorted(u_sorted, 2147483647)  # retired documents
    out = np.empty((nd + nu) // max(every, 1) + 1, dtype=np.int32)
    m, i, j, seen = 0, 0, 0, 0
    while i < nd or j < nu:
        if j >= nu or (i < nd and d_sorted[i] <= u_sorted[j]):
            d = d_sorted[i]
            i += 1
        else:
            d = u_sorted[j]
            j += 1
        seen += 1
        if seen >= every and m < out.shape[0] and (m == 0 or out[m - 1] < d):
            out[m] = d
            m += 1
            seen = 0
    return out[:m]


@njit(cache=True, nogil=True)
def checkpoint_bits(d_order, d_days, d_until_days, u_order, u_days, cp_days, bits):
    """``bits[j]``, bit i: ``date day of i < cp_days[j] < until day of i``.

    One sweep through the date and retirement events in day order, copying the running
    bitset at each checkpoint.
    """
    cur = np.zeros(bits.shape[1], dtype=np.uint64)
    pd, pu = 0, 0
    for j in range(cp_days.shape[0]):
        c = cp_days[j]
        while pd < d_days.shape[0] and d_days[pd] < c:
            if d_until_days[pd] > c:
                i = d_order[pd]
                cur[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
            pd += 1
        while pu < u_days.shape[0] and u_days[pu] <= c:
            i = u_order[pu]
            cur[i >> 6] &= ~(np.uint64(1) << np.uint64(i & 63))
            pu += 1
        bits[j, :] = cur


@njit(cache=True, nogil=True)
def _unpack(words, out, lut):
    """``out[i] = bit i of words`` for every byte of ``out`` (eight at a time, then the tail)."""
    n = out.shape[0]
    whole = n // 64
    o = out[: whole * 64].view(np.uint64)
    for w in range(whole):
        x = words[w]
        for b in range(8):
            o[w * 8 + b] = lut[(x >> np.uint64(8 * b)) & np.uint64(255)]
    for i in range(whole * 64, n):
        out[i] = (words[i >> 6] >> np.uint64(i & 63)) & np.uint64(1)


@njit(cache=True, nogil=True)
def mask_at(
    t, cp_days, bits, lut, d_order, d_days, d_until_days, d_us, u_order, u_days, u_date_days, u_us, dates, valid_until, out
):
    """``out[i] = dates[i] <= t < valid_until[i]`` for every document i (undated: 0).

    ``out``: one byte per document, contiguous. Starts
    from the last checkpoint at or before ``t``'s day (or from nothing), sets the documents
    dated since that checkpoint and before ``t``'s day and still valid after it, clears those
    retired since, and settles the documents dated or retired on ``t``'s day from µs values.
    The orders carry each document's other day and its µs value beside it, so the passes read
    them in sequence; only the few documents dated and retired on the same day as ``t`` are
    looked up.
    """
    td = t // 86_400_000_000
    j = np.searchsorted(cp_days, td, side="right") - 1
    if j >= 0:
        _unpack(bits[j], out, lut)
        c = cp_days[j]
        d_lo = np.searchsorted(d_days, c, side="left")
        u_lo = np.searchsorted(u_days, c, side="right")
    else:
        out[:] = 0
        d_lo, u_lo = 0, 0
    d_hi = np.searchsorted(d_days, td, side="left")
    for k in range(d_lo, d_hi):
        if d_until_days[k] > td:
            out[d_order[k]] = 1
    u_hi = np.searchsorted(u_days, td, side="right")
    for k in range(u_lo, u_hi):
        out[u_order[k]] = 0
    for k in range(d_hi, np.searchsorted(d_days, td, side="right")):  # dated on t's day
        i = d_order[k]
        ud = d_until_days[k]
        out[i] = (d_us[k] <= t) & ((ud > td) | ((ud == td) and valid_until[i] > t))
    for k in range(np.searchsorted(u_days, td, side="left"), u_hi):  # retired on t's day
        i = u_order[k]
        dd = u_date_days[k]
        out[i] = (u_us[k] > t) & ((dd < td) | ((dd == td) and dates[i] <= t))


@njit(cache=True, nogil=True)
def keep_dates(mask, lo, hi, d_order, d_days, d_us, out):
    """``out = mask & (lo <= dates <= hi)`` (µs, inclusive; undated documents fail).

    The documents in range are one run of the date order: when they are fewer than half,
    ``out`` starts empty and takes them; otherwise it starts as ``mask`` and loses the rest.
    """
    n = mask.shape[0]
    lo_d, hi_d = lo // 86_400_000_000, hi // 86_400_000_000
    a = np.searchsorted(d_days, lo_d, side="left")
    b = np.searchsorted(d_days, min(hi_d, 2147483646), side="right")
    if 2 * (b - a) < n:
        out[:n] = 0
        for k in range(a, b):
            i = d_order[k]
            out[i] = mask[i] & (d_us[k] >= lo) & (d_us[k] <= hi)
        return
    out[:n] = mask
    for k in range(0, a):
        out[d_order[k]] = 0
    for k in range(b, n):
        out[d_order[k]] = 0
    for k in range(a, np.searchsorted(d_days, lo_d, side="right")):  # lo's own day
        i = d_order[k]
        out[i] = mask[i] & (d_us[k] >= lo) & (d_us[k] <= hi)
    for k in range(np.searchsorted(d_days, hi_d, side="left"), b):  # hi's own day
        i = d_order[k]
        out[i] = mask[i] & (d_us[k] >= lo) & (d_us[k] <= hi)


@njit(cache=True, nogil=True)
def valid_by_rule(dates, valid_until, nat, t, out):
    """``out[i] = dates[i] <= t < valid_until[i]`` (undated, ``nat``: 0) in one pass over both
    arrays: the mask without a :class:`ValidIndex` (16 bytes read per document)."""
    for i in range(dates.shape[0]):
        d = dates[i]
        out[i] = (d != nat) & (d <= t) & (t < valid_until[i])


@njit(cache=True, nogil=True)
def keep_dates_by_rule(mask, dates, nat, lo, hi, out):
    """:func:`keep_dates` in one pass over the dates, without a :class:`ValidIndex`."""
    for i in range(mask.shape[0]):
        d = dates[i]
        out[i] = mask[i] & (d != nat) & (d >= lo) & (d <= hi)


@njit(cache=True, nogil=True)
def keep_ids(mask, ids, out):
    """``out = mask & (document in ids)``: for a rare facet value (``ids`` from its bitmap)."""
    out[: mask.shape[0]] = 0
    for k in range(ids.shape[0]):
        i = ids[k]
        out[i] = mask[i]


@njit(cache=True, nogil=True)
def keep_codes(mask, codes, wanted, out):
    """``out = mask & wanted[codes + 1]`` (code -1, no value, reads ``wanted[0]``): one pass."""
    for i in range(mask.shape[0]):
        out[i] = mask[i] & wanted[codes[i] + 1]


class ValidIndex:
    """One version's dates and ends of validity, arranged for :func:`mask_at` (built once).

    ``by_date``: (order, date days, until days, date µs) and ``by_until``: (order, until days,
    date days, until µs), each in day order; ``cp_days`` and ``bits``: the checkpoints.
    """

    def __init__(self, dates: np.ndarray, valid_until: np.ndarray, nat: int, forever: int, every: int = 0):
        self.n = n = dates.shape[0]
        self.dates, self.valid_until = dates, valid_until
        date_days, until_days = day_numbers(dates, nat), day_numbers(valid_until, forever)
        d_order, d_days = day_order(date_days)
        u_order, u_days = day_order(until_days)
        self.by_date = (d_order, d_days, until_days[d_order], dates[d_order])
        self.by_until = (u_order, u_days, date_days[u_order], valid_until[u_order])
        events = int(np.searchsorted(d_days, NO_DAY)) + int(np.searchsorted(u_days, NO_DAY))
        every = every or max(EVENTS_PER_CHECKPOINT, -(-events // MAX_CHECKPOINTS))
        self.cp_days = checkpoint_days(d_days, u_days, every)
        self.words = -(-n // 64)
        self.bits = np.empty((len(self.cp_days), self.words), dtype=np.uint64)
        checkpoint_bits(*self.by_date[:3], *self.by_until[:2], self.cp_days, self.bits)

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes + sum(a.nbytes for a in (*self.by_date, *self.by_until))

    def mask(self, t: int, out: np.ndarray | None = None) -> np.ndarray:
        """uint8 mask of the documents valid at µs ``t``, written into ``out`` (``n`` contiguous
        bytes; a fresh array when None) and returned."""
        if out is None:
            out = np.empty(self.n, dtype=np.uint8)
        elif out.dtype != np.uint8 or out.shape != (self.n,) or not out.flags.c_contiguous:
            raise ValueError(f"out must be a contiguous uint8 array of {self.n} bytes")
        mask_at(np.int64(t), self.cp_days, self.bits, _UNPACK, *self.by_date, *self.by_until, self.dates, self.valid_until, out)
        return out

    def keep_dates(self, mask: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """``mask`` narrowed to documents dated within ``[lo, hi]`` µs (a fresh array)."""
        out = np.empty(self.n, dtype=np.uint8)
        keep_dates(mask, np.int64(lo), np.int64(hi), self.by_date[0], self.by_date[1], self.by_date[3], out)
        return out
