"""Candidate masks: which documents are valid at a date, in one pass.

A document is valid at θ when ``date <= θ < valid_until`` (both int64 µs). The pass reads
two int32 day numbers per document (half the bytes of the µs values) and consults the µs
values only for the few documents dated or retired on θ's own day.
"""

from __future__ import annotations

import numpy as np
from numba import njit

DAY_US = 86_400 * 10**6
NO_DAY = np.iinfo(np.int32).max  # undated, or never retired


def day_numbers(us: np.ndarray, none: int) -> np.ndarray:
    """int32 day of each µs timestamp; ``none`` (NAT or FOREVER) maps to :data:`NO_DAY`."""
    out = np.floor_divide(us, DAY_US)
    out = np.where(us == none, NO_DAY, np.clip(out, -NO_DAY, NO_DAY - 1))
    return out.astype(np.int32)


@njit(cache=True, nogil=True)
def valid_mask(date_days, until_days, dates, valid_until, t, out):
    """``out[i] = dates[i] <= t < valid_until[i]`` (undated documents are never valid at a date)."""
    td = t // 86_400_000_000
    for i in range(date_days.shape[0]):
        d = date_days[i]
        u = until_days[i]
        ok = d < td or (d == td and dates[i] <= t)
        if ok:
            ok = u > td or (u == td and valid_until[i] > t)
        out[i] = ok
