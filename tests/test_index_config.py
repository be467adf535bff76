"""Index-time settings: embedding template and window vectors for long documents."""

from __future__ import annotations

import numpy as np
import pytest

import mempp
import mempp.storage.commits
from mempp import IndexConfig


def test_template_validation():
    with pytest.raises(mempp.ValidationError, match="embed_template"):
        IndexConfig(embed_template="{author} only")
    with pytest.raises(mempp.ValidationError, match="embed_template"):
        IndexConfig(embed_template="{text} {secret}")
    with pytest.raises(mempp.ValidationError, match="window_stride"):
        IndexConfig(window_stride=0)
    assert IndexConfig(embed_template="[{date}] {author}: {text}").render("hi", author="Ann", date="2023-01-02") == "[2023-01-02] Ann: hi"
    assert IndexConfig(embed_template="{author}: {text}").render("hi", author=None) == ": hi"


def test_template_changes_what_is_embedded(tmp_path):
    cfg = IndexConfig(embed_template="{author}: {text}")
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(), index=cfg) as s:
        s.add([{"id": "a", "text": "we ship friday", "author": "Zed"}])
        got = s.searcher().snapshot.segments[0].segment.embeddings[0]
        np.testing.assert_allclose(got, mempp.HashEmbedder().embed(["Zed: we ship friday"])[0])
        assert s.get("a").text == "we ship friday"  # the stored text is untouched
    with mempp.Store.open(tmp_path / "s") as s:
        assert s.index == cfg and s.stats()["index"]["embed_template"] == "{author}: {text}"
    with pytest.raises(mempp.StoreError, match="indexed with"):
        mempp.Store.open(tmp_path / "s", index=IndexConfig())


def test_windows_find_words_past_the_first_window(tmp_path):
    filler = " ".join(f"filler{i}" for i in range(600))
    long_doc = {"id": "long", "text": filler + " the quarterly migration budget was approved"}
    other = {"id": "other", "text": "lunch menu for the offsite"}
    q = "quarterly migration budget approved"
    results = {}
    for stride in (None, 150):
        with mempp.Store.open(tmp_path / f"s{stride}", embedder=mempp.HashEmbedder(), index=IndexConfig(window_stride=stride)) as s:
            s.add([long_doc, other])
            hits = s.query(q, legs=["vector"], reserve=False, k=2)
            results[stride] = [h.key for h in hits]
            n_win = s.stats()["window_vectors"]
            assert (n_win > 0) == (stride is not None)
            if stride:
                # Oracle: the document's vector score is its best window (first window = main vector).
                e = mempp.HashEmbedder()
                qv = e.embed([q])[0]
                words = long_doc["text"].split()
                starts = [0] + list(range(stride, len(words) - (200 - stride), stride))
                best = max(float(e.embed([" ".join(words[s0 : s0 + 200]) if s0 else long_doc["text"]])[0] @ qv) for s0 in starts)
                entry = s.searcher().snapshot.segments[0]
                dense = np.zeros(2, dtype=np.float32)
                from mempp.kernels import masked_dot_dense, masked_dot_max

                mask = np.ones(2, dtype=np.uint8)
                masked_dot_dense(entry.segment.embeddings, qv, mask, 0, dense)
                masked_dot_max(entry.window_embeddings, entry.window_rows, qv, mask, 0, dense)
                assert dense[0] == pytest.approx(best, abs=1e-5)
                assert "best window" in hits.plan.legs["vector"]["method"]
    assert results[150][0] == "long"
    with mempp.Store.open(tmp_path / "s150") as s:  # reopened: windows come back from disk
        assert s.query(q, legs=["vector"], reserve=False, k=1)[0].key == "long"


@pytest.mark.model
def test_onnx_windows_cover_the_tail():
    e = mempp.OnnxEmbedder(model="minilm")
    vecs, owner = e.embed_windows(["short", "word " * 600, "alpha beta " * 150], stride=192)
    assert owner.tolist() == [1, 1, 2] and vecs.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def _mapped_file(arr: np.ndarray) -> str | None:
    """The file whose mapping holds ``arr``'s first byte (from /proc/self/maps), None for anonymous memory."""
    addr = arr.ctypes.data
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi:
                return parts[5].strip() if len(parts) == 6 and parts[5].startswith("/") else None
    return None


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/maps"), reason="needs Linux's /proc/self/maps")
def test_opening_maps_the_stored_matrices_without_copying_them(tmp_path, monkeypatch):
    """The embeddings, the int8 copy and the window vectors of a reopened store are read in
    place from their files (a copy would cost the open its time and the process that much memory).
    SMALL_UNIT 0: these commits write every file type, as a commit of 64 documents or more does."""
    monkeypatch.setattr(mempp.storage.commits, "SMALL_UNIT", 0)
    filler = " ".join(f"filler{i}" for i in range(400))
    docs = [{"id": f"d{i}", "text": f"{filler} note {i}"} for i in range(40)]
    cfg = IndexConfig(window_stride=150, vector_copy="int8")
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(), index=cfg) as s:
        s.add(docs[:20])
        s.add(docs[20:])
    with mempp.Store.open(tmp_path / "s") as s:
        assert len(s.searcher().snapshot.segments) == 2
        for entry in s.searcher().snapshot.segments:
            stem = entry.segment.name.rsplit("/", 1)[-1].split(".")[0]
            for arr, kind in ((entry.segment.embeddings, "docs"), (entry.q8, "q8"), (entry.window_embeddings, "win")):
                assert arr is not None and len(arr)
                path = _mapped_file(arr)
                assert path is not None, f"{kind}: in anonymous memory, not in its file"
                assert path == str(tmp_path / "s" / "segments" / f"{stem}.{kind}.arrow")
