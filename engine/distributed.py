"""Past one machine, on Ray: corpus embedding and bulk scoring, each equal to one process's.

Needs the extra ``mempp[ray]`` (Ray Data, pinned to the minor version it is tested with):
without it this module imports, and each of its functions raises ``ImportError`` saying which
extra to install. Nothing here schedules,
queues or talks to workers itself: embedding is a Ray Data ``map_batches`` over an actor pool,
scoring runs Ray actors.

- :func:`embed`: documents (JSON Lines or Parquet paths, or an Arrow table) to the same rows
  plus an ``embedding`` column (and ``embedding_windows`` for a store that embeds windows),
  computed with the store's model, template and windows as ``Store.add`` would; each actor
  loads the ONNX model once (on CUDA when it is given a GPU). ``Store.add(table,
  embeddings="embedding")`` then commits them with the single writer.
- :func:`score`: the rows of ``Store.query_batch`` for the same questions, either
  *query-parallel* (every worker opens the store read-only and answers a slice of the
  questions) or *segment-sharded* (``shards=N``: every worker holds a run of the store's units;
  the driver merges the legs exactly: ``mempp.gather``).

``connect(address)`` joins a Ray cluster (``"local"`` or None starts one on this machine,
unless Ray is already initialized). See ``docs/DISTRIBUTED.md``.

Owns everything that touches Ray: the embedding actors, the scoring actors and their calls. The
merge itself is ``mempp.gather``'s and a shard's work ``mempp.shards``'s, both free of Ray.

Never imports: planner, cli, mempp.bench.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

try:
    import ray
    import ray.data
except ImportError:  # the extra is not installed: the functions say so when called
    ray = None

NO_RAY = "mempp.distributed runs on Ray, which is not installed: pip install 'mempp[ray]'"


def _need_ray() -> None:
    if ray is None:
        raise ImportError(NO_RAY)

import numpy as np

from .config import IndexConfig
from .errors import EmbedderError, MemppError, ValidationError
from .ingest import check_vector, prepare_batch
from .results import BATCH_SCHEMA
from .options import DEFAULT_CHUNK, check_texts, stream_chunk
from .tables import EMBEDDING, LINE, WINDOWS_SUFFIX, is_table, records_table, table_records
from .batches import render_row

__all__ = ["connect", "embed", "embed_batches", "score"]

EMBED_BATCH = 256  # documents per actor call (the embedder sorts them by length and runs 32 at a time)
JSONL_BLOCK = 10_000  # JSON Lines records per block handed to Ray Data
SHARD_CHUNK = 64  # queries per round of segment-sharded scoring (a shard holds their masks and dense scores meanwhile)


def connect(address: str | None = None, **init: Any) -> None:
    """Join the Ray cluster at ``address`` (``"auto"``, ``"ray://host:10001"``, ...); None or
    ``"local"`` starts one on this machine. Nothing happens when Ray is already initialized."""
    _need_ray()
    if ray.is_initialized():
        return
    if address in (None, "local"):
        init.setdefault("include_dashboard", False)
        ray.init(**init)
    else:
        ray.init(address=address, **init)


# --- embedding ----------------------------------------------------------------------------------


def _store_info(store: Any, index: IndexConfig | None, model: dict | None) -> tuple[dict, IndexConfig]:
    """The embedder description and index config to embed with: the store's (a path or an open
    ``Store``), else ``index``/``model``, else the defaults of a new store."""
    from .store import DEFAULT_EMBEDDER, Store

    if store is not None:
        if isinstance(store, Store):
            return store.embedder_info, store.index
        if not Path(store).exists():
            raise ValidationError(f"{store}: no such store", field="store")
        with Store.open(store, read_only=True) as s:
            return s.embedder_info, s.index
    return dict(model or DEFAULT_EMBEDDER), index or IndexConfig()


def _make_embedder(info: dict, device: str | None, threads: int | None):
    """The store's embedder on a worker (a shipped model with ``threads`` and ``device``)."""
    from .embedder import MODELS, OnnxEmbedder, embedder_for

    spec = next((m for m in MODELS.values() if m.model_id == info.get("model_id")), None)
    if spec is not None:
        recorded = info.get("model_sha256")
        if recorded is not None and recorded != spec.model_sha256:
            raise EmbedderError(f"the store's model {spec.model_id} has sha256 {recorded}; this mempp ships {spec.model_sha256}")
        return OnnxEmbedder(model=spec.name, threads=threads, device=device)  # raises when CUDA is asked for and not active
    emb = embedder_for(info)
    if emb is None:
        raise EmbedderError(f"mempp cannot recreate the model {info.get('model_id')!r} on a worker")
    return emb


class _EmbedActor:
    """One embedding worker of the actor pool: the model loaded once, then batch after batch."""

    def __init__(self, info: dict, index: dict, device: str | None, threads: int | None):
        self.index = IndexConfig.from_json(index)
        self.dim = int(info["dim"])
        self.embedder = _make_embedder(info, device, threads)

    def __call__(self, batch):
        import pyarrow as pa

        names = batch.column_names
        records = list(table_records(batch, skip=(EMBEDDING, EMBEDDING + WINDOWS_SUFFIX)))
        try:
            rows, _ = prepare_batch(records, None, self.dim)
        except ValidationError as exc:
            where = exc.record
            if where is not None and LINE in names:
                raise ValidationError(f"line {batch.column(LINE)[where].as_py()}: {exc.message}", field=exc.field, key=exc.key) from None
            raise
        keep = [i for i, r in enumerate(rows) if r is not None]
        texts = [render_row(self.index, rows[i]) for i in keep]
        emb = np.zeros((len(rows), self.dim), dtype=np.float32)
        if keep:
            emb[keep] = self.embedder.embed(texts, batch_size=32)
        out = batch.drop_columns([n for n in (EMBEDDING, EMBEDDING + WINDOWS_SUFFIX, LINE) if n in names])
        vtype = pa.list_(pa.float32(), self.dim)
        out = out.append_column(EMBEDDING, pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1), pa.float32()), self.dim))
        if self.index.window_stride and hasattr(self.embedder, "embed_windows"):
            wins = [[] for _ in rows]
            if keep:
                vecs, owner = self.embedder.embed_windows(texts, self.index.window_stride, batch_size=32)
                for v, o in zip(vecs, owner):
                    wins[keep[int(o)]].append(v)
            flat = np.concatenate([np.stack(w) for w in wins if w]) if any(wins) else np.zeros((0, self.dim), np.float32)
            offsets = np.concatenate([[0], np.cumsum([len(w) for w in wins])]).astype(np.int32)
            inner = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1), pa.float32()), self.dim)
            out = out.append_column(EMBEDDING + WINDOWS_SUFFIX, pa.ListArray.from_arrays(pa.array(offsets), inner, type=pa.list_(vtype)))
        return out


def _paths(source: Any) -> list[str]:
    if isinstance(source, (str, os.PathLike)):
        return [os.fspath(source)]
    return [os.fspath(p) for p in source]


def _jsonl_blocks(paths: list[str]) -> Iterator:
    from .inputs import read_jsonl

    for path in paths:
        block: list = []
        try:
            for item in read_jsonl(path):
                block.append(item)
                if len(block) >= JSONL_BLOCK:
                    yield records_table(block)
                    block = []
            if block:
                yield records_table(block)
        except ValidationError as exc:
            msg = exc.message if exc.message.startswith(path) else f"{path}: {exc.message}"
            raise ValidationError(msg, field=exc.field) from None


def _dataset(source: Any):
    import pyarrow as pa

    if is_table(source):
        table = source if isinstance(source, pa.Table) else pa.Table.from_batches([source])
        return ray.data.from_arrow(table)
    paths = _paths(source)
    if not paths:
        raise ValidationError("no source given", field="source")
    for p in paths:
        if not Path(p).exists():
            raise ValidationError(f"{p}: no such file", field="source")
    kinds = {"parquet" if (p.endswith(".parquet") or Path(p).is_dir()) else "jsonl" for p in paths}
    if kinds == {"parquet"}:
        return ray.data.read_parquet(paths)
    if kinds != {"jsonl"}:
        raise ValidationError("give JSON Lines files or Parquet files, not both", field="source")
    return ray.data.from_arrow(list(_jsonl_blocks(paths)) or [records_table([])])


def embed_batches(
    source: Any, *, num_workers: int | None = None, num_gpus: float = 0, batch_size: int = EMBED_BATCH, store: Any = None,
    index: IndexConfig | None = None, model: dict | None = None, cpus_per_worker: int | None = None,
) -> Iterator:
    """:func:`embed`, yielding ``pyarrow.Table`` pieces in the source's order as they are done."""
    _need_ray()
    info, idx = _store_info(store, index, model)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(f"expected an integer >= 1, got {batch_size!r}", field="batch_size")
    if num_gpus < 0:
        raise ValidationError(f"expected a number >= 0, got {num_gpus!r}", field="num_gpus")
    connect()
    cpus = max(1, int(cpus_per_worker or min(2, os.cpu_count() or 1)))
    if num_workers is None:
        if num_gpus:
            num_workers = max(1, int(ray.cluster_resources().get("GPU", 0) // num_gpus))
        else:
            num_workers = max(1, int(ray.cluster_resources().get("CPU", 1)) // cpus)
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValidationError(f"expected an integer >= 1, got {num_workers!r}", field="num_workers")
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # the rows come back in the source's order
    ctx.enable_progress_bars = False  # mempp's own bar (the CLI) instead
    # Every actor of the pool must fit at once, and one CPU stays free for Ray Data's own tasks
    # (listing and reading Parquet files): on a smaller cluster the actors declare less than the
    # threads they run (a reservation, not a limit).
    actor_cpus = min(float(cpus), max(0.25, (float(ray.cluster_resources().get("CPU", 1)) - 1) / num_workers))
    ds = _dataset(source).map_batches(
        _EmbedActor,
        fn_constructor_args=(info, idx.to_json(), "cuda" if num_gpus else None, cpus),
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=num_workers),
        num_cpus=actor_cpus,
        num_gpus=num_gpus or None,
    )
    try:
        for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
            yield batch
    except Exception as exc:
        raise _unwrapped(exc) from None


def embed(
    source: Any, *, num_workers: int | None = None, num_gpus: float = 0, batch_size: int = EMBED_BATCH, store: Any = None,
    index: IndexConfig | None = None, model: dict | None = None, cpus_per_worker: int | None = None,
    progress: Callable[[int], None] | None = None,
):
    """Embed documents on a Ray cluster: the source's rows plus ``embedding`` (float32, fixed-size list).

    ``source``: JSON Lines files (parsed by this process into document tables: ``mempp.tables``),
    Parquet files or directories (read by the workers), or an Arrow table of documents.
    ``store``: a store (path or ``Store``) whose model, ``embed_template`` and ``window_stride``
    to use (default: a new store's: bge-small-en-v1.5, the text alone, no windows); ``index`` and
    ``model`` (an embedder description) instead of a store. With a ``window_stride`` the rows also
    get ``embedding_windows`` (each document's window vectors; ``Store.add`` stores them).
    ``num_workers``: embedding actors (default: the cluster's CPUs over ``cpus_per_worker``, or
    its GPUs over ``num_gpus``); ``num_gpus``: GPUs per actor (0: CPU; more: its ONNX session
    runs on CUDA, and an actor where CUDA is not active fails); ``cpus_per_worker``: CPUs (and
    ONNX threads) per actor, default 2 or fewer; ``batch_size``: documents per actor call.
    The embeddings equal ``Store.add``'s own within float32 round-off (batches pad differently).
    """
    import pyarrow as pa

    _need_ray()
    parts = []
    for piece in embed_batches(
        source, num_workers=num_workers, num_gpus=num_gpus, batch_size=batch_size, store=store, index=index, model=model,
        cpus_per_worker=cpus_per_worker,
    ):
        parts.append(piece)
        if progress is not None:
            progress(piece.num_rows)
    if not parts:
        return pa.table({EMBEDDING: pa.array([], pa.list_(pa.float32(), 1))})
    return pa.concat_tables(parts)


def _unwrapped(exc: BaseException) -> BaseException:
    """The mempp error a worker raised, out of Ray's wrappers (else ``exc``)."""
    seen = exc
    for _ in range(10):
        if isinstance(seen, MemppError):
            return type(seen)(*seen.args) if not isinstance(seen, ValidationError) else ValidationError(
                seen.message, field=seen.field, record=seen.record, key=seen.key
            )
        cause = getattr(seen, "cause", None) or seen.__cause__
        if cause is None or cause is seen:
            break
        seen = cause
    return exc


# --- bulk scoring -------------------------------------------------------------------------------


class _QueryWorker:
    """A query-parallel worker: the store opened read-only at the driver's version."""

    def __init__(self, path: str, version: int):
        from .store import Store

        self.store = Store.open(path, read_only=True, version=version)

    def ready(self) -> bool:
        return True

    def run(self, start: int, texts: list, embeddings, as_ofs: list, k: int, chunk: int, options: dict):
        import pyarrow as pa
        import pyarrow.compute as pc

        table = self.store.query_batch(texts, embeddings, k=k, as_of=as_ofs, chunk=chunk, **options)
        query = pc.add(table.column("query"), pa.scalar(start, pa.int32()))
        return table.set_column(0, "query", query)


def score(
    store: Any, queries: Sequence[str], *, k: int = 10, as_of: Any = None, num_workers: int | None = None, shards: int | None = None,
    embeddings: Any = None, chunk: int = DEFAULT_CHUNK, progress: Callable[[int], None] | None = None, stats: dict | None = None,
    **query_options: Any,
):
    """``Store.query_batch(queries, ...)``'s rows, computed on a Ray cluster (same columns, order and values).

    ``store``: its path (or an open ``Store``: its path and version); every worker must see it
    (a shared file system or an object-store mount). ``as_of``: one value or one per question;
    ``embeddings``: precomputed question vectors; ``query_options``: ``query_batch``'s (filters,
    weights, depth, reserve, context, ...). Questions are embedded in ``query_batch``'s chunks,
    so the vectors are the ones it computes.

    Without ``shards`` (query-parallel): ``num_workers`` actors (default: the cluster's CPUs)
    each open the store and answer chunks of the questions. With ``shards=N`` (segment-sharded,
    for a store larger than one machine's memory): N actors each hold a run of adjacent units
    (about 1/N of the documents); this process embeds the questions, sends them to every shard,
    merges the legs exactly and answers with the planner (``mempp.gather``). Shards scan
    exactly: a store with an ANN index needs ``vector_index="exact"`` there (``query_batch``
    returns the same rows with it).
    ``stats``: a dict to receive where the time went (seconds starting the workers, embedding
    questions, in the driver's merge, waiting on the shards; rounds and fetched documents).
    """
    import pyarrow as pa

    from .gather import Driver, chunk_options, plan_shards
    from .store import Store

    _need_ray()
    owned = not isinstance(store, Store)
    st = Store.open(store, read_only=True, create=False) if owned else store
    try:
        searcher = st.searcher()  # one version for the whole run
        texts, as_ofs = check_texts(queries, as_of)
        opts = chunk_options(searcher, as_ofs, k, len(texts), query_options, sharded=shards is not None)  # every option checked before any work
        n_docs = searcher.snapshot.n_docs
        step = stream_chunk(n_docs, chunk)
        vecs = None
        if embeddings is not None:
            vecs = np.asarray(embeddings, dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape != (len(texts), st.dim):
                raise ValidationError(f"expected shape ({len(texts)}, {st.dim}), got {vecs.shape}", field="embeddings")
        if not texts or not n_docs or not opts[0].k:
            return searcher.query_batch(texts, vecs, k=k, as_of=as_ofs, chunk=chunk, **query_options)
        connect()
        stats = stats if stats is not None else {}
        if shards is None:
            return _score_parallel(st, texts, vecs, as_ofs, k, step, query_options, num_workers, progress, stats)
        t = time.perf_counter()
        specs = plan_shards(searcher, shards)
        driver = Driver(searcher, specs)
        # Every shard must be up at once: a cluster with fewer CPUs than shards shares them.
        cpus = min(1.0, float(ray.cluster_resources().get("CPU", 1)) / len(specs))
        actor = ray.remote(num_cpus=cpus)(_shard_class())
        workers = [actor.remote(spec) for spec in specs]
        try:

            def call(method: str, args: Sequence[tuple]) -> list:
                return ray.get([getattr(w, method).remote(*a) for w, a in zip(workers, args)])

            call("info", [()] * len(workers))  # every shard open
            stats["start_s"] = time.perf_counter() - t
            embed_s = 0.0
            batches = []
            want_vec = bool(opts[0].weights[2])
            for start in range(0, len(texts), step):
                stop = min(len(texts), start + step)
                blank = [False] * (stop - start)
                if vecs is not None:
                    qv = np.stack([check_vector(v, st.dim) for v in vecs[start:stop]]) if want_vec else None
                elif want_vec:
                    t = time.perf_counter()
                    qv, blank = searcher.embed_questions(texts[start:stop])  # query_batch's own call: the same vectors
                    embed_s += time.perf_counter() - t
                else:
                    qv = None
                for a in range(start, stop, SHARD_CHUNK):
                    b = min(stop, a + SHARD_CHUNK)
                    batches.append(
                        driver.score_chunk(
                            call, a, texts[a:b], opts[a:b], None if qv is None else qv[a - start : b - start], blank[a - start : b - start]
                        )
                    )
                    if progress is not None:
                        progress(b - a)
            stats.update(
                embed_s=embed_s, driver_s=driver.driver_s, shards_s=driver.calls_s, rounds=sum(driver.rounds), fetched=driver.fetched,
                shards=len(specs),
            )
            return pa.Table.from_batches(batches, schema=BATCH_SCHEMA)
        except ray.exceptions.RayError as exc:
            raise _unwrapped(exc) from None
        finally:
            for w in workers:
                ray.kill(w)
    finally:
        if owned:
            st.close()


def _shard_class():
    from .shards import Shard

    return Shard


def _score_parallel(st, texts, vecs, as_ofs, k, step, options, num_workers, progress, stats):
    import pyarrow as pa
    from ray.util import ActorPool

    if num_workers is None:
        num_workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValidationError(f"expected an integer >= 1, got {num_workers!r}", field="num_workers")
    pieces = [(s, min(len(texts), s + step)) for s in range(0, len(texts), step)]  # query_batch's own chunks
    num_workers = min(num_workers, len(pieces))
    actor = ray.remote(num_cpus=min(1.0, float(ray.cluster_resources().get("CPU", 1)) / num_workers))(_QueryWorker)
    t = time.perf_counter()
    workers = [actor.remote(str(st.path), st.version) for _ in range(num_workers)]
    try:
        ray.get([w.ready.remote() for w in workers])  # every worker has the store open
        stats["start_s"] = time.perf_counter() - t
        stats["workers"] = num_workers
        pool = ActorPool(workers)
        args = [(a, texts[a:b], None if vecs is None else vecs[a:b], as_ofs[a:b], k, step, options) for a, b in pieces]
        tables = []
        for (a, b), t in zip(pieces, pool.map(lambda w, x: w.run.remote(*x), args)):
            tables.append(t)
            if progress is not None:
                progress(b - a)
        return pa.concat_tables(tables) if tables else pa.Table.from_batches([], schema=BATCH_SCHEMA)
    except ray.exceptions.RayError as exc:
        raise _unwrapped(exc) from None
    finally:
        for w in workers:
            ray.kill(w)
