"""File checksums (storage/files.py): XXH3-64 from the xxhash library, what every file of a
format-2 store records and what opening checks; sha256 for the files of format-1 stores.

The oracle of XXH3-64 is xxHash's own command-line tool where it is installed (``xxhsum -H3``),
and the library's one-shot hash of the bytes otherwise.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import mempp
import mempp.storage.commits
from mempp.storage.errors import CorruptStoreError
from mempp.storage.files import FileRef, HashingSink, verify_files, write_table_file, xxh3_file
from mempp.storage.manifest import read_state

DATA = Path(__file__).parent / "data"


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=50_000), st.lists(st.integers(0, 40_000), max_size=8))
def test_a_file_written_in_pieces_records_the_xxh3_of_its_bytes(tmp_path_factory, data, cuts):
    """The hashing writer, fed any split of the bytes (big pieces hashed in a thread), and the
    file read back (memory-mapped windows) agree with XXH3-64 of the whole."""
    path = tmp_path_factory.mktemp("x") / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    sink = HashingSink(fd, path)
    sink.BIG = 4096  # exercise the threaded path on small inputs
    at = 0
    for cut in sorted(set(c for c in cuts if c <= len(data))) + [len(data)]:
        sink.write(data[at:cut])
        at = cut
    size, digest = sink.finish()
    sink.shutdown()
    os.close(fd)
    assert (size, digest) == (len(data), xxhash.xxh3_64(data).hexdigest())
    assert xxh3_file(path) == digest


def test_large_file_read_in_windows(tmp_path, monkeypatch):
    from mempp.storage import files

    data = os.urandom((3 << 20) + 12_345)
    path = tmp_path / "big"
    path.write_bytes(data)
    monkeypatch.setattr(files, "READ_CHUNK", 1 << 20)  # several windows
    assert xxh3_file(path) == xxhash.xxh3_64(data).hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert xxh3_file(empty) == xxhash.xxh3_64(b"").hexdigest()


@pytest.mark.skipif(shutil.which("xxhsum") is None, reason="xxHash's command-line tool is not installed (Debian: apt-get install xxhash)")
def test_xxhsum_verifies_every_file_of_a_store(tmp_path, monkeypatch):
    """What the README tells a user to run: ``xxhsum -H3 FILE`` prints the digest the manifest records.
    SMALL_UNIT 0: these commits write every file type, as a commit of 64 documents or more does."""
    monkeypatch.setattr(mempp.storage.commits, "SMALL_UNIT", 0)
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=8)) as s:
        s.add([{"id": "a", "text": "hello world", "date": "2024-01-01", "thread": "t"}])
        s.add([{"id": "a", "text": "hello again", "date": "2024-02-01"}])
    state = read_state(tmp_path / "s")
    refs = [f for u in state.units for f in u.files.values()]
    assert len(refs) >= 8
    for ref in refs:
        out = subprocess.run(["xxhsum", "-H3", str(tmp_path / "s" / ref.name)], capture_output=True, text=True, check=True).stdout
        assert out.strip().endswith(f"= {ref.xxh3}"), (out, ref)


def test_opening_checks_xxh3_and_old_stores_sha256(tmp_path):
    # A new store records XXH3-64 (and no sha256) for every file; opening checks it: damage is found.
    s = mempp.Store.open(tmp_path / "new", embedder=mempp.HashEmbedder(dim=8))
    s.add([{"text": "hello world", "date": "2024-01-01"}])
    s.close()
    new = tmp_path / "new"
    refs = [f for u in read_state(new).units for f in u.files.values()]
    assert refs and all(r.xxh3 is not None and r.sha256 is None and r.digest[0] == "xxh3" for r in refs)
    assert verify_files(new, refs) == {}
    wrong = [FileRef(r.name, r.size, xxh3="0" * 16) for r in refs]
    failures = verify_files(new, wrong)
    assert set(failures) == {r.name for r in refs} and all("XXH3-64" in str(e) for e in failures.values())
    seg = next(new / r.name for r in refs if r.name.endswith(".docs.arrow"))
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x10
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match="XXH3-64") as info:
        mempp.Store.open(new, embedder=mempp.HashEmbedder(8), read_only=True)
    assert seg.name in str(info.value)
    # A store of format 1 (tests/data/format1, written with sha256 only) is checked with sha256.
    old = tmp_path / "old"
    shutil.copytree(DATA / "format1", old)
    state = read_state(old)
    assert state.format == 1
    refs = [f for u in state.units for f in u.files.values()]
    assert all(r.xxh3 is None and r.digest[0] == "sha256" for r in refs)
    assert verify_files(old, refs) == {}
    seg = next(old / r.name for r in refs if r.name.endswith(".docs.arrow"))
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x10
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match="sha256"):
        mempp.Store.open(old, embedder=mempp.HashEmbedder(16), read_only=True)


def test_a_damaged_version_file_is_named(tmp_path):
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=8)) as s:
        for i in range(3):
            s.add([{"id": f"d{i}", "text": f"note {i}"}])
    for version in (1, 2, 3):  # the checkpoint, a delta in the chain, the newest delta
        copy = tmp_path / f"c{version}"
        shutil.copytree(path, copy)
        name = copy / "manifests" / f"{version:08d}.json"
        data = bytearray(name.read_bytes())
        data[len(data) // 2] ^= 0x01
        name.write_bytes(bytes(data))
        if version == 1:  # every chain runs through the checkpoint: no whole version is left
            with pytest.raises(CorruptStoreError) as info:
                mempp.Store.open(copy, embedder=mempp.HashEmbedder(8), read_only=True)
            assert f"{version:08d}.json" in str(info.value)
        else:  # the newest whole version before it is read, and the warning names the damaged file
            with pytest.warns(mempp.StoreRecoveredWarning, match=f"{version:08d}.json"):
                with mempp.Store.open(copy, embedder=mempp.HashEmbedder(8), read_only=True) as s:
                    assert s.version == version - 1 and len(s) == version - 1


@pytest.mark.parametrize("rows", [0, 3, 70_000])
def test_an_arrow_file_written_in_pieces_holds_what_a_buffer_writer_gives(tmp_path, rows):
    """write_table_file streams a table through pyarrow into the file and hashes the pieces (a
    piece of 1 MiB or more in a thread while it is written): the bytes equal those of pyarrow's
    buffer writer, and the reference's size and checksum are the file's."""
    import pyarrow as pa

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
    assert (ref.name, ref.size, ref.xxh3) == ("t.arrow", len(got), xxhash.xxh3_64(got).hexdigest())
    assert pa.ipc.open_file(pa.py_buffer(got)).read_all().equals(table)


def test_format1_references_keep_their_checksums_verbatim():
    """A format-1 reference read and written back is unchanged (its wide64/mix64 kept, unchecked)."""
    ref = {"name": "segments/00000001.docs.arrow", "size": 10, "sha256": hashlib.sha256(b"x").hexdigest(), "wide64": "ab" * 8}
    assert FileRef.from_json(ref).to_json() == ref
    assert FileRef.from_json(ref).digest == ("sha256", ref["sha256"])
