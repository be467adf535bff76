"""What an x86 CPU without VNNI offers the int8 scans (AVX2), and the intrinsics that use it.

Owns the host feature detection (``MEMPP_AVX2=0`` turns it off; nothing host-only when numba
compiles for another CPU) and the numba ``@intrinsic`` code generators of the 256-bit int8
dot products, exact in integers, so the same numbers as the portable kernels and VNNI:

- :func:`avx2_dot16`: an int8 row by an int16 query (the single query's ``precise`` form, or
  an int8 query held as int16): 16 row bytes sign-extended to int16 (``vpmovsxbw``), one
  ``vpmaddwd`` with 16 query words, 8 int32 sums;
- :func:`avx2_dot8`: an int8 row by an int8 query (``|qw| <= 127``, bulk scoring): ``vpmaddubsw`` of the
  row's magnitudes (unsigned, at most 128) by the query bytes carrying the row's signs
  (``vpsignb``), whose pairs of products are at most 2 x 128 x 127 = 32512 and so never
  saturate, then ``vpmaddwd`` by ones into int32: 32 bytes of the row per step.

Both cover the row's first ``width - width % 32`` bytes; the caller adds the rest.
Imports only numpy, numba, llvmlite and ``intrinsics`` (the host CPU check).

Never imports: vnni, int8scan, int8batch, int8quant, mempp.storage.
"""

from __future__ import annotations


from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .intrinsics import host_cpu_features

STEP = 32  # row bytes per step of both dot products


def _host_has_avx2() -> bool:
    return bool(host_cpu_features("MEMPP_AVX2").get("avx2"))


HAS_AVX2 = _host_has_avx2()


def has_avx2() -> bool:
    """Whether the int8 scans run the AVX2 kernels on this machine (where VNNI does not serve)."""
    return HAS_AVX2


def _contiguous(arr, q) -> bool:
    """The intrinsics read whole rows and the query as vectors: both C-contiguous (else no match)."""
    return isinstance(arr, types.Array) and isinstance(q, types.Array) and arr.ndim == 2 and arr.layout == "C" and q.layout == "C"


def _row_and_query(context, builder, signature, args):
    aryty, _, qty = signature.args
    ary = context.make_array(aryty)(context, builder, args[0])
    qa = context.make_array(qty)(context, builder, args[2])
    zero = context.get_constant(types.intp, 0)
    rowp = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1], zero], wraparound=False)
    width = builder.extract_value(ary.shape, 1)
    full = builder.and_(width, context.get_constant(types.intp, -STEP))
    return builder.bitcast(rowp, ir.IntType(8).as_pointer()), qa.data, full, zero


def _reduce(builder, accs):
    v8 = ir.VectorType(ir.IntType(32), 8)
    total = builder.load(accs[0])
    for acc in accs[1:]:
        total = builder.add(total, builder.load(acc))
    red = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [v8]), "llvm.vector.reduce.add.v8i32")
    return builder.sext(builder.call(red, [total]), ir.IntType(64))


@intrinsic
def avx2_dot16(typingctx, arr, row, qw):
    """``sum(arr[row, :w] * qw[:w])`` as int64, ``w = width - width % 32`` (``arr`` int8 2-D
    C-contiguous, ``qw`` int16 C-contiguous): ``vpmovsxbw`` + ``vpmaddwd``."""
    if not _contiguous(arr, qw):
        return None
    sig = types.int64(arr, row, qw)

    def codegen(context, builder, signature, args):
        rowp, qdata, full, zero = _row_and_query(context, builder, signature, args)
        qp = builder.bitcast(qdata, ir.IntType(16).as_pointer())
        v16b = ir.VectorType(ir.IntType(8), 16)
        v16w = ir.VectorType(ir.IntType(16), 16)
        v8 = ir.VectorType(ir.IntType(32), 8)
        madd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v16w, v16w]), "llvm.x86.avx2.pmadd.wd")
        accs = [cgutils.alloca_once_value(builder, ir.Constant(v8, None)) for _ in range(2)]
        with cgutils.for_range_slice(builder, zero, full, context.get_constant(types.intp, STEP)) as (off0, _):
            for u, acc in enumerate(accs):
                off = builder.add(off0, context.get_constant(types.intp, 16 * u))
                x = builder.load(builder.bitcast(builder.gep(rowp, [off]), v16b.as_pointer()), align=1)
                q = builder.load(builder.bitcast(builder.gep(qp, [off]), v16w.as_pointer()), align=1)
                builder.store(builder.add(builder.load(acc), builder.call(madd, [builder.sext(x, v16w), q])), acc)
        return _reduce(builder, accs)

    return sig, codegen


@intrinsic
def avx2_dot8(typingctx, arr, row, qb):
    """``sum(arr[row, :w] * qb[:w])`` as int64, ``w = width - width % 32`` (``arr`` int8 2-D
    C-contiguous; ``qb`` int8 C-contiguous, every byte in -127..127): ``vpabsb``, ``vpsignb``,
    ``vpmaddubsw``, ``vpmaddwd``. A row byte of -128 is exact too (its magnitude 128 unsigned)."""
    if not _contiguous(arr, qb):
        return None
    sig = types.int64(arr, row, qb)

    def codegen(context, builder, signature, args):
        rowp, qdata, full, zero = _row_and_query(context, builder, signature, args)
        qp = builder.bitcast(qdata, ir.IntType(8).as_pointer())
        v32b = ir.VectorType(ir.IntType(8), 32)
        v16w = ir.VectorType(ir.IntType(16), 16)
        v8 = ir.VectorType(ir.IntType(32), 8)
        sign = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v32b, [v32b, v32b]), "llvm.x86.avx2.psign.b")
        maddubs = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16w, [v32b, v32b]), "llvm.x86.avx2.pmadd.ub.sw")
        madd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v16w, v16w]), "llvm.x86.avx2.pmadd.wd")
        ones = ir.Constant(v16w, [1] * 16)
        acc = cgutils.alloca_once_value(builder, ir.Constant(v8, None))  # vpaddd's one cycle: no need of more
        with cgutils.for_range_slice(builder, zero, full, context.get_constant(types.intp, STEP)) as (off, _):
            x = builder.load(builder.bitcast(builder.gep(rowp, [off]), v32b.as_pointer()), align=1)
            q = builder.load(builder.bitcast(builder.gep(qp, [off]), v32b.as_pointer()), align=1)
            neg = builder.icmp_signed("<", x, ir.Constant(v32b, None))
            ax = builder.select(neg, builder.sub(ir.Constant(v32b, None), x), x)  # vpabsb: -128 -> 0x80 = 128 unsigned
            pairs = builder.call(maddubs, [ax, builder.call(sign, [q, x])])
            builder.store(builder.add(builder.load(acc), builder.call(madd, [pairs, ones])), acc)
        return _reduce(builder, [acc])

    return sig, codegen
