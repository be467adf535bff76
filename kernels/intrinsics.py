"""LLVM intrinsics the kernels share: prefetches, bit counts, raw addresses.

Owns the small numba ``@intrinsic`` helpers that emit one LLVM instruction or call each
(``llvm.prefetch``, ``ctpop``, ``cttz``, ``inttoptr``), for the scan kernels of ``maxscore``
and the int8 modules, and the host CPU feature check the VNNI and AVX2 paths share. Imports only numba and llvmlite; never another mempp module.

Never imports: topk, maxscore, vnni, mempp.storage.
"""

from __future__ import annotations

import os

from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.core.extending import intrinsic


@intrinsic
def voidptr(typingctx, addr):
    """An int64 address as a void pointer (for ``numba.carray``)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return types.voidptr(types.int64), codegen


@intrinsic
def popcount(typingctx, x):
    """Set bits of a uint64."""

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return types.uint64(types.uint64), codegen


@intrinsic
def prefetch(typingctx, arr, idx):
    """Ask for the cache line of ``arr[idx]`` (no fault if out of bounds: a prefetch is a hint).

    The leg's random loads (norms, mask, bitsets of rows taken from postings) miss the cache
    after the vector scan; asking a few postings ahead overlaps those misses.
    """

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i32 = cgutils.int32_t
        fnty = cgutils.ir.FunctionType(cgutils.ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, cgutils.voidptr_t), i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()

    return types.void(arr, idx), codegen


@intrinsic
def prefetch_row(typingctx, arr, row):
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
def lowest_bit(typingctx, x):
    """The index of the lowest set bit of an int32 (``tzcnt``)."""

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

    return types.int32(types.int32), codegen


def host_cpu_features(switch: str) -> dict:
    """This CPU's features as LLVM names them (``{"avx2": True, ...}``), or none when the
    environment variable ``switch`` is "0" or numba compiles for another CPU (portable caches:
    no host-only instructions then)."""
    if os.environ.get(switch, "1") == "0":
        return {}
    if config.CPU_NAME not in (None, "host") or config.CPU_FEATURES is not None:
        return {}
    try:
        import llvmlite.binding as llvm

        return dict(llvm.get_host_cpu_features())
    except Exception:  # pragma: no cover - llvmlite without host detection
        return {}
