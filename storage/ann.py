"""ANN indexes (hnswlib HNSW, inner product) over ranges of sealed documents.

An index covers the doc ids ``[first, first + n)`` (labels are doc ids) and is derived
data: built aside from the embeddings already committed, written under a fresh name,
fsynced and checksummed like every store file, and published by a manifest; queries
never wait for one (documents newer than every index are scanned exactly). hnswlib
writes its files in place with no checksum and can crash on a damaged one
(RELIABILITY.md), so the bytes are checked against the manifest before hnswlib sees them,
and a damaged index is dropped (the planner scans exactly) rather than loaded.

Owns the HNSW parameters (``DEFAULT_M``, ``DEFAULT_EF_CONSTRUCTION``), building an index
(:func:`build`), its bytes (:func:`to_bytes`) and loading checked bytes (:func:`load`). It is the
only module that imports ``hnswlib``.

Never imports: manifest, snapshot, commits, mempp.store, mempp.writer.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .resident import advise_if_larger

DEFAULT_M = 32  # 16 (efC 100) left clustered 1M queries stranded: recall@10 0.94 with >50% candidates
DEFAULT_EF_CONSTRUCTION = 200


@dataclass
class AnnIndex:
    first: int  # first doc id covered
    n: int  # documents covered
    name: str  # file, relative to the store
    params: dict
    ref: object = None  # its FileRef (size, checksums)
    index: object | None = None  # hnswlib.Index once loaded
    failed: str | None = None  # why it could not be loaded (the planner scans exactly)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def load_in_background(self, store: Path, dim: int) -> None:
        """Verify the file's checksum, then load it, in a daemon thread: opening never waits for it."""
        with self._lock:
            if self._thread is not None or self.index is not None or self.failed is not None:
                return
            self._thread = threading.Thread(target=self._load, args=(store, dim), name=f"mempp-ann-{self.name}", daemon=True)
            self._thread.start()

    def _load(self, store: Path, dim: int) -> None:
        from .files import verify_files

        try:
            bad = verify_files(store, [self.ref])
            if bad:
                self.failed = str(bad[self.ref.name])  # derived data: the next build_ann replaces it
                return
            self.index = load(store / self.name, dim, self.n)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the exact scan in charge
            self.failed = f"{store / self.name}: {exc}"

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background load; True when the index is ready."""
        t = self._thread
        if t is not None:
            t.join(timeout)
        return self.index is not None

    def knn(self, query: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``k`` (doc ids, inner products) best first; hnswlib's search is thread-safe for reads."""
        k = max(1, min(int(k), self.n))
        self.index.set_ef(max(int(ef), k))  # ef is per index; concurrent queries may raise it, never below k
        labels, dist = self.index.knn_query(query.reshape(1, -1), k=k, num_threads=1)
        return labels[0].astype(np.int64), (1.0 - dist[0]).astype(np.float32)


def build(
    parts: list[np.ndarray], first: int, m: int = DEFAULT_M, ef_construction: int = DEFAULT_EF_CONSTRUCTION, workers: int = 0,
    store_bytes: int = 0,
) -> "object":
    """A new hnswlib index over the rows of ``parts`` in order (doc ids ``first ..``), fed in
    slices so the (memory-mapped) embeddings are never copied whole. ``store_bytes``: the float32
    embeddings of the store they come from (read once, in order, where it is larger than memory)."""
    import hnswlib

    n = sum(len(p) for p in parts)
    dim = parts[0].shape[1]
    index = hnswlib.Index(space="ip", dim=dim)
    index.init_index(max_elements=max(n, 1), M=int(m), ef_construction=int(ef_construction), random_seed=0)
    index.set_num_threads(workers or os.cpu_count() or 1)
    step = 50_000
    label = first
    advise_if_larger(parts, store_bytes, "sequential")
    for part in parts:
        for a in range(0, len(part), step):
            rows = np.ascontiguousarray(part[a : a + step], dtype=np.float32)
            index.add_items(rows, np.arange(label, label + len(rows)))
            label += len(rows)
    return index


def to_bytes(index: object, scratch: Path) -> bytes:
    """hnswlib only saves to a path: save to ``scratch`` (inside the store), read it back, remove it."""
    try:
        index.save_index(str(scratch))
        return scratch.read_bytes()
    finally:
        try:
            scratch.unlink()
        except FileNotFoundError:
            pass


def load(path: Path, dim: int, n: int) -> object:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=dim)
    index.load_index(str(path), max_elements=n)
    return index
