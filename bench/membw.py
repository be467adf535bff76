"""Memory bandwidth as ``mempp bench`` measures it: the figure the scans are compared with.

Owns the read-bandwidth probes (numpy's sum and a compiled int64 loop over 1 GiB, one thread),
the probe run between rounds of a scan for side-by-side shares, and the rate at which a process
fills memory it has not used before. Imports only numpy and numba; never mempp itself.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import njit


def membw_gbs(detail: dict[str, list[float]] | None = None) -> float:
    """Read bandwidth, one thread: the higher of two reads of 1 GiB, best of 5 each.

    ``numpy.sum`` over float32 (what ``bench_membw.py`` measures) and a compiled loop summing
    the same bytes as int64 (vectorized, one add per 8 bytes). numpy's pairwise float sum is
    bound by the CPU on a slow core: on 2026-12-01 it ran at 10 GB/s from L1 and at 7.4 to 8.7
    GB/s from memory, where the int64 loop and BLAS's float32 matrix-vector product read 14.5
    and 13.5 GB/s. A scan compared with the lower figure would look faster than memory.
    ``detail``: each method's figure is appended to its list there.
    """
    a = np.ones(1 << 28, dtype=np.float32)  # 1 GiB
    words = a.view(np.int64)
    _sum_words(words[:8])  # compile outside the timing
    figures = {
        "numpy_sum": a.nbytes / min(_timed(a.sum) for _ in range(5)) / 1e9,
        "int64_loop": a.nbytes / min(_timed(lambda: _sum_words(words)) for _ in range(5)) / 1e9,
    }
    if detail is not None:
        for key, value in figures.items():
            detail.setdefault(key, []).append(round(value, 2))
    return round(max(figures.values()), 2)


@njit(nogil=True, fastmath=True)
def _sum_words(words):
    """The sum of an int64 array: one vectorized add per 8 bytes, bound by memory, not the core."""
    s = np.int64(0)
    for i in range(words.shape[0]):
        s += words[i]
    return s


class BandwidthProbe:
    """One int64 read of 1 GiB (:func:`membw_gbs`'s compiled loop), for probes between rounds of a scan."""

    def __init__(self) -> None:
        self.words = np.ones(1 << 27, dtype=np.int64)  # 1 GiB, touched
        _sum_words(self.words[:8])

    def gbs(self) -> float:
        return self.words.nbytes / _timed(lambda: _sum_words(self.words)) / 1e9


def side_by_side_shares(shares: list[float]) -> dict[str, Any]:
    """Rounds of a scan against the bandwidth probed beside each: the median share and every round's."""
    return {"share_side_by_side": round(float(np.median(shares)), 3), "share_rounds": [round(x, 3) for x in shares]}


def fresh_memory_gbs(nbytes: int = 256 << 20) -> float:
    """How fast this process fills memory it has not used before (``numpy.ones``, timed).

    What a write of new data costs beyond the copy: allocation, page faults, zeroing, and on
    a virtual machine the host backing the pages. On the machines of 2026-12-01 this ran at
    0.3 to 1.2 GB/s (the host takes freed pages back) where a copy within touched memory runs
    at 10 or more: ingest, which writes every document's bytes to new memory and new file pages,
    moves with it, so the bench reports it beside the ingest rate.
    """
    return round(nbytes / _timed(lambda: np.ones(nbytes // 8, dtype=np.float64)) / 1e9, 2)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t
