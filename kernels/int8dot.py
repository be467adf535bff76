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
- on x86 CPUs with AVX2 but no VNNI (``avx2``): 16 row bytes sign-extended to int16 and one
  ``vpmaddwd`` with 16 query words (:func:`masked_dot_topk_avx2`, :func:`batch_scan_avx2`);
- elsewhere the portable kernel sums ``int32(x) * int32(qw)`` one byte at a time.

All give the same integers, so the same ranking; :func:`kernel_path` says which runs, and
``MEMPP_VNNI=0`` / ``MEMPP_AVX2=0`` turn the VNNI / AVX2 kernels off. :func:`batch_scan` scores many queries per
block of rows held in cache (bulk scoring); on CPUs with AMX-INT8 (and a Linux that grants the
tile state) its sums of 16 queries by 16 rows are one ``tdpbusd`` per 64 bytes of the rows
(:data:`HAS_AMX`; ``MEMPP_AMX=0`` turns it off), the same integers again.

The code is split by concern, and this module re-exports the public names of all five:
``int8quant`` (quantization, row statistics, the error bound), ``int8scan`` (one query:
:class:`Int8Query`), ``int8batch`` (many queries: :func:`batch_scan`, :class:`Int8Batch`) and
``vnni`` (CPU features and the VNNI/AMX intrinsics), ``avx2`` (the AVX2 intrinsics, for x86 CPUs
without VNNI). Imports only those modules.

Owns no kernel of its own: it is the one face of the int8 scans the engine imports.

Never imports: cosine, mempp.storage, mempp.store.
"""

from __future__ import annotations

from .avx2 import HAS_AVX2, has_avx2
from .int8batch import BATCH_ROWS, PENDING, Int8Batch, batch_kernel_path, batch_scan, batch_scan_avx2, batch_scan_q8, batch_scan_vnni, batch_scan_vnni512, tiled_scan_ok
from .int8quant import INT32_MAX, error_bound, quantize_query, row_stats, segment_stats, vnni_bytes
from .int8scan import (
    PREFETCH_AHEAD, Int8Query, candidate_rows, identity_order, kernel_path, listed_rows, masked_dot_above_avx2, masked_dot_above_q8, masked_dot_above_vnni, masked_dot_dense_avx2,
    masked_dot_dense_q8, masked_dot_dense_vnni, masked_dot_topk_avx2, masked_dot_topk_q8, masked_dot_topk_vnni,
)
from .vnni import AMX_CONFIG, AMX_QUERIES, HAS_AMX, HAS_VNNI, HAS_VNNI512, TILE_QUERIES, TILE_ROWS, UNROLL, has_vnni

__all__ = [
    "AMX_CONFIG", "AMX_QUERIES", "BATCH_ROWS", "HAS_AMX", "HAS_AVX2", "HAS_VNNI", "HAS_VNNI512", "INT32_MAX", "PENDING", "PREFETCH_AHEAD",
    "TILE_QUERIES", "TILE_ROWS", "UNROLL", "Int8Batch", "Int8Query", "batch_kernel_path", "batch_scan", "batch_scan_avx2", "batch_scan_q8", "batch_scan_vnni",
    "batch_scan_vnni512", "candidate_rows", "error_bound", "has_avx2", "has_vnni", "identity_order", "kernel_path", "listed_rows", "masked_dot_above_avx2", "masked_dot_above_q8",
    "masked_dot_above_vnni", "masked_dot_dense_avx2", "masked_dot_dense_q8", "masked_dot_dense_vnni", "masked_dot_topk_avx2", "masked_dot_topk_q8", "masked_dot_topk_vnni", "quantize_query", "row_stats", "segment_stats", "tiled_scan_ok", "vnni_bytes",
]
