"""Writes tests/data/mix64_row_order and its .expected.json: a store whose files carry sha256 and
mix64 checksums (no wide64) and whose int8 copy of the embeddings is in row order (no order or
date columns). Written by commit f9ac388 (the last before 3739f0b stored the int8 copy in date
order; mix64 since 8b50f5d), its code importable as ``mempp``:

    git worktree add --detach /tmp/old-f9ac388 f9ac388
    for p in kernels storage bench; do ln -s ../$p /tmp/old-f9ac388/engine/$p; done
    mkdir /tmp/old-f9ac388-pkg && ln -s /tmp/old-f9ac388/engine /tmp/old-f9ac388-pkg/mempp
    PYTHONPATH=/tmp/old-f9ac388-pkg:tests/data python tests/data/make_mix64_row_order.py
"""

from pathlib import Path

from oldstore import write_store

write_store(Path(__file__).parent / "mix64_row_order", thread_context=True)
