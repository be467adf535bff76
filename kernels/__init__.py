"""Numeric kernels of mempp: pure functions on numpy arrays, compiled by numba.

Kernels take arrays and scalars only (no Arrow, roaring or I/O), write into
caller-owned buffers, and are compiled with ``cache=True`` so a process pays
the compile cost once per machine, not once per start.

Ranking convention shared by every kernel: a higher score ranks first and,
on equal scores, the higher document index (the later-ingested document)
ranks first.

Owns the package's public kernel names (``__all__``), and installs the cache locator
(``jitcache``) before any kernel is decorated.

Never imports: precompile, mempp.storage, mempp.store, pyarrow.
"""

import os as _os

from . import jitcache

jitcache.install(_os.path.dirname(__file__))  # before any kernel below is decorated

from .topk import TopK, heap_push, heap_push_many, heap_sorted
from .bm25 import (
    bm25_accumulate,
    bm25_accumulate_dense,
    bm25_idf,
    bm25_norms,
    bm25_probe,
    clear_touched,
    dense_topk,
    topk_touched,
)
from .cosine import batch_topk, masked_dot_topk, quantize_rows, rescore_exact
from .int8dot import Int8Batch, Int8Query, batch_scan, has_vnni, identity_order, masked_dot_above_q8, masked_dot_topk_q8, quantize_query, row_stats, segment_stats
from .context import (
    candidate_moments, context_bound, context_seeds, context_topk, fixed_sums, fixed_sums_masked, masked_dot_dense, masked_dot_max,
    merge_sums, moments_from_sums, neighbourhood, sparse_moments, thread_members, with_neighbours,
)

__all__ = [
    "TopK",
    "heap_push",
    "heap_push_many",
    "heap_sorted",
    "bm25_accumulate",
    "bm25_accumulate_dense",
    "bm25_norms",
    "bm25_probe",
    "dense_topk",
    "quantize_rows",
    "masked_dot_topk_q8",
    "masked_dot_above_q8",
    "batch_scan",
    "identity_order",
    "row_stats",
    "segment_stats",
    "Int8Query",
    "Int8Batch",
    "has_vnni",
    "quantize_query",
    "rescore_exact",
    "batch_topk",
    "bm25_idf",
    "topk_touched",
    "clear_touched",
    "masked_dot_topk",
    "masked_dot_dense",
    "masked_dot_max",
    "candidate_moments",
    "context_bound",
    "fixed_sums",
    "fixed_sums_masked",
    "merge_sums",
    "moments_from_sums",
    "sparse_moments",
    "neighbourhood",
    "thread_members",
    "with_neighbours",
    "context_topk",
    "context_seeds",
]
