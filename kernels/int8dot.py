"""Masked top-k over the int8 copy of the embeddings, in exact integer arithmetic.

The query is quantized too (``query ≈ qscale * qw``) and each row's approximate score is
``scale[row] * qscale * (q8[row] · qw)``, the dot product an exact int32. Two precisions:

- ``precise`` (single queries): ``qw`` int16, its rounding negligible beside the rows';
- fast (bulk scoring): ``qw`` int8, half the work, twice the error bound.

Integer arithmetic makes the score independent of the instruction set:

- on CPUs with VNNI (``vpdpbusd``: 32 unsigned x signed byte products summed per
  instruction) the dot product is one ``vpdpbusd`` per 32 bytes of the row per query byte
  (int8: ``qw + 128``; int16: its high byte + 128 and its low byte), the offset taken back
  with the row's byte sum (:func:`segment_stats`, computed once per segment); candidate
  rows are prefetched a few ahead, so the scan runs at memory speed. With an int16 query,
  the high byte's product comes first and bounds the whole exactly; a row that cannot
  enter the heap skips the low byte's (most rows, once the heap is full);
- elsewhere the portable kernel sums ``int32(x) * int32(qw)`` (``vpmaddwd`` on AVX2).

Both give the same integers, so the same ranking; :func:`has_vnni` says which runs, and
``MEMPP_VNNI=0`` turns the VNNI kernels off. :func:`batch_scan` scores many queries per
block of rows held in cache (bulk scoring); on CPUs with AMX-INT8 (and a Linux that grants the
tile state) its sums of 16 queries by 16 rows are one ``tdpbusd`` per 64 bytes of the rows
(:data:`HAS_AMX`; ``MEMPP_AMX=0`` turns it off), the same integers again.
"""

from __future__ import annotations

import os
import threading

import numpy as np
from llvmlite import ir
from numba import config, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .maxscore import _prefetch
from .topk import _sift_down, heap_push

INT32_MAX = 2**31 - 1
UNROLL = 4  # 32-byte chunks per step of the VNNI dot product: rows must be a multiple of 128 bytes
# Candidate rows prefetched ahead of the one being scored, into L2 (prefetcht1). Measured on the
# 1M bench store held on huge pages (storage/resident.py), 100 queries x 4 rounds side by side:
# 8 rows into L2 read the span at 87% of the bandwidth, 6 rows into L1 at 82% (12 into L2: 84%,
# 8 into L3: 86%); at 100k, where the copy sits in L3, L2 cost 2% (19.9 against 20.3 GB/s).
# Once the scan skipped most rows' low half (2026-12-01, queries interleaved, 3 rounds x 100):
# 12 rows read the span 2% faster than 8 (1.087 / 1.079 against 1.066 / 1.062 of the old kernel),
# 16 the same as 12, 5 slower than the old kernel; at 100k 8, 12 and 16 are the same.
PREFETCH_AHEAD = 12
BATCH_ROWS = 256  # rows per block in batch_scan: 96 KB of 384-byte rows stay in L2 across the queries
TILE_ROWS = 16  # batch_scan's tiled kernel: rows per tile (the int32 lanes of a zmm register) ...
TILE_QUERIES = 8  # ... and queries per tile (one accumulator register each)
PENDING = 16384  # batch_scan's tiled kernel: rows that reached a threshold, taken in bulk (see _take_pending)


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


def _host_has_vnni512() -> bool:
    """512-bit ``vpdpbusd`` (AVX512-VNNI on zmm registers), for :func:`batch_scan`'s tiled kernel."""
    if not HAS_VNNI:
        return False
    import llvmlite.binding as llvm

    feats = llvm.get_host_cpu_features()
    return bool(feats.get("avx512vnni") and feats.get("avx512f") and feats.get("avx512bw"))


HAS_VNNI512 = _host_has_vnni512()


def _host_has_amx() -> bool:
    """AMX-INT8 tiles usable here, for :func:`batch_scan`'s tiled kernel: the CPU has them, numba
    compiles for this CPU, ``MEMPP_AMX`` is not "0", and Linux grants this process the tile
    state (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, Linux 5.16 and later)."""
    if not HAS_VNNI512 or os.environ.get("MEMPP_AMX", "1") == "0":
        return False
    import llvmlite.binding as llvm

    feats = llvm.get_host_cpu_features()
    if not (feats.get("amx-int8") and feats.get("amx-tile")):
        return False
    try:
        import ctypes
        import platform

        if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
            return False
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(158, 0x1023, 18) != 0:  # SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
            return False
    except Exception:  # pragma: no cover - no libc, or a kernel without the call
        return False
    return True


if HAS_VNNI512:
    import llvmlite.binding as _llvm

    # batch_scan_vnni512 holds the AMX instructions as inline assembly (run only with HAS_AMX):
    # compiling it needs the assembler's parser, which numba does not initialize.
    _llvm.initialize_native_asmparser()
HAS_AMX = _host_has_amx()
AMX_QUERIES = 16  # queries per AMX tile (its rows); Int8Batch pads its queries to a multiple of this
# The tile configuration for _amx_dots: palette 1; tiles 0 (int32 sums), 1 (queries) and 2 (rows)
# each 16 rows of 64 bytes.
AMX_CONFIG = np.zeros(64, dtype=np.uint8)
AMX_CONFIG[0] = 1
AMX_CONFIG[16:22] = np.frombuffer(np.array([64, 64, 64], dtype="<u2").tobytes(), dtype=np.uint8)
AMX_CONFIG[48:51] = 16


def has_vnni() -> bool:
    """Whether the int8 scans run the VNNI kernels on this machine."""
    return HAS_VNNI


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


# --- VNNI intrinsics -----------------------------------------------------------------------


@intrinsic
def _prefetch_row(typingctx, arr, row):
    """Prefetch every cache line of ``arr[row]`` (2-D, C-contiguous) into L2 (``prefetcht1``)."""
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
            builder.call(fn, [builder.gep(i8p, [off]), i32(0), i32(2), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _vnni_dot(typingctx, arr, row, qu):
    """``sum(arr[row] * qu)`` as int64 (``arr`` int8 2-D, ``qu`` uint8; width % (32 * UNROLL) == 0)."""
    sig = types.int64(arr, row, qu)

    def codegen(context, builder, signature, args):
        aryty, _, qty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        qa = context.make_array(qty)(context, builder, args[2])
        zero = context.get_constant(types.intp, 0)
        rowp = builder.bitcast(
            cgutils.get_item_pointer(context, builder, aryty, ary, [args[1], zero], wraparound=False), ir.IntType(8).as_pointer()
        )
        qp = builder.bitcast(qa.data, ir.IntType(8).as_pointer())
        v8 = ir.VectorType(ir.IntType(32), 8)
        dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8, v8, v8]), "llvm.x86.avx512.vpdpbusd.256")
        # UNROLL independent accumulators: vpdpbusd's latency (5 cycles) would otherwise serialize the row.
        accs = [cgutils.alloca_once_value(builder, ir.Constant(v8, None)) for _ in range(UNROLL)]
        width = builder.extract_value(ary.shape, 1)

        def load(p, off):
            return builder.load(builder.bitcast(builder.gep(p, [off]), v8.as_pointer()), align=1)

        with cgutils.for_range_slice(builder, zero, width, context.get_constant(types.intp, 32 * UNROLL)) as (off0, _):
            for u, acc in enumerate(accs):
                off = builder.add(off0, context.get_constant(types.intp, 32 * u))
                builder.store(builder.call(dp, [builder.load(acc), load(qp, off), load(rowp, off)]), acc)
        total = builder.load(accs[0])
        for acc in accs[1:]:
            total = builder.add(total, builder.load(acc))  # lanes hold partial sums of an int32 total
        red = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [v8]), "llvm.vector.reduce.add.v8i32")
        return builder.sext(builder.call(red, [total]), ir.IntType(64))

    return sig, codegen


def _emit_tile_sums(context, builder, bty, blk, group, qty, qwords, q0) -> list:
    """IR of the tile's dot products (see :func:`_vnni512_tile`): ``TILE_QUERIES`` allocas of
    16 int32 lanes, lane ``r`` of the ``j``-th holding query ``q0 + j`` · row ``16 group + r``."""
    b = context.make_array(bty)(context, builder, blk)
    qa = context.make_array(qty)(context, builder, qwords)
    zero = context.get_constant(types.intp, 0)
    v16 = ir.VectorType(ir.IntType(32), 16)
    gptr = cgutils.get_item_pointer(context, builder, bty, b, [group, zero, zero], wraparound=False)
    gvec = builder.bitcast(gptr, v16.as_pointer())
    nc = builder.extract_value(b.shape, 1)
    qrow = cgutils.get_item_pointer(context, builder, qty, qa, [q0, zero], wraparound=False)
    qstride = builder.extract_value(qa.shape, 1)
    dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16, [v16, v16, v16]), "llvm.x86.avx512.vpdpbusd.512")
    accs = [cgutils.alloca_once_value(builder, ir.Constant(v16, None)) for _ in range(TILE_QUERIES)]
    qptrs = [builder.gep(qrow, [builder.mul(qstride, context.get_constant(types.intp, j))]) for j in range(TILE_QUERIES)]
    undef = ir.Constant(v16, ir.Undefined)
    splat = ir.Constant(v16, [0] * 16)
    idx0 = context.get_constant(types.int32, 0)
    with cgutils.for_range(builder, nc) as loop:
        c = loop.index
        data = builder.load(builder.gep(gvec, [c]), align=4)  # 16 rows' bytes 4c..4c+3, one zmm
        for j, acc in enumerate(accs):
            w = builder.load(builder.gep(qptrs[j], [c]), align=4)
            wv = builder.shuffle_vector(builder.insert_element(undef, w, idx0), undef, splat)
            builder.store(builder.call(dp, [builder.load(acc), wv, data]), acc)
    return accs


@intrinsic
def _vnni512_tile(typingctx, blk, group, qwords, q0, out):
    """``out[j, r] = sum_c vpdpbusd(qwords[q0 + j, c], blk[group, c, r])`` for ``j < TILE_QUERIES``, ``r < TILE_ROWS``.

    ``blk``: (groups, d / 4, 16) int32, C-contiguous: ``blk[g, c, r]`` holds bytes ``4c .. 4c + 3``
    of row ``16 g + r`` (signed); ``qwords``: (queries, d / 4) int32, C-contiguous, the query's
    unsigned bytes four to a word; ``out``: (TILE_QUERIES, 16) int32. One zmm load of 16 rows'
    bytes feeds ``TILE_QUERIES`` ``vpdpbusd`` with the query word broadcast: no horizontal sums.
    """
    sig = types.void(blk, group, qwords, q0, out)

    def codegen(context, builder, signature, args):
        bty, _, qty, _, oty = signature.args
        oa = context.make_array(oty)(context, builder, args[4])
        v16 = ir.VectorType(ir.IntType(32), 16)
        accs = _emit_tile_sums(context, builder, bty, args[0], args[1], qty, args[2], args[3])
        optr = builder.bitcast(oa.data, v16.as_pointer())
        for j, acc in enumerate(accs):
            builder.store(builder.load(acc), builder.gep(optr, [context.get_constant(types.intp, j)]), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _amx_config(typingctx, cfg):
    """Load the tile configuration ``cfg`` (64 bytes, :data:`AMX_CONFIG`): ``ldtilecfg``."""
    sig = types.void(cfg)

    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [i8p]), "ldtilecfg ($0)", "r,~{memory}", side_effect=True)
        builder.call(asm, [builder.bitcast(a.data, i8p)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _amx_release(typingctx):
    """Give the tile state back (``tilerelease``)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "tilerelease", "~{memory}", side_effect=True)
        builder.call(asm, [])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _amx_dots(typingctx, qwords, q0, blk, group, out):
    """``out[m, r] = sum_c qwords[q0 + m, c] . blk[group, c, r]`` for ``m < 16``, ``r < 16`` (int32),
    the same sums as :func:`_vnni512_tile`, with AMX: per 64 bytes of the rows, one ``tdpbusd``
    of the 16 queries' bytes (unsigned) by the 16 rows' (signed, four to a word, as ``blk`` holds
    them: the tile's row ``c`` is words ``c`` of the 16 rows). ``qwords``: rows ``q0 .. q0 + 15``
    must exist; ``out``: (16, 16) int32, C-contiguous. The configuration is :data:`AMX_CONFIG`.
    """
    sig = types.void(qwords, q0, blk, group, out)

    def codegen(context, builder, signature, args):
        qty, _, bty, _, oty = signature.args
        qa = context.make_array(qty)(context, builder, args[0])
        ba = context.make_array(bty)(context, builder, args[2])
        oa = context.make_array(oty)(context, builder, args[4])
        zero = context.get_constant(types.intp, 0)
        i8p = ir.IntType(8).as_pointer()
        i64 = ir.IntType(64)
        qp = builder.bitcast(cgutils.get_item_pointer(context, builder, qty, qa, [args[1], zero], wraparound=False), i8p)
        bp = builder.bitcast(cgutils.get_item_pointer(context, builder, bty, ba, [args[3], zero, zero], wraparound=False), i8p)
        qstride = builder.mul(builder.extract_value(qa.shape, 1), context.get_constant(types.intp, 4))
        chunks = builder.udiv(builder.extract_value(ba.shape, 1), context.get_constant(types.intp, 16))
        outs = ir.LiteralStructType([i8p, i8p, i64])
        asm = ir.InlineAsm(
            ir.FunctionType(outs, [i8p, i64, i8p, i64, i8p, i64]),
            "tilezero %tmm0\n"
            "1:\n"
            "tileloadd ($0,$4,1), %tmm1\n"
            "tileloadd ($1,$8,1), %tmm2\n"
            "tdpbusd %tmm2, %tmm1, %tmm0\n"
            "add $$64, $0\n"
            "add $$1024, $1\n"
            "dec $2\n"
            "jnz 1b\n"
            "tilestored %tmm0, ($7,$8,1)\n",
            "=&r,=&r,=&r,0,r,1,2,r,r,~{memory},~{dirflag},~{fpsr},~{flags}",
            side_effect=True,
        )
        builder.call(asm, [qp, qstride, bp, chunks, builder.bitcast(oa.data, i8p), context.get_constant(types.intp, 64)])
        return context.get_dummy_value()

    return sig, codegen


def _emit_scored(context, builder, accs, group, q0, sargs, stypes) -> None:
    """IR scoring ``TILE_QUERIES`` accumulators (pointers to 16 int32 lanes: query ``q0 + j`` · the
    16 rows of tile ``group``) into ``out_s`` and ``out_bits`` (see :func:`_vnni512_tile_scored`).
    ``sargs`` / ``stypes``: boff, bscale, qs32, thr, masks, mrows, mcol, out_s, out_bits."""
    offty, scty, qsty, thty, mty, mrty, _, osty, obty = stypes
    offa = context.make_array(offty)(context, builder, sargs[0])
    sca = context.make_array(scty)(context, builder, sargs[1])
    qsa = context.make_array(qsty)(context, builder, sargs[2])
    tha = context.make_array(thty)(context, builder, sargs[3])
    ma = context.make_array(mty)(context, builder, sargs[4])
    mra = context.make_array(mrty)(context, builder, sargs[5])
    mcol = sargs[6]
    osa = context.make_array(osty)(context, builder, sargs[7])
    oba = context.make_array(obty)(context, builder, sargs[8])
    i32 = ir.IntType(32)
    f32 = ir.FloatType()
    v16 = ir.VectorType(i32, 16)
    f16 = ir.VectorType(f32, 16)
    b16 = ir.VectorType(ir.IntType(8), 16)
    fundef = ir.Constant(f16, ir.Undefined)
    splat = ir.Constant(v16, [0] * 16)
    idx0 = context.get_constant(types.int32, 0)
    r0 = builder.mul(group, context.get_constant(types.intp, TILE_ROWS))
    offv = builder.load(builder.bitcast(builder.gep(offa.data, [r0]), v16.as_pointer()), align=4)
    scv = builder.load(builder.bitcast(builder.gep(sca.data, [r0]), f16.as_pointer()), align=4)
    mstride = builder.extract_value(ma.strides, 0)
    mbase = builder.bitcast(ma.data, ir.IntType(8).as_pointer())
    optr = builder.bitcast(osa.data, f16.as_pointer())
    zero8 = ir.Constant(b16, None)
    for j, acc in enumerate(accs):
        qj = builder.add(q0, context.get_constant(types.intp, j))
        f = builder.sitofp(builder.sub(builder.load(acc, align=4), offv), f16)
        qs = builder.load(builder.gep(qsa.data, [qj]))
        t = builder.load(builder.gep(tha.data, [qj]))
        qsv = builder.shuffle_vector(builder.insert_element(fundef, qs, idx0), fundef, splat)
        tv = builder.shuffle_vector(builder.insert_element(fundef, t, idx0), fundef, splat)
        sc = builder.fmul(scv, builder.fmul(qsv, f))
        builder.store(sc, builder.gep(optr, [context.get_constant(types.intp, j)]), align=4)
        ge = builder.fcmp_ordered(">=", sc, tv)
        mrow = builder.load(builder.gep(mra.data, [qj]))
        mp = builder.gep(mbase, [builder.add(builder.mul(mrow, mstride), mcol)])
        mv = builder.load(builder.bitcast(mp, b16.as_pointer()), align=1)
        hit = builder.and_(ge, builder.icmp_unsigned("!=", mv, zero8))
        bits = builder.zext(builder.bitcast(hit, ir.IntType(16)), i32)
        builder.store(bits, builder.gep(oba.data, [context.get_constant(types.intp, j)]))


@intrinsic
def _vnni512_tile_scored(typingctx, blk, group, qwords, q0, boff, bscale, qs32, thr, masks, mrows, mcol, out_s, out_bits):
    """:func:`_vnni512_tile`, then per query ``j`` and row ``r`` of the tile, in vector registers:
    ``out_s[j, r] = bscale[16 group + r] * (qs32[q0 + j] * float32(acc - boff[16 group + r]))``, and bit
    ``r`` of ``out_bits[j]`` set when ``out_s[j, r] >= thr[q0 + j]`` and ``masks[mrows[q0 + j], mcol + r] != 0``.

    The float operations are those of the scalar kernels (int32 to float32, two float32 products),
    so the scores are the same. All 16 rows of the tile must exist in ``masks`` (a full tile).
    """
    sig = types.void(blk, group, qwords, q0, boff, bscale, qs32, thr, masks, mrows, mcol, out_s, out_bits)

    def codegen(context, builder, signature, args):
        bty, _, qty = signature.args[:3]
        accs = _emit_tile_sums(context, builder, bty, args[0], args[1], qty, args[2], args[3])
        _emit_scored(context, builder, accs, args[1], args[3], args[4:], signature.args[4:])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _amx_tile_scored(typingctx, sums, jbase, group, q0, boff, bscale, qs32, thr, masks, mrows, mcol, out_s, out_bits):
    """:func:`_vnni512_tile_scored` of sums already made: ``sums[group, jbase + j]`` (16 int32) is
    query ``q0 + j`` · the 16 rows of tile ``group`` (``sums``: (groups, 16, 16) int32, C-contiguous,
    filled by :func:`_amx_dots`)."""
    sig = types.void(sums, jbase, group, q0, boff, bscale, qs32, thr, masks, mrows, mcol, out_s, out_bits)

    def codegen(context, builder, signature, args):
        sty = signature.args[0]
        sa = context.make_array(sty)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        v16p = ir.VectorType(ir.IntType(32), 16).as_pointer()
        accs = []
        for j in range(TILE_QUERIES):
            row = builder.add(args[1], context.get_constant(types.intp, j))
            ptr = cgutils.get_item_pointer(context, builder, sty, sa, [args[2], row, zero], wraparound=False)
            accs.append(builder.bitcast(ptr, v16p))
        _emit_scored(context, builder, accs, args[2], args[3], args[4:], signature.args[4:])
        return context.get_dummy_value()

    return sig, codegen


# --- kernels ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True, fastmath=True)
def _dot_qw(x, qw):
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
            s = scale[row] * (qs * np.float32(_dot_qw(q8[row], qw)))
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
            s = scale[row] * (qs * np.float32(_dot_qw(q8[row], qw)))
            if s >= threshold:
                if n_out == out.shape[0]:
                    return -1
                out[n_out] = g
                n_out += 1
    return n_out


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
                    s = scale[row] * (qs * np.float32(_dot_qw(q8[row], qws[b])))
                    if m < k or s > hs[0] or (s == hs[0] and g > hi[0]):
                        m = heap_push(hs, hi, m, k, s, g)
            heap_n[b] = m


if HAS_VNNI:

    @njit(cache=True, nogil=True, inline="always")
    def _vnni_int8(q8, row, hi, rowsum):
        """``q8[row] · qw`` for an int8 query (``hi = qw + 128``). Separate from the int16 one:
        a run-time choice inside the row loop measured 3x slower."""
        return np.int32(_vnni_dot(q8, row, hi) - 128 * np.int64(rowsum[row]))

    @njit(cache=True, nogil=True, inline="always")
    def _vnni_high(q8, row, hi, rowsum):
        """The high-byte half of ``q8[row] · qw`` for an int16 query (bytes of :func:`vnni_bytes`):
        ``256 * (q8[row] · (qw >> 8))`` (int64); the whole is ``high + q8[row] · lo``."""
        return (_vnni_dot(q8, row, hi) - 128 * np.int64(rowsum[row])) * 256

    @njit(cache=True, nogil=True, inline="always")
    def _high_bound(high, row, rowsum, l1):
        """The largest ``q8[row] · qw`` can be given its high half: ``qw``'s low bytes are 0..255,
        so they add at most 255 x the row's positive bytes, ``(sum |q8| + sum q8) / 2``."""
        return high + 255 * ((np.int64(l1[row]) + rowsum[row]) >> 1)

    @njit(cache=True, nogil=True)
    def masked_dot_topk_vnni(q8, scale, rowsum, l1, hi, lo, qscale, mask, base, k, heap_scores, heap_ids, n_heap, rows, order, start, stop):
        """:func:`masked_dot_topk_q8` with ``vpdpbusd`` and prefetching; ``rows``: scratch (n,) int64.

        Once the heap is full, a row whose high half bounds its score below the heap's root
        skips the low half (about 99% of the rows on the bench workload): half the work, and
        the same heap, since the bound is exact in integers and float rounding is monotone.
        """
        qs = np.float32(qscale)
        m = 0
        for row in range(start, stop):  # candidate rows first: their addresses feed the prefetcher
            rows[m] = row
            m += 1 if mask[base + order[row]] else 0
        for i in range(min(PREFETCH_AHEAD, m)):
            _prefetch_row(q8, rows[i])
        for i in range(m):
            if i + PREFETCH_AHEAD < m:
                _prefetch_row(q8, rows[i + PREFETCH_AHEAD])
            row = rows[i]
            high = _vnni_high(q8, row, hi, rowsum)
            if n_heap == k and scale[row] * (qs * np.float32(_high_bound(high, row, rowsum, l1))) < heap_scores[0]:
                continue
            g = base + order[row]
            s = scale[row] * (qs * np.float32(np.int32(high + _vnni_dot(q8, row, lo))))
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
                s = scale[row] * (qs * np.float32(np.int32(high + _vnni_dot(q8, row, lo))))
                if s >= threshold:
                    if n_out == out.shape[0]:
                        return -1
                    out[n_out] = g
                    n_out += 1
        return n_out

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
    masked_dot_topk_vnni = masked_dot_above_vnni = batch_scan_vnni = None


@njit(cache=True, nogil=True)
def _tile_block(q32, r0, r1, blk):
    """Rows ``r0 .. r1`` of ``q32`` (the int8 rows as int32 words) into ``blk``'s layout (see :func:`_vnni512_tile`), zero-padded."""
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


@intrinsic
def _lowest_bit(typingctx, x):
    """The index of the lowest set bit of an int32 (``tzcnt``)."""

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

    return types.int32(types.int32), codegen


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
        (:func:`_vnni512_tile_scored`: every row, candidate or not, which costs less than choosing).
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
        # 16 queries by each tile of the block are made first, 16 x 16 at a time (_amx_dots), and
        # each half of them scored as the VNNI tiles are (_amx_tile_scored): the same numbers.
        amx = amx and n_qt % AMX_QUERIES == 0 and q32.shape[1] % 16 == 0 and q32.shape[1] > 0  # whole 64-byte tiles, at least one
        sums = np.empty((BATCH_ROWS // TILE_ROWS, AMX_QUERIES, TILE_ROWS), dtype=np.int32)
        if amx:
            _amx_config(amx_config)
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
                        _amx_dots(qwords, q0, blk, g, sums[g])
                for g in range(n_groups):
                    g0 = r0 + g * TILE_ROWS
                    g1 = min(r1, g0 + TILE_ROWS)
                    if g0 >= gstop[q0 // TILE_QUERIES]:
                        break
                    if g1 - g0 == TILE_ROWS and amx and permuted:
                        _amx_tile_scored(sums, jbase, g, q0, boff, bscale, qs32, thr, stair, srows, g0, out_s, out_bits)
                    elif g1 - g0 == TILE_ROWS and amx:
                        _amx_tile_scored(sums, jbase, g, q0, boff, bscale, qs32, thr, masks, mrows, base + g0, out_s, out_bits)
                    elif g1 - g0 == TILE_ROWS and permuted:
                        _vnni512_tile_scored(blk, g, qwords, q0, boff, bscale, qs32, thr, stair, srows, g0, out_s, out_bits)
                    elif g1 - g0 == TILE_ROWS:
                        _vnni512_tile_scored(blk, g, qwords, q0, boff, bscale, qs32, thr, masks, mrows, base + g0, out_s, out_bits)
                    else:  # the segment's last, partial tile: scored here
                        _vnni512_tile(blk, g, qwords, q0, acc)
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
                            r = _lowest_bit(bits)
                            bits &= bits - 1
                            gid = base + order[g0 + r]
                            if permuted:
                                _prefetch(masks[mask_rows[b]], gid)
                            pend_b[n_pend] = b
                            pend_g[n_pend] = gid
                            pend_s[n_pend] = out_s[j, r]
                            n_pend += 1
                    if n_pend > PENDING - TILE_QUERIES * TILE_ROWS:
                        n_pend = _take_pending(pend_b, pend_g, pend_s, n_pend, permuted, masks, mask_rows, ks, floors, buf, fill, tkey, thr, ubits, sbits)
            n_pend = _take_pending(pend_b, pend_g, pend_s, n_pend, permuted, masks, mask_rows, ks, floors, buf, fill, tkey, thr, ubits, sbits)
        if amx:
            _amx_release()
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
                _sift_down(hs, hi, m, i)
            heap_n[b] = m

else:
    batch_scan_vnni512 = None


def _vnni_ok(q8) -> bool:
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

    def scan(self, q8, scale, stats, mask, base, k, heap_scores, heap_ids, n_heap, order=None, span=None) -> int:
        """Offer the segment's masked rows to the heap; the fastest kernel this machine has.

        ``order``: the segment row of each stored row of ``q8`` (None: row order); ``span``:
        ``(start, stop)``, the stored rows to scan, which must hold every candidate (None: all).
        """
        order, start, stop = _order_span(q8, order, span)
        if self.precise and _vnni_ok(q8):
            rows = _rows_scratch(len(q8))
            return masked_dot_topk_vnni(
                q8, scale, stats[0], stats[1], self.hi, self.lo, self.qscale, mask, base, k, heap_scores, heap_ids, n_heap, rows, order, start, stop
            )
        return masked_dot_topk_q8(q8, scale, self.qw, self.qscale, mask, base, k, heap_scores, heap_ids, n_heap, order, start, stop)

    def above(self, q8, scale, stats, mask, base, threshold: float, out: np.ndarray, n_out: int, order=None, span=None) -> int:
        """Append the masked rows scoring ``>= threshold`` (approximately) to ``out``; -1 when it
        fills. ``order``, ``span``: as in :meth:`scan`."""
        order, start, stop = _order_span(q8, order, span)
        t = np.float32(threshold)
        if t > threshold:  # round down: a row at the threshold must not be missed
            t = np.nextafter(t, np.float32(-np.inf))
        if self.precise and _vnni_ok(q8):
            return masked_dot_above_vnni(q8, scale, stats[0], stats[1], self.hi, self.lo, self.qscale, mask, base, t, out, n_out, order, start, stop)
        return masked_dot_above_q8(q8, scale, self.qw, self.qscale, mask, base, t, out, n_out, order, start, stop)

    def error_bound(self, stats) -> float:
        return error_bound(stats, self.query, self.qscale)


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


def tiled_scan_ok(q8, base: int) -> bool:
    """Whether :func:`batch_scan` runs the tiled kernel on this segment (and so takes ``floors``)."""
    return HAS_VNNI512 and _vnni_ok(q8) and base + len(q8) < 2**32


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
    if _vnni_ok(q8):
        batch_scan_vnni(q8, scale, stats[0], queries.hi[:n_q], queries.qscale, masks, base, k, heap_s, heap_i, heap_n, order)
    else:
        batch_scan_q8(q8, scale, queries.qw, queries.qscale, masks, base, k, heap_s, heap_i, heap_n, order)
