"""Masked top-k over the int8 copy of the embeddings, in exact integer arithmetic.

The query is quantized to int16 (``query ≈ qscale * q16``) and each row's score is
``scale[row] * qscale * (q8[row] · q16)`` where the dot product is an exact int32.
Integer arithmetic makes the approximate score independent of the instruction set:

- on CPUs with VNNI (``vpdpbusd``: 32 unsigned x signed byte products summed per
  instruction) the dot product is three ``vpdpbusd`` per 32 bytes of the row (the int16
  query split into a high and a low byte, plus the row's byte sum to undo the high
  byte's offset), and rows are prefetched a few candidates ahead. The scan then reads
  memory at close to the bandwidth (``mempp bench`` reports the rate);
- elsewhere the portable kernel sums ``int32(x) * int32(q16)`` (``vpmaddwd`` on AVX2).

Both give the same integers, so the same ranking; :func:`has_vnni` says which runs, and
``MEMPP_VNNI=0`` turns the VNNI kernel off.
"""

from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import config, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .topk import heap_push

INT32_MAX = 2**31 - 1
UNROLL = 4  # 32-byte chunks per step of the VNNI dot product: rows must be a multiple of 128 bytes
PREFETCH_AHEAD = 6  # candidate rows prefetched ahead (into L1) of the one being scored: 4 to 8 measure the same


def _host_has_vnni() -> bool:
    if os.environ.get("MEMPP_VNNI", "1") == "0":
        return False
    if config.CPU_NAME not in (None, "host") or config.CPU_FEATURES is not None:
        return False  # numba compiles for another CPU (portable caches): no host-only instructions
    try:
        import llvmlite.binding as llvm

        feats = llvm.get_host_cpu_features()
    except Exception:  # pragma: no cover - llvmlite without host detection
        return False
    return bool(feats.get("avxvnni") or (feats.get("avx512vnni") and feats.get("avx512vl")))


HAS_VNNI = _host_has_vnni()


def has_vnni() -> bool:
    """Whether :func:`masked_dot_topk_q16` runs the VNNI kernel on this machine."""
    return HAS_VNNI


def quantize_query(query: np.ndarray) -> tuple[np.ndarray, float]:
    """``(q16, qscale)`` with ``query ≈ qscale * q16``; ``|q16| * 127 * d`` fits an int32."""
    q = np.asarray(query, dtype=np.float32)
    d = max(len(q), 1)
    top = min(32767, INT32_MAX // (127 * d))
    m = float(np.abs(q).max()) if len(q) else 0.0
    qscale = m / top if m > 0 else 1.0
    q16 = np.rint(q.astype(np.float64) / qscale).astype(np.int16)
    return q16, qscale


def split_query(q16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """High and low bytes of ``q16`` as unsigned bytes: ``q16 = 256 * (hi - 128) + lo``."""
    w = q16.astype(np.int32)
    hi = ((w >> 8) + 128).astype(np.uint8)
    lo = (w & 0xFF).astype(np.uint8)
    return hi, lo


def q16_error_bound(scale: np.ndarray, query: np.ndarray, qscale: float) -> float:
    """Largest possible ``|approximate - exact|`` score of any row.

    Row rounding moves the dot product by at most ``max(scale) / 2 * sum(|query|)``; query
    rounding by at most ``|q8|_1 * max(scale) * qscale / 2 <= 127 d max(scale) qscale / 2``;
    the int32 sum is exact, and its conversion and two float32 products add at most
    ``3 * 2^-24`` of the approximate score's size, bounded by ``127 d max(scale) * (|q| + qscale)``.
    """
    if len(scale) == 0:
        return 0.0
    d = len(query)
    s = float(scale.max())
    q1 = float(np.abs(query).sum())
    size = 127.0 * s * (q1 + d * qscale)
    return s * q1 * 0.5 + 127.0 * d * s * qscale * 0.5 + 4 * 2.0**-24 * size + 1e-7


# --- VNNI intrinsics -----------------------------------------------------------------------


@intrinsic
def _prefetch_row(typingctx, arr, row):
    """Prefetch every cache line of ``arr[row]`` (2-D, C-contiguous) into all cache levels."""
    sig = types.void(arr, row)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1], zero], wraparound=False)
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32]), "llvm.prefetch.p0")
        width = builder.extract_value(ary.shape, 1)
        with cgutils.for_range_slice(builder, zero, width, context.get_constant(types.intp, 64)) as (off, _):
            builder.call(fn, [builder.gep(i8p, [off]), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _vnni_dot(typingctx, arr, row, hi, lo):
    """``arr[row] · (256 * (hi - 128) + lo)`` as int64 (``arr`` int8 2-D, ``hi``/``lo`` uint8; width % (32 * UNROLL) == 0)."""
    sig = types.int64(arr, row, hi, lo)

    def codegen(context, builder, signature, args):
        aryty, _, hity, loty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        hia = context.make_array(hity)(context, builder, args[2])
        loa = context.make_array(loty)(context, builder, args[3])
        zero = context.get_constant(types.intp, 0)
        rowp = builder.bitcast(
            cgutils.get_item_pointer(context, builder, aryty, ary, [args[1], zero], wraparound=False), ir.IntType(8).as_pointer()
        )
        hip = builder.bitcast(hia.data, ir.IntType(8).as_pointer())
        lop = builder.bitcast(loa.data, ir.IntType(8).as_pointer())
        v8 = ir.VectorType(ir.IntType(32), 8)
        dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8, v8, v8]), "llvm.x86.avx512.vpdpbusd.256")
        zeros = ir.Constant(v8, None)
        accs = [[cgutils.alloca_once_value(builder, zeros) for _ in range(3)] for _ in range(UNROLL)]
        ones = ir.Constant(v8, [ir.Constant(ir.IntType(32), 0x01010101)] * 8)
        width = builder.extract_value(ary.shape, 1)

        def load(p, off):
            return builder.load(builder.bitcast(builder.gep(p, [off]), v8.as_pointer()), align=1)

        # UNROLL independent accumulator triples: vpdpbusd's latency (5 cycles) would otherwise
        # serialize the row.
        with cgutils.for_range_slice(builder, zero, width, context.get_constant(types.intp, 32 * UNROLL)) as (off0, _):
            for u, (a_hi, a_lo, a_sum) in enumerate(accs):
                off = builder.add(off0, context.get_constant(types.intp, 32 * u))
                x = load(rowp, off)
                builder.store(builder.call(dp, [builder.load(a_hi), load(hip, off), x]), a_hi)
                builder.store(builder.call(dp, [builder.load(a_lo), load(lop, off), x]), a_lo)
                builder.store(builder.call(dp, [builder.load(a_sum), ones, x]), a_sum)
        # Per lane, 256 * (sum(hi * x) - 128 * sum(x)) + sum(lo * x) fits an int32 (it is at most
        # the int32 total); combine the lanes once.
        c128 = ir.Constant(v8, [ir.Constant(ir.IntType(32), 128)] * 8)
        c256 = ir.Constant(v8, [ir.Constant(ir.IntType(32), 256)] * 8)
        v = None
        for a_hi, a_lo, a_sum in accs:
            part = builder.add(builder.mul(builder.sub(builder.load(a_hi), builder.mul(builder.load(a_sum), c128)), c256), builder.load(a_lo))
            v = part if v is None else builder.add(v, part)
        red = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [v8]), "llvm.vector.reduce.add.v8i32")
        return builder.sext(builder.call(red, [v]), ir.IntType(64))

    return sig, codegen


# --- kernels ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True, fastmath=True)
def _dot_q16(x, q16):
    acc = np.int32(0)
    for j in range(x.shape[0]):
        acc = np.int32(acc + np.int32(np.int32(x[j]) * np.int32(q16[j])))  # int32 products: vpmaddwd
    return acc


@njit(cache=True, nogil=True)
def masked_dot_topk_q16(q8, scale, q16, qscale, mask, base, k, heap_scores, heap_ids, n_heap):
    """Push every masked row's approximate score into the heap (portable kernel); return the fill.

    ``q8``: (n, d) int8; ``scale``: (n,) float32; ``q16``/``qscale`` from :func:`quantize_query`;
    ``mask``: global candidates; score ``scale[row] * (qscale * float32(q8[row] · q16))``.
    """
    qs = np.float32(qscale)
    for row in range(q8.shape[0]):
        g = base + row
        if mask[g]:
            s = scale[row] * (qs * np.float32(_dot_q16(q8[row], q16)))
            if n_heap < k or s > heap_scores[0] or (s == heap_scores[0] and g > heap_ids[0]):
                n_heap = heap_push(heap_scores, heap_ids, n_heap, k, s, g)
    return n_heap


if HAS_VNNI:

    @njit(cache=True, nogil=True)
    def masked_dot_topk_vnni(q8, scale, hi, lo, qscale, mask, base, k, heap_scores, heap_ids, n_heap, rows):
        """:func:`masked_dot_topk_q16` with ``vpdpbusd`` and prefetching; ``rows``: scratch (n,) int64."""
        qs = np.float32(qscale)
        m = 0
        for row in range(q8.shape[0]):  # candidate rows first: their addresses feed the prefetcher
            rows[m] = row
            m += 1 if mask[base + row] else 0
        for i in range(min(PREFETCH_AHEAD, m)):
            _prefetch_row(q8, rows[i])
        for i in range(m):
            if i + PREFETCH_AHEAD < m:
                _prefetch_row(q8, rows[i + PREFETCH_AHEAD])
            row = rows[i]
            g = base + row
            s = scale[row] * (qs * np.float32(np.int32(_vnni_dot(q8, row, hi, lo))))
            if n_heap < k or s > heap_scores[0] or (s == heap_scores[0] and g > heap_ids[0]):
                n_heap = heap_push(heap_scores, heap_ids, n_heap, k, s, g)
        return n_heap

else:
    masked_dot_topk_vnni = None


class Int8Query:
    """A query prepared for the int8 scans: quantized once, reused for every segment."""

    def __init__(self, query: np.ndarray):
        self.query = np.asarray(query, dtype=np.float32)
        self.q16, self.qscale = quantize_query(self.query)
        self.hi, self.lo = split_query(self.q16)
        self._rows = np.empty(0, dtype=np.int64)

    def scan(self, q8, scale, mask, base, k, heap_scores, heap_ids, n_heap) -> int:
        """Offer the segment's masked rows to the heap; the fastest kernel this machine has."""
        if HAS_VNNI and q8.shape[1] % (32 * UNROLL) == 0 and q8.flags.c_contiguous:
            if len(self._rows) < len(q8):
                self._rows = np.empty(len(q8), dtype=np.int64)
            return masked_dot_topk_vnni(q8, scale, self.hi, self.lo, self.qscale, mask, base, k, heap_scores, heap_ids, n_heap, self._rows)
        return masked_dot_topk_q16(q8, scale, self.q16, self.qscale, mask, base, k, heap_scores, heap_ids, n_heap)

    def error_bound(self, scale: np.ndarray) -> float:
        return q16_error_bound(scale, self.query, self.qscale)
