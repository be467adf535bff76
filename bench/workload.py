"""The speed workload of ``shared/bench/peers`` (seed 0), generated here so ``mempp bench`` needs no checkout.

The specification is the peers' (``shared/bench/peers/workload.py``); a test
checks the arrays are identical when that file is present:

- N documents of Zipf(1.1) word ids over a 50,000-word vocabulary ("w123"),
  50 to 200 words each, generated in chunks of 100,000 with their own RNG
  streams, so 100k is an exact prefix of 1M;
- dates uniform in 2021-01-01..2023-12-31 (days since the epoch), 10% inactive;
- 384-d unit embeddings, isotropic (``clustered=False``) or, for ANN recall,
  drawn around 1,000 cluster centres (``clustered=True``, our variant);
- 1,000 queries of 4 words, a unit vector and an as-of day; the candidates of
  query q are ``active & (dates <= as_of[q])`` (about 44% on average).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

VOCAB = 50_000
ZIPF_S = 1.1
DIM = 384
LEN_MIN, LEN_MAX = 50, 200
DAY0, DAY1 = 18628, 19722  # 2021-01-01, 2023-12-31
INACTIVE_FRAC = 0.10
NQ, QLEN = 1000, 4
CHUNK = 100_000
SEED = 0
N_CLUSTERS = 1000
CLUSTER_SPREAD = 0.35  # noise norm relative to the unit centre (before renormalising)

_LEN, _TOK, _DATE, _ACT, _EMB = 1, 2, 3, 4, 5
_CLUSTER = 77  # our stream for the clustered variant


def _cache_dir() -> Path:
    return Path(os.environ.get("PERF_DATA", os.path.expanduser("~/.cache/mempp-perfdata")))


def zipf_cdf() -> np.ndarray:
    p = np.arange(1, VOCAB + 1, dtype=np.float64) ** (-ZIPF_S)
    c = np.cumsum(p)
    return c / c[-1]


def _zipf(rng: np.random.Generator, n: int, cdf: np.ndarray) -> np.ndarray:
    return np.searchsorted(cdf, rng.random(n), side="right").astype(np.int32)


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _centres() -> np.ndarray:
    rng = np.random.default_rng([SEED, _CLUSTER])
    return _unit(rng.standard_normal((N_CLUSTERS, DIM), dtype=np.float32))


def _clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    # Cluster sizes follow a Zipf-like law, as topics in an organisation's documents do.
    weights = 1.0 / np.arange(1, len(centres) + 1) ** 0.7
    which = rng.choice(len(centres), size=n, p=weights / weights.sum())
    noise = rng.standard_normal((n, DIM), dtype=np.float32) * np.float32(CLUSTER_SPREAD / np.sqrt(DIM))
    return _unit(centres[which] + noise)


def _lengths(c: int, n: int) -> np.ndarray:
    """The word counts of chunk ``c``'s ``n`` documents (their own stream: known before the words)."""
    return np.random.default_rng([SEED, _LEN, c]).integers(LEN_MIN, LEN_MAX + 1, size=n).astype(np.int32)


def _chunk(c: int, n: int, cdf: np.ndarray, centres: np.ndarray | None):
    def rng(component: int) -> np.random.Generator:
        return np.random.default_rng([SEED, component, c])

    lens = _lengths(c, n)
    toks = _zipf(rng(_TOK), int(lens.sum()), cdf)
    dates = rng(_DATE).integers(DAY0, DAY1 + 1, size=n).astype(np.int32)
    active = rng(_ACT).random(n) >= INACTIVE_FRAC
    if centres is None:
        emb = _unit(rng(_EMB).standard_normal((n, DIM), dtype=np.float32))
    else:
        emb = _clustered(np.random.default_rng([SEED, _CLUSTER, c]), n, centres)
    return lens, toks, dates, active, emb


@dataclass
class Workload:
    n: int
    clustered: bool
    offs: np.ndarray  # int64 (n + 1) token offsets
    toks: np.ndarray  # int32 word ids
    dates: np.ndarray  # int32 days since the epoch
    active: np.ndarray  # bool
    emb: np.ndarray  # (n, DIM) float32 unit rows
    qtok: np.ndarray  # (NQ, QLEN) int32
    qemb: np.ndarray  # (NQ, DIM) float32
    as_of: np.ndarray  # (NQ,) int32 days

    def texts(self, start: int = 0, stop: int | None = None) -> list[str]:
        words = np.array([f"w{i}" for i in range(VOCAB)], dtype=object)
        stop = self.n if stop is None else stop
        toks, offs = self.toks, self.offs
        return [" ".join(words[toks[offs[i] : offs[i + 1]]]) for i in range(start, stop)]

    def query_text(self, q: int) -> str:
        return " ".join(f"w{t}" for t in self.qtok[q])

    def candidate_mask(self, q: int) -> np.ndarray:
        return self.active & (self.dates <= self.as_of[q])

    def cand_frac(self) -> np.ndarray:
        order = np.sort(self.dates[self.active])
        return np.searchsorted(order, self.as_of, side="right") / self.n


_NAMES = ("offs", "toks", "dates", "active", "emb", "qtok", "qemb", "as_of")


def generate(n: int, clustered: bool = False) -> Workload:
    if n >= CHUNK and n % CHUNK:
        raise ValueError(f"n={n}: use a multiple of {CHUNK} (or fewer than {CHUNK})")
    cdf = zipf_cdf()
    centres = _centres() if clustered else None
    parts = []
    done = c = 0
    while done < n:
        m = min(CHUNK, n - done)
        parts.append(_chunk(c, m, cdf, centres))
        done += m
        c += 1
    lens, toks, dates, active, emb = (np.concatenate([p[i] for p in parts]) for i in range(5))
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    return Workload(n, clustered, offs, toks, dates, active, emb, *_queries(cdf, centres))


def _queries(cdf: np.ndarray, centres: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(qtok, qemb, as_of)``: the queries, the same for every size (their own random stream)."""
    qr = np.random.default_rng([SEED, 99])
    qtok = _zipf(qr, NQ * QLEN, cdf).reshape(NQ, QLEN)
    qemb = _unit(qr.standard_normal((NQ, DIM), dtype=np.float32))
    as_of = qr.integers(DAY0, DAY1 + 1, size=NQ).astype(np.int32)
    if centres is not None:
        # Queries near the documents' topics: a cluster centre plus the same noise.
        qemb = _clustered(np.random.default_rng([SEED, _CLUSTER, 99]), NQ, centres)
    return qtok, qemb, as_of


STREAM_FROM = 2_000_000  # from this many documents the cache is written chunk by chunk (10M: 15 GB of embeddings)


def load(n: int, clustered: bool = False) -> Workload:
    """The workload of ``n`` documents, cached as .npy files under ``$PERF_DATA``; the embeddings
    (and, from ``STREAM_FROM`` documents, the word ids) memory-mapped."""
    d = _cache_dir() / (f"n{n}" + ("-clustered" if clustered else ""))
    if not all((d / f"{k}.npy").exists() for k in _NAMES):
        d.mkdir(parents=True, exist_ok=True)
        if n >= STREAM_FROM:
            _write_chunks(d, n, clustered)
        else:
            w = generate(n, clustered)
            for k in _NAMES:
                tmp = d / f".{k}.tmp.npy"
                np.save(tmp, getattr(w, k))
                os.replace(tmp, d / f"{k}.npy")
            return w
    mapped = ("emb", "toks") if n >= STREAM_FROM else ("emb",)
    arrs = {k: np.load(d / f"{k}.npy", mmap_mode="r" if k in mapped else None, allow_pickle=False) for k in _NAMES}
    return Workload(n=n, clustered=clustered, **arrs)


def _write_chunks(d: Path, n: int, clustered: bool) -> None:
    """:func:`generate`'s arrays written to ``d`` one chunk at a time (the same values: each chunk
    has its own random streams), so memory holds one chunk, not the whole workload."""
    if n % CHUNK:
        raise ValueError(f"n={n}: use a multiple of {CHUNK}")
    chunks = n // CHUNK
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.concatenate([_lengths(c, CHUNK) for c in range(chunks)]), out=offs[1:])
    out = {
        k: np.lib.format.open_memmap(d / f".{k}.tmp.npy", mode="w+", dtype=dt, shape=shape)
        for k, dt, shape in (
            ("toks", np.int32, (int(offs[-1]),)), ("dates", np.int32, (n,)), ("active", np.bool_, (n,)), ("emb", np.float32, (n, DIM)),
        )
    }
    cdf = zipf_cdf()
    centres = _centres() if clustered else None
    for c in range(chunks):
        _, toks, dates, active, emb = _chunk(c, CHUNK, cdf, centres)
        a, b = c * CHUNK, (c + 1) * CHUNK
        out["toks"][offs[a] : offs[b]] = toks
        out["dates"][a:b], out["active"][a:b], out["emb"][a:b] = dates, active, emb
    for arr in out.values():
        arr.flush()
    out.clear()  # the last references: the files are closed before they are renamed
    np.save(d / ".offs.tmp.npy", offs)
    for k, arr in zip(("qtok", "qemb", "as_of"), _queries(cdf, centres)):
        np.save(d / f".{k}.tmp.npy", arr)
    for k in _NAMES:
        os.replace(d / f".{k}.tmp.npy", d / f"{k}.npy")


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(n: int, path: Path, progress: bool = True, clustered: bool = False, ann: bool = False, thread_size: int = 0) -> dict[str, Any]:
    """Build the store of the workload's first ``n`` documents at ``path``; returns timings.

    The documents go in with their embeddings supplied (``HashEmbedder`` stands in for a model);
    the workload's inactive 10% are retired by one ``supersede_many`` effective before every
    as-of date, so each query's candidates are exactly the workload's ``active & date <= as_of``.

    ``ann``: then build the HNSW index over them (``Store.build_ann``), timed apart.
    ``thread_size``: put each run of that many consecutive documents in one thread (0: no
    threads), as mail and chat stores are; their queries then take thread context.
    """
    import tempfile
    import time

    import mempp
    from mempp.progress import ProgressBar

    from .membw import fresh_memory_gbs

    w = load(n, clustered)
    days = np.datetime_as_string(np.asarray(w.dates).astype("datetime64[D]"))
    # The first add of a process also loads the compiled kernels from numba's cache (about half a
    # second, once): done here into a scratch store, timed apart, so that the rate is the ingest's.
    m = min(n, 2000)
    warm_docs = [{"text": t, "date": str(days[i])} for i, t in enumerate(w.texts(0, m))]
    with tempfile.TemporaryDirectory(prefix="mempp-warm-") as tmp:
        t = time.perf_counter()
        with mempp.Store.open(Path(tmp) / "s", embedder=mempp.HashEmbedder(dim=384)) as warm:
            warm.add(warm_docs, embeddings=np.ascontiguousarray(w.emb[:m]))
        warm_s = time.perf_counter() - t
    fresh = fresh_memory_gbs()
    store = mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=384))  # embeddings are supplied
    step = 50_000
    add_s = 0.0
    bar = ProgressBar(n, "ingest", enabled=progress)
    for a in range(0, n, step):
        texts = w.texts(a, min(n, a + step))
        docs = [{"text": t, "date": str(days[a + i])} for i, t in enumerate(texts)]
        if thread_size:
            for i, d in enumerate(docs):
                d["thread"] = f"t{(a + i) // thread_size}"
        emb = np.ascontiguousarray(w.emb[a : a + len(docs)])
        t = time.perf_counter()
        store.add(docs, embeddings=emb)
        add_s += time.perf_counter() - t
        bar.update(len(docs))
    bar.close()
    inactive = np.flatnonzero(~np.asarray(w.active))
    active = np.flatnonzero(np.asarray(w.active))
    retired_by = active[np.arange(len(inactive)) % max(len(active), 1)]  # any active document; the event is what retires it
    before = str(np.datetime64(DAY0 - 1, "D"))
    t = time.perf_counter()
    # before every document's own date (the workload's inactive documents are never valid): asked for
    store.supersede_many([(int(o), int(r), before) for o, r in zip(inactive, retired_by)], backdate=True)
    sup_s = time.perf_counter() - t
    out = {
        "ingest_docs_per_s": round(n / add_s, 1),
        "ingest_s": round(add_s, 2),
        "warmup_add_s": round(warm_s, 3),
        "fresh_memory_gbs": fresh,
        "warmup_docs": m,
        "ingest_docs_per_s_with_warmup": round(n / (add_s + warm_s), 1),
        "supersede_s": round(sup_s, 2),
    }
    if ann:
        t = time.perf_counter()
        store.build_ann(min_docs=1)
        out["ann_build_s"] = round(time.perf_counter() - t, 1)
    store.close()
    out["store_mb"] = round(_du(path) / 1e6, 1)
    return out
