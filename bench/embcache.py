"""An embedder wrapper that remembers every vector it computed, in memory and optionally on disk.

For experiment scripts (``bench/ablate.py``, ``bench/quality.py``, ``bench/baseline.py``): a
sweep of query-time settings then embeds each text once, and a later run reads the vectors back
(``DiskCache(dir)``: one ``.npz`` per model, keyed by the model id and a hash of each text, and of
the window stride for window vectors). ``mempp eval`` never uses it: a shipped evaluation is a
plain run that embeds everything itself.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class CachingEmbedder:
    """Wraps an embedder; remembers every vector it computed, by text (and window stride).

    ``cache_dir``: where to keep the vectors between processes (``save()`` writes them; loaded on
    construction). The file is named after the inner embedder's ``model_id``.
    """

    def __init__(self, inner: Any, cache_dir: str | Path | None = None) -> None:
        self.inner = inner
        self.dim, self.model_id, self.max_tokens = inner.dim, inner.model_id, inner.max_tokens
        self.model_sha256 = getattr(inner, "model_sha256", None)
        self._vec: dict[bytes, np.ndarray] = {}
        self._qvec: dict[bytes, np.ndarray] = {}  # queries: a model may embed them differently (a prefix)
        self._win: dict[tuple[bytes, int], np.ndarray] = {}  # (text, stride) -> its window vectors
        self._dirty = False
        self.path = None
        if cache_dir is not None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(self.model_id))
            self.path = Path(cache_dir) / f"{safe}.npz"
            self._load()

    def _load(self) -> None:
        """Add the file's vectors to those in memory (kept where both have one)."""
        if self.path is None or not self.path.is_file():
            return
        with np.load(self.path, allow_pickle=False) as z:
            keys, vecs = z["keys"], z["vecs"]
            for k, v in zip(keys, vecs):
                self._vec.setdefault(k.tobytes(), v)
            if "qkeys" in z:
                for k, v in zip(z["qkeys"], z["qvecs"]):
                    self._qvec.setdefault(k.tobytes(), v)
            wkeys, wstride, wstart, wvecs = z["wkeys"], z["wstride"], z["wstart"], z["wvecs"]
            for i in range(len(wkeys)):
                self._win.setdefault((wkeys[i].tobytes(), int(wstride[i])), wvecs[wstart[i] : wstart[i + 1]])

    def save(self) -> None:
        """Write every vector to ``cache_dir`` (atomically: a temporary file, then a rename)."""
        if self.path is None or not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._load()  # another process may have added vectors meanwhile: keep them
        keys = list(self._vec)
        wkeys = list(self._win)
        qkeys = list(self._qvec)
        starts = np.zeros(len(wkeys) + 1, dtype=np.int64)
        starts[1:] = np.cumsum([len(self._win[k]) for k in wkeys]) if wkeys else []
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(
            tmp,
            keys=np.array([np.frombuffer(k, dtype=np.uint8) for k in keys], dtype=np.uint8).reshape(len(keys), 16),
            vecs=np.stack([self._vec[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32),
            qkeys=np.array([np.frombuffer(k, dtype=np.uint8) for k in qkeys], dtype=np.uint8).reshape(len(qkeys), 16),
            qvecs=np.stack([self._qvec[k] for k in qkeys]) if qkeys else np.zeros((0, self.dim), np.float32),
            wkeys=np.array([np.frombuffer(k, dtype=np.uint8) for k, _ in wkeys], dtype=np.uint8).reshape(len(wkeys), 16),
            wstride=np.array([s for _, s in wkeys], dtype=np.int64),
            wstart=starts,
            wvecs=np.vstack([self._win[k] for k in wkeys]) if wkeys and starts[-1] else np.zeros((0, self.dim), np.float32),
        )
        os.replace(tmp, self.path)
        self._dirty = False

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress=None) -> np.ndarray:
        return self._cached(self._vec, self.inner.embed, texts, batch_size, progress)

    def embed_queries(self, texts: Sequence[str], *, batch_size: int = 32, progress=None) -> np.ndarray:
        """Query vectors: the inner embedder's ``embed_queries`` (a model's query prefix) when it has one."""
        fn = getattr(self.inner, "embed_queries", None)
        if fn is None:
            return self.embed(texts, batch_size=batch_size, progress=progress)
        return self._cached(self._qvec, fn, texts, batch_size, progress)

    def _cached(self, cache: dict, fn, texts: Sequence[str], batch_size: int, progress) -> np.ndarray:
        keys = [text_key(t) for t in texts]
        todo: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in cache and k not in todo:
                todo[k] = i
        if todo:
            vecs = fn([texts[i] for i in todo.values()], batch_size=batch_size)
            for k, v in zip(todo, vecs):
                cache[k] = np.asarray(v, dtype=np.float32)
            self._dirty = True
        if progress is not None:
            progress(len(texts))
        return np.stack([cache[k] for k in keys]) if keys else np.zeros((0, self.dim), dtype=np.float32)

    def embed_windows(self, texts: Sequence[str], stride: int, *, batch_size: int = 32):
        keys = [(text_key(t), int(stride)) for t in texts]
        todo: dict[tuple[bytes, int], int] = {}
        for i, k in enumerate(keys):
            if k not in self._win and k not in todo:
                todo[k] = i
        if todo:
            vecs, owner = self.inner.embed_windows([texts[i] for i in todo.values()], stride, batch_size=batch_size)
            for j, k in enumerate(todo):
                self._win[k] = np.asarray(vecs[owner == j], dtype=np.float32)
            self._dirty = True
        vecs = [self._win[k] for k in keys if len(self._win[k])]
        owner = [np.full(len(self._win[k]), i, dtype=np.int64) for i, k in enumerate(keys) if len(self._win[k])]
        if not vecs:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64)
        return np.vstack(vecs), np.concatenate(owner)
