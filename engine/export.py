"""A store's documents as one file, and that file added back: ``mempp export`` and ``mempp add`` of an export.

Owns the export format (docs/API.md, *Export*): one row per document in doc id order with the
fields ``add`` takes (``id``, ``text``, ``author``, ``date``, ``thread``, ``channel``,
``source``, ``meta``), its embedding, and what the store recorded about it (``doc_id``,
``ingested_at``, ``valid_until``, ``replaced_by``: every supersession of it with its effective
and recorded dates); a header (Parquet: the schema's metadata; JSON Lines: the first line) names
the format, the embedder, the analyzer and the index configuration. :func:`add_export` rebuilds a
store from it commit by commit, in the original order, so the same-id versions and the explicit
supersessions come out as they were, and nothing is embedded.

Never imports: cli, mempp.bench, onnxruntime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from mempp.storage import FOREVER, NAT

from .dates import from_us
from .errors import ValidationError
from .replaced import replacement_seen

FORMAT = 1
MARK = "mempp_export"  # Parquet schema metadata key / the JSON Lines header's only key


def _iso(us: int) -> str | None:
    return None if us in (NAT, FOREVER) else from_us(int(us)).isoformat()


def export_header(searcher) -> dict:
    """The export's header: its format, size, version and what the store was built with (a
    principal's export: its readable documents, no readers or groups)."""
    view = getattr(searcher.snapshot, "readable", None)
    return {
        "format": FORMAT,
        "documents": int(searcher.snapshot.n_live if view is None else view.sum()),
        "version": int(searcher.version),
        "embedder": searcher.embedder_info,
        "analyzer": searcher.analyzer.to_json(),
        "index": searcher.index.to_json(),
        "groups": {} if view is not None else {g: sorted(m) for g, m in sorted(searcher.access().members.items()) if m},
        # a principal's export: the directory's entries that name an author it may read
        "people": list(searcher.access().directory) if view is None else searcher.name_matcher.entries_with_authors(),
    }


def export_rows(searcher) -> Iterator[dict]:
    """The export's rows of a :class:`~mempp.Searcher`'s version, doc id order (the embedding a float32 numpy vector)."""
    snap = searcher.snapshot
    if snap.has_windows:
        raise ValidationError("this store holds window vectors (a window_stride); export does not carry them yet", field="store")
    if snap.skipped:
        raise ValidationError(f"segments are unreadable ({', '.join(snap.skipped)}); repair the store before exporting it", field="store")
    mine = getattr(snap, "readable", None)  # a principal's export (a ReaderView): its documents only, no readers
    readers = {} if mine is not None else searcher.access().readers
    by_old: dict[int, list[dict]] = {}
    for o, n, e, r in zip(*(np.asarray(a).tolist() for a in (snap.sup_old, snap.sup_new, snap.sup_effective, snap.sup_recorded))):
        seen = replacement_seen(snap, n)  # else not held, or not the reader's: unnamed
        by_old.setdefault(o, []).append({"doc_id": n if seen else None, "effective": _iso(e), "recorded_at": _iso(r)})
    step = 4096
    gone = set(snap.erased.tolist())  # erased rows: not documents any more
    for lo in range(0, snap.n_docs, step):
        docs = [d for d in range(lo, min(lo + step, snap.n_docs)) if (mine is None or mine[d]) and d not in gone]
        for d, row in zip(docs, snap.rows(docs)):
            yield {
                "doc_id": d,
                "id": row["key"],
                "text": row["text"],
                "author": row["author"],
                "date": row["date"].isoformat() if row["date"] else None,
                "thread": row["thread"],
                "channel": row["channel"],
                "source": row["source"],
                "meta": json.loads(row["meta"]) if row["meta"] else None,
                "ingested_at": row["ingested_at"].isoformat(),
                "valid_until": _iso(int(snap.valid_until[d])),
                "replaced_by": by_old.get(d, []),
                "readers": None if readers.get(d) is None else list(readers[d]),
                "embedding": np.asarray(row["embedding"], dtype=np.float32),
            }


def _schema(header: dict, dim: int):
    import pyarrow as pa

    sup = pa.list_(pa.struct([("doc_id", pa.int64()), ("effective", pa.string()), ("recorded_at", pa.string())]))
    return pa.schema(
        [("doc_id", pa.int64())]
        + [(n, pa.string()) for n in ("id", "text", "author", "date", "thread", "channel", "source", "meta", "ingested_at", "valid_until")]
        + [("replaced_by", sup), ("readers", pa.list_(pa.string())), ("embedding", pa.list_(pa.float32(), dim))],
        metadata={MARK: json.dumps(header)},
    )


def _tables(searcher) -> Iterator[Any]:
    """The export as Arrow tables of at most 4096 rows (the Parquet file's schema, its header in the metadata)."""
    header = export_header(searcher)
    schema = _schema(header, int(searcher.dim or 0))
    rows: list[dict] = []
    for row in export_rows(searcher):
        row["meta"] = None if row["meta"] is None else json.dumps(row["meta"], ensure_ascii=False, sort_keys=True)
        rows.append(row)
        if len(rows) == 4096:
            yield _table(schema, rows)
            rows = []
    if rows or not header["documents"]:
        yield _table(schema, rows)


def export_table(searcher) -> Any:
    """Every document of a :class:`~mempp.Searcher`'s version as one Arrow table (``Store.export``)."""
    import pyarrow as pa

    return pa.concat_tables(list(_tables(searcher)))


def write_export(searcher, out: str | Path) -> int:
    """Write a :class:`~mempp.Searcher`'s documents to ``out`` (``.parquet`` or ``.jsonl``); returns the row count."""
    out = str(out)
    if out.endswith(".jsonl"):
        n = 0
        with open(out, "w", encoding="utf-8") as f:
            f.write(json.dumps({MARK: export_header(searcher)}) + "\n")
            for row in export_rows(searcher):
                row["embedding"] = [float(x) for x in row["embedding"]]  # float32 -> exact decimal, read back bit for bit
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
        return n
    if not out.endswith(".parquet"):
        raise ValidationError(f"{out}: the export is a .parquet or a .jsonl file", field="--out")
    import pyarrow.parquet as pq

    n = 0
    writer = None
    try:
        for table in _tables(searcher):
            if writer is None:
                writer = pq.ParquetWriter(out, table.schema)
            writer.write_table(table)
            n += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    return n


def _table(schema, rows: list[dict]):
    import pyarrow as pa

    dim = schema.field("embedding").type.list_size
    emb = np.stack([r.pop("embedding") for r in rows]).astype(np.float32).reshape(-1) if rows else np.zeros(0, np.float32)
    arrays = [pa.array([r[f.name] for r in rows], f.type) for f in schema if f.name != "embedding"]
    arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(emb, pa.float32()), dim))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_header(path: str | Path) -> dict | None:
    """The export header of ``path``, or None when it is not a mempp export (any other document file)."""
    path = str(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            if head == b"PAR1":
                import pyarrow.parquet as pq

                meta = pq.read_schema(path).metadata or {}
                raw = meta.get(MARK.encode())
                return json.loads(raw) if raw else None
            f.seek(0)
            first = f.readline(1 << 20)
    except OSError:
        return None
    try:
        obj = json.loads(first)
    except ValueError:
        return None
    return obj[MARK] if isinstance(obj, dict) and set(obj) == {MARK} and isinstance(obj[MARK], dict) else None


def read_export(path: str | Path) -> list[dict]:
    """Every row of an export file (embedding: float32 vector)."""
    path = str(path)
    if read_header(path) is None:
        raise ValidationError(f"{path}: not a mempp export", field="file")
    if path.endswith(".jsonl") or open(path, "rb").read(4) != b"PAR1":
        rows = []
        with open(path, encoding="utf-8") as f:
            next(f)
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    row["embedding"] = np.asarray(row["embedding"], dtype=np.float32)
                    rows.append(row)
        return rows
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    emb = table.column("embedding").combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    dim = table.schema.field("embedding").type.list_size
    emb = emb.reshape(-1, dim) if len(table) else np.zeros((0, dim), np.float32)
    rows = table.drop_columns(["embedding"]).to_pylist()
    for row, vec in zip(rows, emb):
        row["meta"] = json.loads(row["meta"]) if row["meta"] else None
        row["embedding"] = vec
    return rows


def open_args(header: dict) -> dict:
    """``Store.open`` keywords that make a new store as the exported one was: its model, analyzer, index."""
    from .config import IndexConfig
    from .embedder import MODELS, HashEmbedder
    from mempp.storage import Analyzer

    info = header["embedder"]
    model_id = info.get("model_id", "")
    if model_id.startswith("hash-"):
        embedder: Any = HashEmbedder(int(info["dim"]))
    else:
        spec = next((m for m in MODELS.values() if m.model_id == model_id), None)
        if spec is None:
            raise ValidationError(f"the export was embedded with {model_id!r}, which mempp does not ship; open the store with that embedder", field="embedder")
        embedder = spec.name
    return {"embedder": embedder, "analyzer": Analyzer.from_json(header["analyzer"]), "index": IndexConfig.from_json(header["index"])}


def add_export(store, rows: list[dict], progress=None, header: dict | None = None) -> dict:
    """Add an export's rows to ``store``, commit by commit in the original order, nothing embedded;
    then replay every supersession the store does not hold yet, with its effective date. The
    groups and the people directory of ``header`` and each row's readers are the new store's too.
    Returns ``{"added", "existing", "supersessions"}``."""
    if rows and store.dim and len(rows[0]["embedding"]) != store.dim:
        raise ValidationError(f"the export's embeddings have {len(rows[0]['embedding'])} dimensions, the store's {store.dim}", field="embedding")
    held = {r["doc_id"] for r in rows}
    events = sorted(  # a replacement the export does not hold (a reader's export): -1, replayed unnamed
        ((e["recorded_at"] or "", r["doc_id"], e["doc_id"] if e["doc_id"] in held else -1, e["effective"])
         for r in rows for e in r.get("replaced_by") or ()),
    )
    for group, members in (header or {}).get("groups", {}).items():
        store.add_members(group, members)
    if (header or {}).get("people"):
        store.add_people(header["people"])
    mapped: dict[int, int] = {}
    added = existing = replayed = 0
    ev = 0

    def replay(until: str | None, inclusive: bool) -> None:
        nonlocal ev, replayed
        todo, unnamed = [], []
        while ev < len(events) and (until is None or events[ev][0] < until or (inclusive and events[ev][0] == until)):
            rec, old, new, eff = events[ev]
            ev += 1
            if old in mapped and new == -1:
                unnamed.append((mapped[old], eff))
            elif old in mapped and new in mapped:
                todo.append((mapped[old], mapped[new], eff))
        if not (todo or unnamed):
            return
        held = _events(store)  # what the store holds already (a file added again replays nothing twice)
        unnamed = [u for u in unnamed if (u[0], -1, u[1]) not in held]
        todo = [t for t in todo if t not in held]
        if unnamed:
            store.writer.mark_replaced(unnamed)
        if todo:
            store.supersede_many(todo, backdate=True)
        replayed += len(unnamed) + len(todo)

    for group in _groups(rows):
        at = group[0]["ingested_at"]
        replay(at, inclusive=False)
        docs = [{k: r[k] for k in ("id", "text", "author", "date", "thread", "channel", "source") if r.get(k) is not None} | {"meta": r.get("meta") or {}}
                for r in group]
        for d, r in zip(docs, group):
            if not d["meta"]:
                del d["meta"]
            if "readers" in r:  # an export from before readers existed has none: everyone's
                d["readers"] = r["readers"]
        ids = store.add(docs, embeddings=np.stack([r["embedding"] for r in group]).astype(np.float32))
        added += ids.new
        existing += ids.existing
        for r, i in zip(group, ids):
            if i is not None:
                mapped[r["doc_id"]] = int(i)
        if progress is not None:
            progress(len(group))
        replay(at, inclusive=True)
    replay(None, inclusive=True)
    return {"added": added, "existing": existing, "supersessions": replayed}


def _events(store) -> set[tuple[int, int, str]]:
    snap = store.searcher().snapshot
    return {(int(o), int(n), _iso(int(e))) for o, n, e in zip(snap.sup_old, snap.sup_new, snap.sup_effective)}


def _groups(rows: list[dict]) -> Iterator[list[dict]]:
    """The rows of each original commit (consecutive rows with one ``ingested_at``)."""
    group: list[dict] = []
    for r in rows:
        if group and r["ingested_at"] != group[0]["ingested_at"]:
            yield group
            group = []
        group.append(r)
    if group:
        yield group
