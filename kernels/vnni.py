"""What this CPU offers the int8 scans (VNNI, 512-bit VNNI, AMX-INT8) and the intrinsics that use it.

Owns the host feature detection (``MEMPP_VNNI=0`` / ``MEMPP_AMX=0`` turn them off; nothing
host-only when numba compiles for another CPU), the tile shapes and the AMX configuration, and
the numba ``@intrinsic`` code generators: the 256-bit ``vpdpbusd`` row dot product, the 512-bit
tile of 8 queries by 16 rows (summed, or summed and scored in registers) and the AMX ``tdpbusd``
tile as inline assembly. Imports only numpy, numba, llvmlite and ``intrinsics`` (the host CPU check).

Never imports: int8scan, int8batch, int8quant, mempp.storage.
"""

from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .intrinsics import host_cpu_features

UNROLL = 4  # 32-byte chunks per step of the VNNI dot product: rows must be a multiple of 128 bytes
TILE_ROWS = 16  # batch_scan's tiled kernel: rows per tile (the int32 lanes of a zmm register) ...
TILE_QUERIES = 8  # ... and queries per tile (one accumulator register each)


def _host_has_vnni() -> bool:
    feats = host_cpu_features("MEMPP_VNNI")
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
# The tile configuration for amx_dots: palette 1; tiles 0 (int32 sums), 1 (queries) and 2 (rows)
# each 16 rows of 64 bytes.
AMX_CONFIG = np.zeros(64, dtype=np.uint8)
AMX_CONFIG[0] = 1
AMX_CONFIG[16:22] = np.frombuffer(np.array([64, 64, 64], dtype="<u2").tobytes(), dtype=np.uint8)
AMX_CONFIG[48:51] = 16


def has_vnni() -> bool:
    """Whether the int8 scans run the VNNI kernels on this machine."""
    return HAS_VNNI


# --- VNNI intrinsics -----------------------------------------------------------------------


@intrinsic
def vnni_dot(typingctx, arr, row, qu):
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
    """IR of the tile's dot products (see :func:`vnni512_tile`): ``TILE_QUERIES`` allocas of
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
def vnni512_tile(typingctx, blk, group, qwords, q0, out):
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
def amx_tile_config(typingctx, cfg):
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
def amx_release(typingctx):
    """Give the tile state back (``tilerelease``)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "tilerelease", "~{memory}", side_effect=True)
        builder.call(asm, [])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def amx_dots(typingctx, qwords, q0, blk, group, out):
    """``out[m, r] = sum_c qwords[q0 + m, c] . blk[group, c, r]`` for ``m < 16``, ``r < 16`` (int32),
    the same sums as :func:`vnni512_tile`, with AMX: per 64 bytes of the rows, one ``tdpbusd``
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
    16 rows of tile ``group``) into ``out_s`` and ``out_bits`` (see :func:`vnni512_tile_scored`).
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
def vnni512_tile_scored(typingctx, blk, group, qwords, q0, boff, bscale, qs32, thr, masks, mrows, mcol, out_s, out_bits):
    """:func:`vnni512_tile`, then per query ``j`` and row ``r`` of the tile, in vector registers:
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
def amx_tile_scored(typingctx, sums, jbase, group, q0, boff, bscale, qs32, thr, masks, mrows, mcol, out_s, out_bits):
    """:func:`vnni512_tile_scored` of sums already made: ``sums[group, jbase + j]`` (16 int32) is
    query ``q0 + j`` · the 16 rows of tile ``group`` (``sums``: (groups, 16, 16) int32, C-contiguous,
    filled by :func:`amx_dots`)."""
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
