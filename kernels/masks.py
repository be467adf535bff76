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


def day_index(days: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, sorted days): the documents sorted by day number, to find one day's documents."""
    order = np.argsort(days, kind="stable").astype(np.int64)
    return order, days[order]


@njit(cache=True, nogil=True)
def _settle_day(order, sorted_days, td, date_days, dates, valid_until, t, out):
    lo = np.searchsorted(sorted_days, td, side="left")
    hi = np.searchsorted(sorted_days, td, side="right")
    for j in range(lo, hi):
        i = order[j]
        out[i] = (date_days[i] != 2147483647) & (dates[i] <= t) & (valid_until[i] > t)  # undated: never


@njit(cache=True, nogil=True)
def valid_mask(date_days, until_days, dates, valid_until, t, out, by_date, by_until):
    """``out[i] = dates[i] <= t < valid_until[i]`` (undated documents are never valid at a date).

    One pass compares day numbers only, without branches (it vectorizes); the documents
    dated or retired on ``t``'s own day, found through ``by_date``/``by_until``
    (:func:`day_index` of the day numbers), are then settled from their µs values.
    """
    td = t // 86_400_000_000
    for i in range(date_days.shape[0]):
        out[i] = (date_days[i] < td) & (until_days[i] > td)
    _settle_day(by_date[0], by_date[1], td, date_days, dates, valid_until, t, out)
    _settle_day(by_until[0], by_until[1], td, date_days, dates, valid_until, t, out)
