"""mix64, the checksum store files are verified with when a store opens."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mempp.kernels.checksum import mix64_bytes, mix64_file


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 200))
def test_file_and_bytes_agree_for_any_length_and_read_size(tmp_path_factory, data, chunk):
    path = tmp_path_factory.mktemp("c") / "f"
    path.write_bytes(data)
    assert mix64_file(path, chunk=chunk) == mix64_bytes(data)
    assert len(mix64_bytes(data)) == 16


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=200), st.data())
def test_any_single_bit_flip_changes_the_checksum(data, draw):
    pos = draw.draw(st.integers(0, len(data) * 8 - 1))
    flipped = bytearray(data)
    flipped[pos // 8] ^= 1 << (pos % 8)
    assert mix64_bytes(bytes(flipped)) != mix64_bytes(data)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=64, max_size=400), st.data())
def test_truncation_zeroed_blocks_and_swapped_stripes_change_it(data, draw):
    h = mix64_bytes(data)
    cut = draw.draw(st.integers(0, len(data) - 1))
    assert mix64_bytes(data[:cut]) != h
    assert mix64_bytes(data + b"\0") != h  # trailing zero bytes count (the length is folded in)
    a = draw.draw(st.integers(0, len(data) // 32 - 1))
    b = draw.draw(st.integers(0, len(data) // 32 - 1))
    sa, sb = data[32 * a : 32 * a + 32], data[32 * b : 32 * b + 32]
    if sa != sb:
        swapped = bytearray(data)
        swapped[32 * a : 32 * a + 32], swapped[32 * b : 32 * b + 32] = sb, sa
        assert mix64_bytes(bytes(swapped)) != h
    if any(data[: min(len(data), 4096)]):
        assert mix64_bytes(bytes(min(len(data), 4096)) + data[4096:]) != h


def test_no_collisions_among_many_random_blocks():
    rng = np.random.default_rng(0)
    inputs = {rng.bytes(int(rng.integers(0, 100))) for _ in range(20_000)}
    inputs |= {bytes(n) for n in range(100)}  # all-zero inputs of every length
    assert len({mix64_bytes(x) for x in inputs}) == len(inputs)


def test_large_file_read_in_blocks(tmp_path):
    data = os.urandom((8 << 20) + 12_345)  # more than one default read
    path = tmp_path / "big"
    path.write_bytes(data)
    assert mix64_file(path) == mix64_bytes(data)


def test_opening_checks_mix64_and_old_stores_sha256(tmp_path):
    import shutil
    from pathlib import Path

    import pytest

    import mempp
    from mempp.storage.errors import CorruptStoreError
    from mempp.storage.manifest import FileRef, read_current, verify_files

    # A new store records both checksums for every file; opening checks mix64 ...
    s = mempp.Store.open(tmp_path / "new", embedder=mempp.HashEmbedder(dim=8))
    s.add([{"text": "hello world", "date": "2024-01-01"}])
    s.close()
    manifest = read_current(tmp_path / "new")
    refs = [FileRef.from_json(f) for c in manifest["commits"] for f in c["files"].values()]
    assert refs and all(r.mix64 is not None and r.sha256 for r in refs)
    assert verify_files(tmp_path / "new", refs, deep=True) == {}
    # ... and sha256 as well only when asked (a reference whose sha256 disagrees passes the quick check).
    wrong = [FileRef(r.name, r.size, "0" * 64, r.mix64) for r in refs]
    assert verify_files(tmp_path / "new", wrong) == {}
    assert set(verify_files(tmp_path / "new", wrong, deep=True)) == {r.name for r in refs}
    # A store written before mix64 (format-1 fixture) is checked with sha256: damage is found.
    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "format1", old)
    manifest = read_current(old)
    refs = [FileRef.from_json(f) for c in manifest["commits"] for f in c["files"].values()]
    assert all(r.mix64 is None for r in refs)
    seg = next(old / r.name for r in refs if r.name.endswith(".docs.arrow"))
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x10
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match="sha256"):
        mempp.Store.open(old, embedder=mempp.HashEmbedder(16), read_only=True)
