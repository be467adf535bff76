"""Read advice for stores larger than memory (storage/resident.py).

A store whose float32 embeddings exceed half the machine's memory has them advised for random
reads (no readahead: the exact rescore reads scattered rows), and a merge or an ANN build advises
the rows it reads once in order for sequential reads. The oracle is the kernel's own record of
the advice: the ``VmFlags`` of the mapping in ``/proc/self/smaps`` (``rr``: random, ``sr``:
sequential). A store that fits is left as it was, and the advice changes no answer.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import mempp
from mempp.storage import resident
from mempp.storage.ann import build as ann_build

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")


def vm_flags(arr: np.ndarray) -> set[str]:
    """The VmFlags of the mapping that holds the first whole page inside ``arr``."""
    page = resident.PAGE
    addr = -(-arr.ctypes.data // page) * page
    flags: set[str] | None = None
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                a, b = (int(x, 16) for x in head.split("-"))
                inside = a <= addr < b
            elif inside and head == "VmFlags:":
                flags = set(line.split()[1:])
                break
    assert flags is not None, "no mapping holds the array"
    return flags


def build(path, n: int = 3000, dim: int = 64) -> np.ndarray:
    rng = np.random.default_rng(3)
    emb = rng.standard_normal((n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=dim)) as s:
        for a in range(0, n, 1000):  # three segments, each large enough for whole pages of rows
            s.add([{"id": f"d{i}", "text": f"word{i % 50} common"} for i in range(a, a + 1000)], embeddings=emb[a : a + 1000])
    return emb


def test_a_store_larger_than_memory_reads_its_rows_at_random(tmp_path, monkeypatch):
    emb = build(tmp_path / "s")
    with mempp.Store.open(tmp_path / "s", read_only=True) as fits:
        segs = [e.segment.embeddings for e in fits.searcher().snapshot.segments]
        assert all("rr" not in vm_flags(a) for a in segs), "a store that fits keeps the kernel's readahead"
        ann_build(segs, 0, m=8, ef_construction=20, store_bytes=fits.searcher().snapshot.embedding_bytes)
        assert all("sr" not in vm_flags(a) for a in segs), "nor does an ANN build change the advice of a store that fits"
        want = [[h.doc_id for h in fits.query("word7 common", embedding=emb[i], k=10)] for i in range(5)]
    monkeypatch.setattr(resident, "RANDOM_READS_SHARE", 0.0)  # every store is larger than memory now
    with mempp.Store.open(tmp_path / "s", read_only=True) as big:
        segs = [e.segment.embeddings for e in big.searcher().snapshot.segments]
        assert all("rr" in vm_flags(a) for a in segs)
        assert [[h.doc_id for h in big.query("word7 common", embedding=emb[i], k=10)] for i in range(5)] == want


def test_merge_and_ann_build_read_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(resident, "RANDOM_READS_SHARE", 0.0)
    build(tmp_path / "s")
    with mempp.Store.open(tmp_path / "s") as s:
        segs = [e.segment.embeddings for e in s.searcher().snapshot.segments]
        assert all("rr" in vm_flags(a) for a in segs)
        ann_build(segs, 0, m=8, ef_construction=20, store_bytes=s.searcher().snapshot.embedding_bytes)
        assert all("sr" in vm_flags(a) for a in segs), "the ANN build reads every row once, in order"
        s.build_ann(min_docs=1)
        assert all("rr" in vm_flags(a) for a in segs), "the version the build commits reads at random again"
        s.merge(force=True)
        assert all("sr" in vm_flags(a) for a in segs), "a merge reads its segments once, in order"
        merged = [e.segment.embeddings for e in s.searcher().snapshot.segments]
        assert all("rr" in vm_flags(a) for a in merged), "the merged segment is read at random again"


def test_advise_is_harmless_on_memory_and_on_nothing():
    arr = np.arange(1 << 16, dtype=np.float32)
    assert resident.advise(arr, "random") and resident.advise(arr, "sequential")
    assert np.array_equal(arr, np.arange(1 << 16, dtype=np.float32))
    assert not resident.advise(np.zeros(0, dtype=np.float32), "random")
