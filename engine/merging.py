"""Merging a store's segments: :meth:`MergePath.merge` and the writer's background merge thread.

Owns when and how a writer merges: the candidate run (``storage/merge.py``'s policy, or every
run between ANN barriers with ``force``), the merged unit written aside under no lock, its
publication in the writer's turn as a new version, the removal by name of the files it replaced,
and :class:`BackgroundMerges`, the thread that runs merges after commits
(``Store.open(merge="background")``). The merge policy itself and the merged files are
``storage/merge.py``'s.

Never imports: reads, planner, fusion, lexical, vector, supersession, onnxruntime.
"""

from __future__ import annotations

import collections
import threading
import time
import weakref

from mempp.storage import Snapshot, StoreError, StoreWriteError
from mempp.storage.manifest import Unit
from mempp.storage.merge import merged_unit, next_merge, publish_merge
from mempp.storage.writer import guarded

from .writes import _remove


class MergePath:
    """The merge methods of a :class:`~mempp.Store` (a mixin beside :class:`~mempp.writes.WritePath`)."""

    def merge(self, *, force: bool = False) -> dict:
        """Merge segments now, as the merge policy asks (``storage/merge.py``), until it asks for
        no more; ``force``: join every run of segments an ANN index does not separate into one.

        Each merge is published as a new version (readers see no change but fewer segments: the
        same documents, ids and scores; every earlier version still opens). Returns
        ``{"merges", "segments", "seconds"}``. A store opened with ``merge="background"`` (the
        default) does this after each commit in a thread of its own.
        """
        self._check_writable()
        t = time.perf_counter()
        done = 0
        with self._merge_lock:
            with self._write_mutex:
                self._begin_write()
            while True:
                cand = self._merge_candidate(force)
                if cand is None:
                    break
                self._merge_one(*cand)
                done += 1
        return {"merges": done, "segments": len(self._snap.segments), "seconds": round(time.perf_counter() - t, 3)}

    def _merge_candidate(self, force: bool) -> tuple | None:
        snap = self._snap
        state = snap.state
        if state is None or state.format == 1:
            return None
        if force:
            from mempp.storage.merge import barriers

            bars = barriers(state)
            i = 0
            while i < len(state.units):
                j = i + 1
                while j < len(state.units) and not bars[j - 1]:
                    j += 1
                if j - i >= 2:
                    return snap, state.units[i:j]
                i = j
            return None
        cand = next_merge(state)
        return None if cand is None else (snap, state.units[cand.start : cand.stop])

    def _merge_one(self, snap: Snapshot, units: list[Unit]) -> None:
        """Write the join of ``units`` (as ``snap`` maps them) aside, then publish it under the write mutex."""
        try:
            unit = guarded(self.path, lambda: merged_unit(self.path, snap, units))
        except BaseException as exc:
            if isinstance(exc, StoreWriteError) and exc.broken:
                self._broken = str(exc)
            raise
        with self._write_mutex:
            t0 = time.perf_counter()
            self._check_writable()
            before = self._snap.state
            try:
                state = guarded(self.path, lambda: publish_merge(self.path, before, units, unit))
            except BaseException as exc:
                self._stale = True
                if isinstance(exc, StoreWriteError) and exc.broken:
                    self._broken = str(exc)
                raise
            self._publish(state)
            self._merges.publishes.append((t0, time.perf_counter()))
        # The replaced units' files (and version files before a new checkpoint) are named by no
        # version from now on, and their names are never used again: removed outside the writer's
        # turn, if possible (the merge is durable either way; the next writer removes what is left).
        _remove(self.path, before.names() - state.names())


class BackgroundMerges:
    """The writer's merge thread: started when a commit leaves a merge due, it runs merges until
    none is due, then ends; ``stop`` waits for the merge under way (never more than one)."""

    def __init__(self, store: "MergePath") -> None:
        self._ref = weakref.ref(store)  # no cycle: a closed Store's mappings go when it does
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.error: BaseException | None = None
        self.done = 0
        self.publishes: collections.deque = collections.deque(maxlen=1 << 16)  # (start, end) perf_counter of each publish

    @property
    def _store(self):
        store = self._ref()
        if store is None:
            raise StoreError("the store is gone")
        return store

    def poke(self) -> None:
        state = self._store._snap.state
        if self._stopping or self.error is not None or state is None or next_merge(state) is None:
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._run, name="mempp-merge", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            store = self._store
            while not self._stopping:
                with store._merge_lock:
                    cand = store._merge_candidate(False)
                    if cand is None or self._stopping:
                        return
                    store._merge_one(*cand)
                    self.done += 1
        except BaseException as exc:  # noqa: BLE001 - kept for stats(); a failed fsync also stops writes (_broken)
            self.error = exc

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no merge is under way or due; True when so."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            t = self._thread
            if t is not None:
                t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
                if t.is_alive():
                    return False
            state = self._store._snap.state
            if self.error is not None or state is None or next_merge(state) is None:
                return True
            self.poke()
            if self._thread is t:
                return True

    def stop(self) -> None:
        self._stopping = True
        t = self._thread
        if t is not None:
            t.join()
