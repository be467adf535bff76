"""The int8 copy of the embeddings, copied out of the page cache into anonymous memory on huge pages.

Every file of a store is memory-mapped, so opening costs nothing and nothing is rebuilt. But a
file mapping uses 4 KiB pages (the page cache here does not map huge pages into a process,
and ``MADV_COLLAPSE`` refuses file mappings), so a scan of 384 MB of int8 rows misses the
TLB every 4 KiB. Measured on the 1M-document store of the bench (2026-12-01, this 2-core VM):

- a numpy sum over the copy ran at 9.0 GB/s through the mapping, 14.0 GB/s on the same bytes
  in anonymous memory on 2 MiB pages;
- the masked int8 scan of 200 workload queries, 5.7 against 10.3 GB/s of the rows it spans.

So a :class:`Residency` copies each segment's int8 copy, in the background, into anonymous
memory advised onto huge pages (:func:`resident_copy`), swaps it in, and gives the mapping's
pages back (:func:`release_pages`: ``MADV_DONTNEED`` on a read-only file mapping drops the
page table entries only; a later read faults the same bytes in from the page cache), so the
process's RSS does not count the rows twice. A query reads ``entry.q8`` once per scan: it runs
on the mapping or on the copy, both the same bytes. (A query still scanning the mapping when its
pages are given back faults the rest of them in again, and those stay counted in RSS; a
service that calls :meth:`Store.make_resident` before serving has none.) The copy costs the time to fill fresh
memory (1.1 s for 384 MB on this VM, whose host backs each new page on first touch) and is
made once per segment, on the store's first query or by :meth:`Store.make_resident`.

Owns the huge-page copies (:func:`resident_copy`, :func:`release_pages`, :class:`Residency`), the
read advice for stores larger than memory (:func:`advise_if_larger`, :func:`advise`) and the
``madvise`` calls. It moves bytes only: the snapshot and the store decide which and when.

Never imports: snapshot, files, mempp.store.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
from collections import deque
from typing import Iterable

import numpy as np

HUGE_PAGE = 2 << 20
CHUNK = 8 << 20  # bytes copied between checks of the stop flag (numpy releases the GIL while it copies)
PAGE = mmap.PAGESIZE

_libc = None


def _madvise(addr: int, length: int, advice: int) -> bool:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _libc.madvise.restype = ctypes.c_int
    return _libc.madvise(addr, length, advice) == 0


def huge_empty(nbytes: int) -> np.ndarray:
    """``nbytes`` of fresh anonymous memory (uint8), starting on a 2 MiB boundary and advised
    onto huge pages where the OS has them (Linux ``MADV_HUGEPAGE``); plain ``np.empty`` elsewhere."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or os.name != "posix" or nbytes < HUGE_PAGE:
        return np.empty(nbytes, dtype=np.uint8)
    buf = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        buf.madvise(advice)
    except OSError:  # huge pages off in this kernel: still anonymous memory
        pass
    raw = np.frombuffer(buf, dtype=np.uint8)
    off = (-raw.ctypes.data) % HUGE_PAGE
    return raw[off : off + nbytes]


def _in_read_only_file_mapping(lo: int, hi: int) -> bool:
    """Whether bytes ``lo .. hi`` lie in one read-only mapping of a file (Linux ``/proc/self/maps``)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                a, b = (int(x, 16) for x in parts[0].split("-"))
                if a <= lo and hi <= b:
                    return "w" not in parts[1] and len(parts) == 6 and parts[4] != "0" and parts[5].startswith("/")
    except OSError:
        pass
    return False


RANDOM_READS_SHARE = 0.5  # float32 embeddings beyond this share of physical memory: read them without readahead


def physical_memory() -> int:
    """This machine's physical memory in bytes (0 where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 0


def larger_than_memory(nbytes: int) -> bool:
    """Whether ``nbytes`` of mapped rows exceed ``RANDOM_READS_SHARE`` of physical memory: the page
    cache cannot hold them beside everything else, so reads of scattered rows come from disk."""
    mem = physical_memory()
    return mem > 0 and nbytes > RANDOM_READS_SHARE * mem


def advise_if_larger(arrays: list, store_bytes: int, how: str) -> None:
    """:func:`advise` each of ``arrays`` (rows of a store whose float32 embeddings take
    ``store_bytes``) where that store is :func:`larger_than_memory`; else leave the kernel's
    default. A version's rows are advised "random" (the exact rescore reads scattered rows); a
    merge or an ANN build that reads rows once, in order, advises them "sequential" first."""
    if larger_than_memory(store_bytes):
        for a in arrays:
            advise(a, how)


def advise(arr: np.ndarray, how: str) -> bool:
    """``madvise`` the whole pages inside ``arr`` with ``MADV_RANDOM`` or ``MADV_SEQUENTIAL``
    (``how``: "random", "sequential"): what the kernel reads ahead when a read of them faults.
    Harmless on anonymous memory. Returns whether the advice was taken.

    Random: a fault reads the one page it needs instead of 128 KiB around it. Rows of 1.5 KiB
    read one at a time (the exact rescore of a store larger than memory) otherwise pull 85 rows'
    bytes from disk each and push useful pages out of the cache: the default query on 10M
    documents (a 32 GB store, 24 GiB of memory) took 1,061 to 1,255 ms p50 without the advice
    and 418 to 478 ms with it, cold and warm."""
    advice = getattr(mmap, {"random": "MADV_RANDOM", "sequential": "MADV_SEQUENTIAL"}[how], None)
    if advice is None or not sys.platform.startswith("linux") or arr.nbytes == 0:
        return False
    start = arr.ctypes.data
    lo = -(-start // PAGE) * PAGE
    hi = (start + arr.nbytes) // PAGE * PAGE
    return hi > lo and _madvise(lo, hi - lo, advice)


def release_pages(arr: np.ndarray) -> bool:
    """Drop this process's page table entries for the whole pages inside ``arr``, when it lies in
    a read-only file mapping (its bytes stay in the page cache and fault back in on the next read).
    Anything else is left alone: ``MADV_DONTNEED`` on anonymous memory would zero it under a query
    still reading it (a column of several chunks is concatenated into memory, not mapped).
    Returns whether the pages were given back."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None or not sys.platform.startswith("linux") or arr.nbytes == 0:
        return False
    start = arr.ctypes.data
    lo = -(-start // PAGE) * PAGE
    hi = (start + arr.nbytes) // PAGE * PAGE
    return hi > lo and _in_read_only_file_mapping(lo, hi) and _madvise(lo, hi - lo, advice)


def resident_copy(arr: np.ndarray, stop: threading.Event | None = None) -> np.ndarray | None:
    """``arr`` (C-contiguous) copied into :func:`huge_empty` memory, read only; None when ``stop``
    was set before the copy finished."""
    src = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    out = huge_empty(src.nbytes)
    for lo in range(0, src.nbytes, CHUNK):
        if stop is not None and stop.is_set():
            return None
        np.copyto(out[lo : lo + CHUNK], src[lo : lo + CHUNK])
    out = out.view(arr.dtype).reshape(arr.shape)
    out.flags.writeable = False
    return out


class Residency:
    """A store's background copier: segments offered are made resident one by one on a thread
    of their own, which ends when none is left. Thread safe; :meth:`close` stops it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._queue: deque = deque()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.errors: list[str] = []  # one line per segment that could not be copied (it stays mapped)

    def offer(self, entries: Iterable) -> int:
        """Queue the entries whose int8 copy is still mapped; returns how many were queued."""
        n = 0
        with self._lock:
            if self._stop.is_set():
                return 0
            for e in entries:
                if e.q8_state == "mapped":
                    e.q8_state = "queued"
                    self._queue.append(e)
                    n += 1
            if self._queue and self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mempp-resident", daemon=True)
                self._thread.start()
        return n

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue or self._stop.is_set():
                    for e in self._queue:
                        e.q8_state = "mapped"
                    self._queue.clear()
                    self._thread = None
                    self._done.notify_all()
                    return
                entry = self._queue.popleft()
            try:
                entry.make_resident(self._stop)
            except Exception as exc:  # noqa: BLE001 - the mapping still serves every query
                entry.q8_state = "failed"
                self.errors.append(f"{entry.segment.name}: {type(exc).__name__}: {exc}")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or being copied; False if ``timeout`` ran out first."""
        with self._lock:
            return self._done.wait_for(lambda: self._thread is None, timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop copying (a copy under way stops within one chunk) and wait for the thread."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
