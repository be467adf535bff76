"""When the writer merges segments: ``Store.merge`` and the writer's background merge thread.

Owns :class:`Compaction`, the writer's part of merging (docs/DESIGN.md §5): the candidate run
(``storage/merge.py``'s policy, or every run between ANN barriers with ``force``), the merged
unit written aside under no lock, its publication in the writer's turn as a new version, the
removal by name of the files it replaced, and the thread that runs merges after commits
(``Store.open(merge="background")``). The merge policy itself and the merged files are
``storage/merge.py``'s.

Never imports: searcher, planner, fusion, lexical, vector, supersession, onnxruntime.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
import weakref
from typing import Any, Iterator

from mempp.storage import Snapshot, StoreError
from mempp.storage.fsutil import unlink
from mempp.storage.manifest import Unit
from mempp.storage.merge import barriers, merged_unit, next_merge, publish_merge

from .errors import ValidationError

MERGE_MODES = ("background", "manual")


class Compaction:
    """The merges of one :class:`~mempp.writer.Writer`: on demand (:meth:`merge`) and, with
    ``mode="background"``, in a thread started after commits (:meth:`poke`)."""

    def __init__(self, writer: Any, mode: str) -> None:
        if mode not in MERGE_MODES:
            raise ValidationError(f"expected one of {list(MERGE_MODES)}, got {mode!r}", field="merge")
        self._ref = weakref.ref(writer)  # no cycle: a closed Store's mappings go when it does
        self.mode = mode
        self._merge_lock = threading.Lock()  # one merge at a time
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.error: BaseException | None = None
        self.done = 0
        self.publishes: collections.deque = collections.deque(maxlen=1 << 16)  # (start, end) perf_counter of each publish

    @property
    def _writer(self) -> Any:
        writer = self._ref()
        if writer is None:
            raise StoreError("the store is gone")
        return writer

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No merge runs or publishes inside this block (an erasure rewrites units a merge reads)."""
        with self._merge_lock:
            yield

    def merge(self, force: bool = False) -> dict:
        """Merge now until the policy asks for no more (``Store.merge``); see there."""
        writer = self._writer
        writer.check_writable()
        t = time.perf_counter()
        done = 0
        with self._merge_lock:
            with writer.turn():
                writer.begin_write()
            while True:
                cand = self._candidate(force)
                if cand is None:
                    break
                self._merge_one(*cand)
                done += 1
        return {"merges": done, "segments": len(writer.snap.segments), "seconds": round(time.perf_counter() - t, 3)}

    def _candidate(self, force: bool) -> tuple | None:
        snap = self._writer.snap
        state = snap.state
        if state is None or state.format == 1:
            return None
        if force:
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
        """Write the join of ``units`` (as ``snap`` maps them) aside, then publish it in the writer's turn."""
        writer = self._writer
        unit = writer.guarded_write(lambda: merged_unit(writer.path, snap, units))
        with writer.turn():
            t0 = time.perf_counter()
            writer.check_writable()
            before = writer.snap.state
            state = writer.guarded_write(lambda: publish_merge(writer.path, before, units, unit), stale_on_error=True)
            writer.publish(state)
            self.publishes.append((t0, time.perf_counter()))
        # The replaced units' files (and version files before a new checkpoint) are named by no
        # version from now on, and their names are never used again: removed outside the writer's
        # turn, if possible (the merge is durable either way; the next writer removes what is left).
        remove_files(writer.path, before.names() - state.names())

    # --- the background thread -----------------------------------------------------------------------
    def poke(self) -> None:
        """Start the merge thread if a merge is due and none runs (the writer calls it after each
        commit when the mode is ``"background"``; :meth:`wait` too)."""
        state = self._writer.snap.state
        if self._stopping or self.error is not None or state is None or next_merge(state) is None:
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._run, name="mempp-merge", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping:
                with self._merge_lock:
                    cand = self._candidate(False)
                    if cand is None or self._stopping:
                        return
                    self._merge_one(*cand)
                    self.done += 1
        except BaseException as exc:  # noqa: BLE001 - kept for stats(); a failed fsync also stops writes (Writer.broken)
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
            state = self._writer.snap.state
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


def remove_files(store, names) -> None:
    """Remove the store files ``names`` (named by no version any more), ignoring any that are gone."""
    for name in sorted(names):
        try:
            unlink(store / name)
        except OSError:
            pass
