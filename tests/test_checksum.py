"""wide64 (and mix64 before it), the checksums store files are verified with when a store opens."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from mempp.kernels.checksum import WIDE_KEYS, _wide64_read, mix64_bytes, mix64_file, wide64_bytes, wide64_file

M = (1 << 64) - 1
P1, P2, P3, P4, P5 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M


def _round(acc: int, word: int) -> int:
    return _rotl((acc + word * P2) & M, 31) * P1 & M


def _finish_model(acc: list[int], tail: bytes, length: int) -> int:
    h = (_rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)) & M
    for a in acc:
        h = ((h ^ _round(0, a)) * P1 + P4) & M
    h = (h + length) & M
    i = 0
    while i + 8 <= len(tail):
        h = (_rotl(h ^ _round(0, int.from_bytes(tail[i : i + 8], "little")), 27) * P1 + P4) & M
        i += 8
    for b in tail[i:]:
        h = _rotl(h ^ (b * P5 & M), 11) * P1 & M
    h ^= h >> 33
    h = h * P2 & M
    h ^= h >> 29
    h = h * P3 & M
    return h ^ (h >> 32)


def wide64_model(data: bytes) -> str:
    """wide64 as its definition reads, in plain Python integers: the oracle of the kernel."""
    keys = [[int(k) for k in row] for row in WIDE_KEYS]
    acc = [0] * 32
    stripes = len(data) // 256
    for i in range(stripes):
        s = i % 16
        for j in range(32):
            w = int.from_bytes(data[256 * i + 8 * j : 256 * i + 8 * j + 8], "little")
            d = w ^ keys[s][j]
            acc[j] = (acc[j] + (d & 0xFFFFFFFF) * (d >> 32) + _rotl(w, 32)) & M
        if s == 15:  # a whole 4 KiB block: every lane scrambled
            acc = [((a ^ (a >> 47)) * P1) & M for a in acc]
    merged = []
    for i in range(4):
        h = P5 + i
        for j in range(i, 32, 4):
            h = (_rotl(h ^ _round(0, acc[j]), 27) * P1 + P4) & M
        merged.append(h)
    return f"{_finish_model(merged, data[256 * stripes :], len(data)):016x}"


CHECKSUMS = [pytest.param(mix64_bytes, id="mix64"), pytest.param(wide64_bytes, id="wide64")]


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=9000))
def test_wide64_equals_its_definition(data):
    assert wide64_bytes(data) == wide64_model(data)


def test_wide64_equals_its_definition_across_blocks():
    rng = np.random.default_rng(3)
    for n in (0, 255, 256, 4095, 4096, 4096 + 256, 3 * 4096 + 300):
        data = rng.bytes(n)
        assert wide64_bytes(data) == wide64_model(data), n


def test_wide64_changes_when_any_two_blocks_or_stripes_swap():
    """Whole 4 KiB blocks swapped (what the per-block scramble guards against) and 256-byte
    stripes swapped within a block or across blocks (what the per-stripe keys guard against)."""
    rng = np.random.default_rng(5)
    data = rng.bytes(5 * 4096 + 700)
    h = wide64_bytes(data)
    for unit, count in ((4096, 5), (256, 20)):
        for a in range(count):
            for b in range(a + 1, count):
                swapped = bytearray(data)
                swapped[unit * a : unit * a + unit], swapped[unit * b : unit * b + unit] = data[unit * b : unit * b + unit], data[unit * a : unit * a + unit]
                assert wide64_bytes(bytes(swapped)) != h, (unit, a, b)
    # the same block repeated: each copy still counts (a zeroed or duplicated block is found)
    block = rng.bytes(4096)
    assert len({wide64_bytes(block * n) for n in range(1, 6)}) == 5


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=20_000), st.sampled_from([4096, 8192, 12288]))
def test_wide64_of_a_file_equals_its_bytes_through_every_window_and_read(tmp_path_factory, data, window):
    path = tmp_path_factory.mktemp("w") / "f"
    path.write_bytes(data)
    h = wide64_bytes(data)
    assert wide64_file(path, window=window) == h  # memory-mapped windows
    assert _wide64_read(path, window) == h  # read in blocks


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 200))
def test_file_and_bytes_agree_for_any_length_and_read_size(tmp_path_factory, data, chunk):
    path = tmp_path_factory.mktemp("c") / "f"
    path.write_bytes(data)
    assert mix64_file(path, chunk=chunk) == mix64_bytes(data)
    assert len(mix64_bytes(data)) == 16


@pytest.mark.parametrize("checksum", CHECKSUMS)
@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=9000), st.data())
def test_any_single_bit_flip_changes_the_checksum(checksum, data, draw):
    pos = draw.draw(st.integers(0, len(data) * 8 - 1))
    flipped = bytearray(data)
    flipped[pos // 8] ^= 1 << (pos % 8)
    assert checksum(bytes(flipped)) != checksum(data)


@pytest.mark.parametrize("checksum", CHECKSUMS)
@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=64, max_size=13_000), st.sampled_from([32, 256, 4096]), st.data())
def test_truncation_zeroed_blocks_and_swapped_stripes_change_it(checksum, data, unit, draw):
    h = checksum(data)
    cut = draw.draw(st.integers(0, len(data) - 1))
    assert checksum(data[:cut]) != h
    assert checksum(data + b"\0") != h  # trailing zero bytes count (the length is folded in)
    if len(data) >= 2 * unit:  # two whole units (stripes of either checksum, or 4 KiB blocks) swapped
        a = draw.draw(st.integers(0, len(data) // unit - 1))
        b = draw.draw(st.integers(0, len(data) // unit - 1))
        sa, sb = data[unit * a : unit * a + unit], data[unit * b : unit * b + unit]
        if sa != sb:
            swapped = bytearray(data)
            swapped[unit * a : unit * a + unit], swapped[unit * b : unit * b + unit] = sb, sa
            assert checksum(bytes(swapped)) != h
    if any(data[: min(len(data), 4096)]):
        assert checksum(bytes(min(len(data), 4096)) + data[4096:]) != h


@pytest.mark.parametrize("checksum", CHECKSUMS)
def test_no_collisions_among_many_random_blocks(checksum):
    rng = np.random.default_rng(0)
    inputs = {rng.bytes(int(rng.integers(0, 600))) for _ in range(20_000)}
    inputs |= {bytes(n) for n in range(600)}  # all-zero inputs of every length
    assert len({checksum(x) for x in inputs}) == len(inputs)


def test_large_file_read_in_blocks(tmp_path):
    data = os.urandom((8 << 20) + 12_345)  # more than one default read
    path = tmp_path / "big"
    path.write_bytes(data)
    assert mix64_file(path) == mix64_bytes(data)
    assert wide64_file(path) == wide64_bytes(data)


def test_opening_checks_wide64_and_old_stores_mix64_or_sha256(tmp_path):
    import shutil
    from pathlib import Path

    import mempp
    from mempp.storage.errors import CorruptStoreError
    from mempp.storage.manifest import FileRef, read_current, verify_files

    # A new store records sha256 and wide64 for every file; opening checks wide64 ...
    s = mempp.Store.open(tmp_path / "new", embedder=mempp.HashEmbedder(dim=8))
    s.add([{"text": "hello world", "date": "2024-01-01"}])
    s.close()
    new = tmp_path / "new"
    manifest = read_current(new)
    refs = [FileRef.from_json(f) for c in manifest["commits"] for f in c["files"].values()]
    assert refs and all(r.wide64 is not None and r.mix64 is None and r.sha256 and r.quick == "wide64" for r in refs)
    assert verify_files(new, refs, deep=True) == {}
    # ... and sha256 as well only when asked (a reference whose sha256 disagrees passes the quick check).
    wrong = [FileRef(r.name, r.size, "0" * 64, wide64=r.wide64) for r in refs]
    assert verify_files(new, wrong) == {}
    assert set(verify_files(new, wrong, deep=True)) == {r.name for r in refs}
    bad_wide = [FileRef(r.name, r.size, r.sha256, wide64="0" * 16) for r in refs]
    failures = verify_files(new, bad_wide)
    assert set(failures) == {r.name for r in refs} and all("wide64" in str(e) for e in failures.values())
    # A store written with mix64 (before wide64) is checked with mix64: damage is found.
    mixed = [FileRef(r.name, r.size, r.sha256, mix64=mix64_file(new / r.name)) for r in refs]
    assert all(r.quick == "mix64" for r in mixed) and verify_files(new, mixed) == {}
    seg = next(new / r.name for r in refs if r.name.endswith(".docs.arrow"))
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x10
    seg.write_bytes(bytes(data))
    failures = verify_files(new, mixed)
    assert list(failures) == [seg.relative_to(new).as_posix()] and "mix64" in str(failures[list(failures)[0]])
    with pytest.raises(CorruptStoreError, match="wide64"):
        mempp.Store.open(new, embedder=mempp.HashEmbedder(8), read_only=True)
    # A store written before mix64 (format-1 fixture) is checked with sha256: damage is found.
    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "format1", old)
    manifest = read_current(old)
    refs = [FileRef.from_json(f) for c in manifest["commits"] for f in c["files"].values()]
    assert all(r.mix64 is None and r.wide64 is None for r in refs)
    seg = next(old / r.name for r in refs if r.name.endswith(".docs.arrow"))
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x10
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match="sha256"):
        mempp.Store.open(old, embedder=mempp.HashEmbedder(16), read_only=True)


def test_wide64_file_reads_where_the_kernel_cannot_populate_a_map(tmp_path, monkeypatch):
    """A kernel without MADV_POPULATE_READ (before Linux 5.14) answers EINVAL: the file is read instead."""
    from mempp.kernels import checksum

    data = os.urandom(3 * 4096 * 1024 + 999)
    path = tmp_path / "f"
    path.write_bytes(data)
    if not checksum.MAPPED:
        pytest.skip("the memory-mapped path runs on Linux only")
    monkeypatch.setattr(checksum, "MADV_POPULATE_READ", 12345)  # an advice no kernel knows: EINVAL
    assert wide64_file(path, window=4 << 20) == wide64_bytes(data)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=20_000), st.lists(st.integers(0, 9000), max_size=12), st.integers(0, 7))
def test_wide64_fed_in_pieces_equals_wide64_of_the_whole(data, cuts, skew):
    """Wide64 (what a file written piece by piece is hashed with) over any split of the bytes,
    pieces starting at any address (``skew``): the checksum of the whole."""
    from mempp.kernels.checksum import Wide64

    h = Wide64()
    at = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        if cut < at or cut > len(data):
            continue
        h.update(memoryview(bytes(skew) + data[at:cut])[skew:])  # an odd offset into its buffer
        at = cut
    assert h.hexdigest() == wide64_bytes(data) == wide64_model(data)


@pytest.mark.parametrize("rows", [0, 3, 70_000])
def test_an_arrow_file_written_in_pieces_holds_what_a_buffer_writer_gives(tmp_path, rows):
    """write_table_file streams a table through pyarrow into the file and hashes the pieces (a
    piece of 1 MiB or more in a thread while it is written): the bytes equal those of pyarrow's
    buffer writer, and the reference's size and checksums are the file's."""
    import hashlib

    import pyarrow as pa

    from mempp.storage.manifest import write_table_file

    rng = np.random.default_rng(rows)
    emb = rng.standard_normal((rows, 8)).astype(np.float32)
    table = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.uint64)),
            "text": pa.array([f"doc {i}" * (i % 5) for i in range(rows)], pa.large_string()),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1)), 8),
        }
    )
    if rows:
        table = pa.concat_tables([table.slice(0, rows // 3), table.slice(rows // 3)])  # two record batches
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write(table)
    expected = sink.getvalue().to_pybytes()
    ref = write_table_file(tmp_path, "t.arrow", table)
    got = (tmp_path / "t.arrow").read_bytes()
    assert got == expected
    assert (ref.name, ref.size, ref.sha256, ref.wide64) == ("t.arrow", len(got), hashlib.sha256(got).hexdigest(), wide64_bytes(got))
    assert pa.ipc.open_file(pa.py_buffer(got)).read_all().equals(table)
