"""The int8 copy moved off the file mapping into memory on huge pages (storage/resident.py).

Oracles: the source bytes for a copy; the same store opened with ``resident=False`` (every
byte mapped) for query results, before, during and after the copy; the kernel's own page
accounting (/proc/self/smaps) for the pages given back.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import mempp
from mempp.errors import ValidationError
from mempp.storage.resident import HUGE_PAGE, Residency, huge_empty, release_pages, resident_copy

LINUX = sys.platform.startswith("linux")
DIM = 128  # a multiple of 128 bytes: the VNNI kernels scan it where the CPU has them
WORDS = "budget outage release vendor contract policy hiring review audit launch migration".split()


def _docs(n: int, seed: int, day0: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = rng.choice(WORDS, size=6)
        day = day0 + int(rng.integers(0, 300))
        out.append({"text": f"{' '.join(words)} item {seed}-{i}", "date": f"2024-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}"})
    return out


def _build(path, batches: int = 3, n: int = 1500) -> None:
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        for b in range(batches):
            s.add(_docs(n, b))


QUERIES = [("budget review", "2024-03-15"), ("outage vendor contract", "2024-12-31"), ("hiring policy", None), ("launch", "2024-06-01")]


def _answers(store) -> list:
    return [[(h.doc_id, h.score) for h in store.query(text, k=10, as_of=as_of)] for text, as_of in QUERIES]


def test_resident_copy_is_the_same_bytes_on_aligned_read_only_memory():
    rng = np.random.default_rng(0)
    src = rng.integers(-127, 128, size=(6000, 1536), dtype=np.int8)  # 9 MB: several chunks and huge pages
    copy = resident_copy(src)
    assert copy.shape == src.shape and copy.dtype == src.dtype
    assert np.array_equal(copy, src)
    assert not copy.flags.writeable
    if LINUX:
        assert copy.ctypes.data % HUGE_PAGE == 0
    small = resident_copy(src[:10])
    assert np.array_equal(small, src[:10])
    stop = threading.Event()
    stop.set()
    assert resident_copy(src, stop) is None
    assert len(huge_empty(0)) == 0


def _mapping_rss_kb(path) -> int:
    """Resident kB of this process's mappings of ``path`` (Linux smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:
                inside = line.rstrip("\n").endswith(str(path))
            elif inside and head and head[0] == "Rss:":
                total += int(head[1])
    return total


@pytest.mark.skipif(not LINUX, reason="page accounting read from /proc/self/smaps (Linux)")
def test_release_pages_gives_back_the_mapping_and_keeps_the_bytes(tmp_path):
    path = tmp_path / "rows.bin"
    data = np.random.default_rng(1).integers(0, 256, size=8 << 20, dtype=np.uint8)
    data.tofile(path)
    mapped = np.memmap(path, dtype=np.uint8, mode="r")
    assert int(mapped.astype(np.int64).sum()) == int(data.astype(np.int64).sum())  # touch every page
    before = _mapping_rss_kb(path)
    assert before >= 8 * 1024 - 8
    assert release_pages(mapped)
    assert _mapping_rss_kb(path) < before // 8
    assert np.array_equal(mapped, data)  # read again: faulted back in from the page cache
    anon = data.copy()
    assert not release_pages(anon)  # anonymous memory: left alone (DONTNEED would zero it)
    assert np.array_equal(anon, data)
    writable = np.memmap(path, dtype=np.uint8, mode="r+")
    assert not release_pages(writable)  # a writable mapping: left alone


def test_queries_equal_the_mapped_store_before_during_and_after_the_copy(tmp_path):
    _build(tmp_path / "s")
    with mempp.Store.open(tmp_path / "s", read_only=True, resident=False) as mapped:
        want = _answers(mapped)
        assert mapped.stats()["resident_bytes"] == 0  # queried, never copied
        assert mapped.stats()["int8_bytes"] == 3 * 1500 * DIM
    with mempp.Store.open(tmp_path / "s", read_only=True) as s:
        assert s.stats()["resident_bytes"] == 0  # nothing copied at open
        got: list = []
        errors: list = []

        def query_meanwhile():
            try:
                for _ in range(5):
                    got.append(_answers(s))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        t = threading.Thread(target=query_meanwhile)
        t.start()
        assert s.make_resident(timeout=60)
        t.join()
        assert not errors
        assert all(g == want for g in got)
        stats = s.stats()
        assert stats["resident_bytes"] == stats["int8_bytes"] and stats["resident_errors"] == []
        assert all(e.q8_state == "resident" and not e.q8.flags.writeable for e in s.searcher().snapshot.segments)
        assert _answers(s) == want


@pytest.mark.skipif(not LINUX, reason="page accounting read from /proc/self/smaps (Linux)")
def test_the_copy_gives_back_the_mapped_pages(tmp_path):
    _build(tmp_path / "s")
    files = sorted((tmp_path / "s" / "segments").glob("*.q8.arrow"))
    with mempp.Store.open(tmp_path / "s", read_only=True, resident=False) as s:
        for e in s.searcher().snapshot.segments:
            assert int(e.q8.astype(np.int64).sum()) == int(e.q8_stats()[0].sum())  # every mapped row read
        before = [_mapping_rss_kb(f) * 1024 for f in files]
        assert all(b > 0.8 * f.stat().st_size for b, f in zip(before, files))
        assert s.make_resident(timeout=60)  # nothing else reads the mapping meanwhile
        # the int8 rows' pages were given back; the scale, row and date columns stay mapped
        after = [_mapping_rss_kb(f) * 1024 for f in files]
        assert all(a < 0.4 * f.stat().st_size for a, f in zip(after, files)), (before, after)


def test_the_first_query_starts_the_copy_and_new_segments_follow(tmp_path):
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=DIM)) as s:
        s.add(_docs(1000, 0))
        s.add(_docs(1000, 1))
        assert s.stats()["resident_bytes"] == 0
        s.query("budget", k=3)
        assert s.residency.wait(60)
        assert s.stats()["resident_bytes"] == 2 * 1000 * DIM
        first = s.searcher().snapshot.segments[0].q8
        s.add(_docs(1000, 2))  # a new segment: mapped until the next query
        assert s.stats()["resident_bytes"] == 2 * 1000 * DIM
        assert s.searcher().snapshot.segments[0].q8 is first  # segments shared with the old snapshot keep their copy
        s.query("budget", k=3)
        assert s.residency.wait(60)
        assert s.stats()["resident_bytes"] == s.stats()["int8_bytes"] == 3 * 1000 * DIM
    with mempp.Store.open(tmp_path / "s", read_only=True, resident=False) as mapped:
        want = _answers(mapped)
    with mempp.Store.open(tmp_path / "s", read_only=True) as s:
        s.make_resident()
        assert _answers(s) == want


def test_stopping_leaves_the_segments_mapped_and_usable(tmp_path):
    _build(tmp_path / "s", batches=2, n=500)
    with mempp.Store.open(tmp_path / "s", read_only=True, resident=False) as mapped:
        want = _answers(mapped)
    with mempp.Store.open(tmp_path / "s", read_only=True) as s:
        res = Residency()
        res.close()  # a closed residency copies nothing
        assert res.offer(s.searcher().snapshot.segments) == 0
        assert res.wait(0)
        entry = s.searcher().snapshot.segments[0]
        stop = threading.Event()
        stop.set()
        assert entry.make_resident(stop) == 0 and entry.q8_state == "mapped"
        assert _answers(s) == want
    s.close()  # closing twice, and closing with no copy under way, are fine
    assert s.residency.wait(0)


def test_resident_must_be_a_bool(tmp_path):
    with pytest.raises(ValidationError) as err:
        mempp.Store.open(tmp_path / "s", resident="yes")
    assert err.value.field == "resident"


@pytest.mark.skipif(not LINUX, reason="mappings read from /proc/self/maps (Linux)")
def test_a_store_dropped_without_close_unmaps_its_files_at_once(tmp_path):
    """A Store, its searchers, writer and background threads hold no cycle back to it: dropped
    without close(), its mapped files go at once, not at the next cyclic garbage collection."""
    import gc

    def mapped() -> int:
        with open("/proc/self/maps") as f:
            return sum(str(tmp_path) in line for line in f)

    gc.disable()
    try:
        s = mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=DIM))
        s.add(_docs(300, 0))
        searcher = s.searcher()
        s.add(_docs(300, 1))
        assert _answers(s) and searcher.query("budget review") and mapped() > 0
        del s
        assert mapped() > 0  # the searcher still reads its version
        del searcher
        assert mapped() == 0
    finally:
        gc.enable()
