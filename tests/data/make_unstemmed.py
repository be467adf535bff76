"""Writes tests/data/unstemmed and unstemmed.expected.json: a store from before stemming, whose
manifest's analyzer has no "stem" (so it reads as unstemmed). Written by commit b49644a (the
last before 631cafb added Snowball stemming), its code importable as ``mempp``:

    git worktree add --detach /tmp/old-b49644a b49644a
    for p in kernels storage bench; do ln -s ../$p /tmp/old-b49644a/engine/$p; done
    mkdir /tmp/old-b49644a-pkg && ln -s /tmp/old-b49644a/engine /tmp/old-b49644a-pkg/mempp
    PYTHONPATH=/tmp/old-b49644a-pkg:tests/data python tests/data/make_unstemmed.py

That code has no thread context at query time: its answers are those of context=[] today.
"""

from pathlib import Path

from oldstore import write_store

write_store(Path(__file__).parent / "unstemmed", thread_context=False)
