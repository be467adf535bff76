"""The int8 copy's arithmetic: queries quantized, per-segment row statistics, the error bound.

Owns how a query becomes integers (int16 ``precise`` for single queries, int8 for bulk
scoring), the VNNI byte form of a query, each segment's row sums and ``sum |q8|`` (computed
once per segment), and the largest possible gap between a row's approximate and exact score,
which the planner's certificates rest on. Imports only numpy and numba; never the scan modules.

Never imports: int8scan, int8batch, vnni, mempp.storage.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INT32_MAX = 2**31 - 1


def quantize_query(query: np.ndarray, precise: bool = True) -> tuple[np.ndarray, float]:
    """``(qw, qscale)``: int16 ``qw`` with ``query ≈ qscale * qw``; ``|qw| <= 127`` unless ``precise``.

    ``precise``: up to 32767, or less where ``127 * |qw| * d`` would overflow an int32.
    """
    q = np.asarray(query, dtype=np.float32)
    top = min(32767, INT32_MAX // (127 * max(len(q), 1))) if precise else 127
    m = float(np.abs(q).max()) if len(q) else 0.0
    qscale = m / top if m > 0 else 1.0
    qw = np.clip(np.rint(q.astype(np.float64) / qscale), -top, top).astype(np.int16)
    return qw, qscale


def vnni_bytes(qw: np.ndarray, precise: bool) -> tuple[np.ndarray, np.ndarray]:
    """The query as the VNNI kernels take it: ``(hi, lo)`` unsigned bytes with
    ``qw = 256 * (hi - 128) + lo`` (``precise``), or ``hi = qw + 128`` and ``lo`` empty."""
    w = qw.astype(np.int32)
    if precise:
        return ((w >> 8) + 128).astype(np.uint8), (w & 0xFF).astype(np.uint8)
    return (w + 128).astype(np.uint8), np.zeros(0, dtype=np.uint8)


@njit(cache=True, nogil=True)
def row_stats(q8, rowsum, l1):
    """Per row: the byte sum (undoes the VNNI kernel's query offset) and ``sum |q8|`` (error bound)."""
    for r in range(q8.shape[0]):
        s = 0
        a = 0
        for j in range(q8.shape[1]):
            v = np.int64(q8[r, j])
            s += v
            a += abs(v)
        rowsum[r] = s
        l1[r] = a


def segment_stats(q8: np.ndarray, scale: np.ndarray) -> tuple:
    """``(rowsum, l1, max scale, max scale * l1)`` of a segment's int8 copy (:func:`row_stats`, :func:`error_bound`)."""
    n = len(q8)
    rowsum, l1 = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    row_stats(q8, rowsum, l1)
    if n == 0:
        return rowsum, l1, 0.0, 0.0
    s = np.asarray(scale, dtype=np.float64)
    return rowsum, l1, float(s.max()), float((s * l1).max())


def error_bound(stats: tuple, query: np.ndarray, qscale: float) -> float:
    """Largest possible ``|approximate - exact|`` score of any row of a segment (``stats``: :func:`segment_stats`).

    Row rounding moves the dot product by at most ``scale / 2 * sum(|query|)``; query rounding
    by at most ``scale * sum(|q8|) * qscale / 2``; the int32 sum is exact, and its conversion
    and two float32 products add at most ``3 * 2^-24`` of the approximate score's size,
    at most ``scale * sum(|q8|) * qscale * max|qw| ~ scale * sum(|q8|) * max|query|``.
    """
    if len(stats[0]) == 0:
        return 0.0
    q = np.abs(np.asarray(query, dtype=np.float64))
    q1 = float(q.sum())
    qmax = float(q.max()) + qscale  # >= qscale * max|qw|
    # max over rows of scale * (q1 / 2 + l1 * c) <= q1 / 2 * max(scale) + c * max(scale * l1)
    return 0.5 * q1 * stats[2] + stats[3] * (0.5 * qscale + 4 * 2.0**-24 * qmax) + 1e-7
