"""bench/embcache.py: cached vectors equal the embedder's, across processes (through the file)."""

from __future__ import annotations

import numpy as np

import mempp
from mempp.bench.embcache import CachingEmbedder


class Counting(mempp.HashEmbedder):
    def __init__(self):
        super().__init__(dim=32)
        self.calls = 0

    def embed(self, texts, **kw):
        self.calls += len(texts)
        return super().embed(texts, **kw)


def test_round_trip_through_the_file(tmp_path):
    inner = Counting()
    texts = ["alpha beta", "gamma", "alpha beta", " ".join(f"w{i}" for i in range(500))]
    a = CachingEmbedder(inner, tmp_path)
    first = a.embed(texts)
    wv, owner = a.embed_windows(texts, 100)
    assert inner.calls == 3 + len(wv)  # each distinct text once, then the windows
    np.testing.assert_array_equal(first, mempp.HashEmbedder(dim=32).embed(texts))
    a.save()
    fresh = Counting()
    b = CachingEmbedder(fresh, tmp_path)
    np.testing.assert_array_equal(b.embed(texts), first)
    wv2, owner2 = b.embed_windows(texts, 100)
    np.testing.assert_array_equal(wv2, wv)
    np.testing.assert_array_equal(owner2, owner)
    assert fresh.calls == 0
    # Two writers: each keeps the other's vectors.
    c = CachingEmbedder(Counting(), tmp_path)
    c.embed(["only in c"])
    b.embed(["only in b"])
    c.save()
    b.save()
    assert fresh.calls == 1
    d = CachingEmbedder(Counting(), tmp_path)
    d.embed(["only in b", "only in c"])
    assert d.inner.calls == 0
