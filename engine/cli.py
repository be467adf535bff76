"""The ``mempp`` command: a thin adapter over the Python API.

Exit codes: 0 ok; 1 an error (one line on stderr: ``mempp: error: ...``); 2 bad usage; 141 (quietly)
when the reader of its output went away, as with ``mempp stats S | head -1``.

Owns the command line: the parser of every subcommand, the translation of flags into calls of
:class:`Store` (and a few helpers of the read and ingest paths), what is printed, and the exit
codes. It is the only engine module that imports ``mempp.bench`` (``eval``, ``bench``); it never
reaches past the engine into the planner or the storage layer.

Never imports: planner, writes, versions, mempp.storage, onnxruntime.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Sequence

from .config import (
    DEFAULT_CONTEXT, DEFAULT_CONTEXT_MODE, DEFAULT_DEPTH, DEFAULT_FEEDBACK, DEFAULT_RESERVE_RULE, DEFAULT_SIBLINGS, DEFAULT_TAG_RANK,
)
from .feedback import TAG_RANKS
from .embedder import DEFAULT_MODEL, EMBEDDER_CHOICES, model_spec
from .errors import MemppError, ValidationError
from . import mcp_server

LEG_NAMES = ("lexical", "tag", "vector")
DEFAULT_ALIAS = model_spec(DEFAULT_MODEL).alias


def _weights(s: str) -> tuple[float, float, float]:
    parts = s.split(",")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("expected three numbers: lexical,tag,vector (e.g. 1,1,4)")
    try:
        return tuple(float(p) for p in parts)  # type: ignore[return-value]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not numbers: {s!r}") from None


def _floats(s: str) -> tuple[float, ...]:
    try:
        return tuple(float(p) for p in s.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not numbers: {s!r}") from None


def _legs(s: str) -> tuple[str, ...]:
    legs = tuple(p.strip() for p in s.split(",") if p.strip())
    bad = [leg for leg in legs if leg not in LEG_NAMES]
    if bad or not legs:
        raise argparse.ArgumentTypeError(f"legs are {','.join(LEG_NAMES)}; got {s!r}")
    return legs


def _number(convert, what: str, minimum: float):
    """An argparse type: ``convert(s)`` (``int`` or ``float``), refused below ``minimum`` (and NaN)."""

    def parse(s: str):
        try:
            v = convert(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None
        if not v >= minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {s!r}")
        return v

    return parse


_positive = _number(int, "an integer", 1)
_count = _number(int, "an integer", 0)
_seconds = _number(float, "a number of seconds", 0)


def _wait_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", type=_seconds, default=None, metavar="SECONDS",
                   help="if another writer holds the store, wait up to this long for it (default: fail at once)")


def _embedder(name: str | None):
    """``--embedder``: None (the store's model, or the default for a new store), "hash", or a shipped
    model's name, which the store loads on first use."""
    from .embedder import HashEmbedder

    return HashEmbedder() if name == "hash" else name


def _ranking_args(p: argparse.ArgumentParser, defaults: bool = True) -> None:
    """Query-time ranking switches; with ``defaults=False`` unset ones stay None (a preset fills them)."""
    d = (lambda v: v) if defaults else (lambda v: None)
    p.add_argument("--weights", type=_weights, default=None,
                   help="lexical,tag,vector fusion weights (default 2,1,1 for k up to 15, 1,1,1 above)")
    p.add_argument("--depth", type=int, default=None, help=f"candidates per leg (default {DEFAULT_DEPTH}, or 2k above k = 25)")
    p.add_argument("--no-reserve", action="store_const", const=True, default=d(False), help="no latest-date reserve slots")
    p.add_argument("--legs", type=_legs, default=None, help="legs to run, e.g. lexical,vector (default all)")
    p.add_argument("--context", type=_floats, default=d(DEFAULT_CONTEXT),
                   help="thread-context weights for neighbours 1,2,3 steps away (default 0.8,0.6,0.4; 0 turns it off)")
    p.add_argument("--context-mode", choices=("max", "sum"), default=d(DEFAULT_CONTEXT_MODE), help="how neighbours lift a document")
    p.add_argument("--context-length", type=float, default=None,
                   help="thread context counts fully for documents of at most this many terms, less for longer ones")
    p.add_argument("--question-dates", action="store_const", const=True, default=d(False),
                   help="without --as-of, a date named in the question bounds it")
    p.add_argument("--siblings", type=int, default=d(DEFAULT_SIBLINGS),
                   help=f"thread stage: a hit's thread follows it when the thread holds at most this many documents (default {DEFAULT_SIBLINGS}; 0 off)")
    p.add_argument("--reserve-rule", choices=("relevant", "paper"), default=d(DEFAULT_RESERVE_RULE),
                   help="which documents may take the 3 reserve slots: relevant (lexical matches near the top; default) or paper (any match)")
    p.add_argument("--feedback", type=_count, default=d(DEFAULT_FEEDBACK),
                   help=f"the vector leg scans again from the question plus this many first fused documents (default {DEFAULT_FEEDBACK}; 0 off)")
    p.add_argument("--tag-rank", choices=TAG_RANKS, default=d(DEFAULT_TAG_RANK),
                   help="tag leg order: fused (BM25-then-date fused with cosine; default) or lexical (BM25, then date)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mempp", description="Non-destructive organizational memory.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("add", help="add a file of documents to a store (created if missing)")
    p.add_argument("store")
    p.add_argument("file", help="JSON Lines (one {id, text, author, date, thread, channel, ...} per line), Parquet or Arrow IPC "
                   "with those columns; every record is checked before anything is committed")
    p.add_argument("--embeddings-column", default=None, metavar="NAME",
                   help="Parquet or Arrow: take each document's embedding from this column (and NAME_windows, its window "
                   "vectors) instead of embedding it (`mempp embed` writes 'embedding')")
    p.add_argument("--batch-size", type=int, default=10_000, help="documents per commit (default 10000)")
    p.add_argument("--embedder", choices=EMBEDDER_CHOICES, default=None,
                   help=f"model of a new store (default {DEFAULT_ALIAS}); an existing store keeps its own")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--backdate", action="store_true",
                   help="allow a supersedes naming a document dated after the new one (it would never have been valid)")
    _wait_arg(p)

    p = sub.add_parser("query", help="ask a store a question (or many, with --batch)")
    p.add_argument("store")
    p.add_argument("text", nargs="?", default=None)
    p.add_argument("--batch", default=None, metavar="FILE",
                   help='JSON Lines of {"text", "as_of"?, "id"?}: answer them all (one row per hit)')
    p.add_argument("--out", default=None, help="with --batch: write an Arrow IPC file here instead of JSON Lines to stdout")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="with --batch: score on a Ray cluster ('local' starts one here; needs mempp[ray])")
    p.add_argument("--shards", type=int, default=None, help="with --ray: split the store into this many shards (segment-sharded)")
    p.add_argument("--workers", type=int, default=None, help="with --ray and no --shards: query-parallel workers (default: the cluster's CPUs)")
    p.add_argument("--as-of", default=None, help="ISO date or datetime: answer as the record stood then")
    p.add_argument("--as-known-at", default=None, metavar="DATE",
                   help="ISO date or datetime: use the store as it was known then (the newest version committed by then)")
    p.add_argument("--version", type=int, default=None, help="use this committed version of the store (see `mempp versions`)")
    p.add_argument("--author", action="append", default=None,
                   help="only documents by this author (repeatable; case and spacing do not matter; a name no author has is an error naming the closest)")
    p.add_argument("--date-from", default=None, metavar="DATE", help="only documents dated on or after this ISO date")
    p.add_argument("--date-to", default=None, metavar="DATE", help="only documents dated on or before this ISO date (a date alone: its end)")
    p.add_argument("--thread", action="append", default=None, help="only this thread (repeatable)")
    p.add_argument("--channel", action="append", default=None, help="only this channel (repeatable)")
    p.add_argument("--k", type=_positive, default=10, help="hits to return (default 10)")
    p.add_argument("--json", action="store_true", help="print hits (and plan) as JSON, each hit's text whole")
    p.add_argument("--explain", action="store_true", help="show the plan and each hit's per-leg ranks")
    p.add_argument("--max-chars", type=_positive, default=300,
                   help="in the plain output, cut each hit's text to this many characters (default 300; --json prints it whole)")
    _ranking_args(p)

    p = sub.add_parser("embed", help="embed documents on a Ray cluster into a Parquet document table (needs mempp[ray])")
    p.add_argument("sources", nargs="+", metavar="SRC", help="JSON Lines or Parquet files of documents")
    p.add_argument("--out", required=True, help="the Parquet file to write (the documents plus an 'embedding' column)")
    p.add_argument("--store", default=None, help="embed as this store does (its model, template and windows; default: a new store's)")
    p.add_argument("--ray", default="local", metavar="ADDRESS", help="the Ray cluster ('local', the default, starts one here)")
    p.add_argument("--workers", type=int, default=None, help="embedding actors (default: one per 2 CPUs, or one per GPU)")
    p.add_argument("--gpus", type=int, default=0, help="use this many GPUs: one actor each, its ONNX session on CUDA")
    p.add_argument("--batch-size", type=int, default=256, help="documents per actor call (default 256)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("get", help="print a stored document (by its id, or a doc id number)")
    p.add_argument("store")
    p.add_argument("key", help="the document's id (its active version, else its newest), or a doc id number")
    p.add_argument("--version", type=int, default=None, help="as in this committed version of the store")

    p = sub.add_parser("history", help="print every version stored under an id, oldest first, with what replaced it and from when")
    p.add_argument("store")
    p.add_argument("key")

    p = sub.add_parser("ls", help="list a store's documents (all, or those valid at --as-of)")
    p.add_argument("store")
    p.add_argument("--as-of", default=None, help="only the documents valid at this ISO date (undated ones left out)")
    p.add_argument("--author", action="append", default=None, help="only this author's documents (repeatable; case does not matter)")
    p.add_argument("--json", action="store_true", help="one JSON object per document (its text whole)")

    p = sub.add_parser("export", help="write every document, its dates, supersessions and embedding to a file `mempp add` reads back")
    p.add_argument("store")
    p.add_argument("--out", required=True, help="F.parquet or F.jsonl")

    p = sub.add_parser("supersede", help="record that NEW replaces OLD from a date on (nothing is deleted)")
    p.add_argument("store")
    p.add_argument("old", help="the id of the document replaced")
    p.add_argument("new", help="the id of the document that replaces it")
    p.add_argument("--effective", default=None, help="ISO date from which NEW replaces OLD (default: NEW's date)")
    p.add_argument("--backdate", action="store_true", help="allow an effective date before OLD's or NEW's own date")
    _wait_arg(p)

    p = sub.add_parser("merge", help="merge a store's segments now, as the merge policy asks (or all, with --force)")
    p.add_argument("store")
    p.add_argument("--force", action="store_true", help="join every run of segments no ANN index separates into one")
    _wait_arg(p)

    p = sub.add_parser("stats", help="counts and sizes of a store")
    p.add_argument("store")
    p.add_argument("--json", action="store_true", help="print the counts as one JSON object")

    p = sub.add_parser("versions", help="committed versions of a store")
    p.add_argument("store")

    p = sub.add_parser("verify", help="check every file of every retained version against its manifest (exit 1: damaged)")
    p.add_argument("store")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")

    p = sub.add_parser(
        "repair",
        help="make a damaged store whole: re-point a lost CURRENT, make derived files again; sets aside, never deletes",
    )
    p.add_argument("store")
    p.add_argument("--rollback", action="store_true",
                   help="if a segment of the current version is damaged, go back to the newest whole version before it")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    _wait_arg(p)

    p = sub.add_parser("eval", help="retrieval evaluation on a benchmark in the shared/eval format")
    p.add_argument("--docs", required=True, help="documents, JSON Lines in the shared/eval format (one store is built per scope)")
    p.add_argument("--questions", required=True, help="questions, JSON Lines in the shared/eval format")
    p.add_argument(
        "--k", type=int, action="append", default=None,
        help="cut-off (repeatable; default 10 and 50); every question is asked once per k and each k scored on its own answer",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument(
        "--ranked-out", default=None,
        help='write one {"id", "k", "ranked": [keys, best first]} line per question and k to this file (k ascending per question)',
    )
    p.add_argument("--embedder", choices=EMBEDDER_CHOICES, default=None,
                   help=f"embedding model: minilm, bge-small (or their full names; default {DEFAULT_ALIAS}, minilm for --baseline); hash: model-free, for quick runs")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--baseline", choices=("bm25", "rrf-siblings"), default=None,
        help="score a plain baseline instead of mempp (bench/baseline.py): bm25, or rrf-siblings (the simple baseline: BM25 + best-window vector, RRF 1/4, thread siblings)",
    )
    p.add_argument("--preset", default="default", help="settings to start from: default, paper (the reference's OrgMemBench recipe) or paper-locomo")
    p.add_argument("--no-stem", action="store_const", const=False, default=None, dest="stem", help="index without stemming")
    p.add_argument("--embed-template", default=None, help='index time: what to embed, e.g. "{author}: {text}"')
    p.add_argument("--window-stride", type=int, default=None, help="index time: window vectors every N tokens for long documents")
    _ranking_args(p, defaults=False)

    p = sub.add_parser("demo", help="build a store from the bundled fictional company and ask it questions")
    p.add_argument("--embedder", choices=EMBEDDER_CHOICES, default=None,
                   help=f"embedding model: minilm, bge-small (default {DEFAULT_ALIAS}); hash: a model-free embedder, for a quick look")
    p.add_argument("--k", type=_positive, default=5, help="evidence documents shown per question (default 5)")

    p = sub.add_parser("warmup", help="compile (or load) every kernel now, as a service does at deploy time")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")

    mcp_server.add_parser(sub)  # mempp mcp: its options and function are mcp_server's

    p = sub.add_parser("bench", add_help=False, help="speed on the peers' workload (mempp bench --help for options)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    # each command's own parser (parse_args reads a command's arguments with it, intermixed); bench parses its own
    parser.commands = {name: p for name, p in sub.choices.items() if name != "bench"}  # type: ignore[attr-defined]
    return parser


def cmd_add(args: argparse.Namespace) -> int:
    import os

    from .progress import ProgressBar
    from .store import Store

    embedder = _embedder(args.embedder) if args.embedder else None
    if args.batch_size < 1:
        raise ValidationError("must be >= 1", field="--batch-size")
    _input_file(args.file)  # a file that cannot be read fails before a store is opened, or created
    from .export import read_header

    header = read_header(args.file)
    if header is not None:
        return _add_export(args, header)
    created = not os.path.lexists(args.store)
    with Store.open(args.store, embedder=embedder, lock_timeout=args.wait) as store:
        # nothing is written before every record and every supersession of the file passes
        try:
            n, joins = _check_records(store, args.file, args.batch_size, quiet=args.quiet, backdate=args.backdate)
        except BaseException:
            if created:  # a new store is kept only for a file whose every record passes
                store.close()
                _remove_unused_store(Path(args.store))
            raise
        added = dups = skipped = 0  # what this process's own commits did (Store.add's Added), whatever others commit
        mine: list[int] = []  # the versions this process committed
        done_where: str | None = None
        column = args.embeddings_column
        embedded = 0

        def count(k: int) -> None:  # documents embedded (only those not stored yet are)
            nonlocal embedded
            embedded += k
            bar.update(k)

        with ProgressBar(n, "add", enabled=not args.quiet) as bar:
            bar.say("0 committed")
            for where, batch in _joined(_records(args.file, args.batch_size, tables=column is not None), joins):
                try:
                    before = bar.n
                    if column is None:
                        ids = store.add(batch, progress=count, backdate=args.backdate)
                    else:  # a document table with its vectors: nothing to embed
                        ids = store.add(batch, embeddings=column, backdate=args.backdate)
                    bar.update(len(where) - (bar.n - before))  # the batch's re-ingests and empty texts, never embedded
                except MemppError as exc:
                    if done_where is None:
                        raise
                    done = f"committed (versions {mine[0]}-{mine[-1]})" if mine else "already stored"
                    raise type(exc)(
                        f"records up to {done_where} were {done}; from {where[0]} nothing was committed: {exc}. "
                        "Running the same command again adds only what is missing"
                    ) from exc
                added += ids.new
                dups += ids.existing
                skipped += ids.skipped
                if ids.new:
                    mine.append(store.version)
                done_where = where[-1]
                bar.say(f"{added + dups + skipped} committed ({added} new, {dups} already stored)")
        print(f"{args.store}: {added} added, {dups} already stored, {skipped} empty skipped; "
              f"{len(store)} documents at version {store.version}; {embedded if column is None else 0} embedded")
    return 0


def _add_export(args: argparse.Namespace, header: dict) -> int:
    """``mempp add STORE EXPORT``: the exported documents with their own embeddings (nothing is
    embedded), commit by commit as they were, then their supersessions with their dates."""
    import os

    from .export import add_export, open_args, read_export
    from .progress import ProgressBar
    from .store import Store

    rows = read_export(args.file)
    kwargs = open_args(header) if not os.path.lexists(args.store) or not os.listdir(args.store) else {}
    with Store.open(args.store, lock_timeout=args.wait, **kwargs) as store:
        with ProgressBar(len(rows), "add", enabled=not args.quiet) as bar:
            got = add_export(store, rows, progress=bar.update)
        print(f"{args.store}: {got['added']} added, {got['existing']} already stored, {got['supersessions']} supersessions replayed "
              f"from the export (nothing embedded); {len(store)} documents at version {store.version}")
    return 0


def _remove_unused_store(path: Path) -> None:
    """Remove a store directory this command created and committed nothing to (its lock file and
    empty folders only; anything else in it is left where it is)."""
    for name in ("segments", "manifests"):
        with contextlib.suppress(OSError):
            (path / name).rmdir()
    with contextlib.suppress(OSError):
        if (path / "LOCK").is_file() and not (path / "CURRENT").exists():
            (path / "LOCK").unlink()
    with contextlib.suppress(OSError):
        path.rmdir()


def _input_file(path: str) -> None:
    """Refuse, naming it, an input file that does not exist or cannot be read."""
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise ValidationError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ValidationError(f"{path}: is a directory, not a file of documents") from None
    except PermissionError:
        raise ValidationError(f"{path}: cannot be read (permission denied)") from None


def _records(path: str, batch_size: int, tables: bool = False):
    from .jsonl import read_records, read_tables

    return read_tables(path, batch_size) if tables else read_records(path, batch_size)


def _joined(batches, joins: list[tuple[int, int]]):
    """``batches`` (``(where, records or table)``), consecutive ones joined into one commit where
    a cut would fall inside one of ``joins`` (``(first, last)`` record indexes of the file: a
    ``supersedes`` and the last line of the id it names, committed together)."""
    import pyarrow as pa

    held_where: list[str] = []
    held: list = []
    end = 0
    j = 0
    for where, batch in batches:
        held_where += where
        held.append(batch)
        end += len(where)
        while j < len(joins) and joins[j][1] < end:
            j += 1
        if j < len(joins) and joins[j][0] < end <= joins[j][1]:
            continue  # a supersedes and the id it names would land in different commits
        if isinstance(held[0], list):
            yield held_where, [r for b in held for r in b]
        else:
            yield held_where, pa.concat_tables(held) if len(held) > 1 else held[0]
        held_where, held = [], []


def _check_records(store, path: str, batch_size: int, quiet: bool = False, backdate: bool = False) -> tuple[int, list[tuple[int, int]]]:
    """Check every record of ``path`` as ``Store.add`` would, before anything is committed: each
    record's fields, and the supersessions the whole file records, by the rule every write
    follows (``supersession.plan``): the versions of an id ordered by date, every ``supersedes``
    resolved among the stored documents and the whole file whatever the order of its lines, a
    cycle or (without ``backdate``) a ``supersedes`` naming a later-dated document refused. Reads
    the file once, a batch at a time (memory: one batch, and the file's ids and references).
    Returns the number of records and the spans of records that must be committed together
    (a ``supersedes`` and the last line of the id it names, when that comes later)."""
    from .ingest import prepare_batch
    from .progress import ProgressBar

    entries: list[tuple] = []  # (record, where, key, date, supersedes) of each keyed or referencing new row
    last: dict[str, int] = {}  # id -> the last record of the file that has it
    refs: list[tuple[int, str]] = []
    n = 0
    with ProgressBar(None, "check", enabled=not quiet) as bar:
        for where, batch in _records(path, batch_size):
            try:
                rows, _ = prepare_batch(batch, None, None if store is None else store.dim)
            except ValidationError as exc:
                if exc.record is None:
                    raise
                raise ValidationError(f"{where[exc.record]}: " + str(exc).split(": ", 1)[-1]) from None
            for i, row in enumerate(rows):
                if row is None or (row.key is None and not row.supersedes):
                    continue
                if row.key is not None:
                    last[row.key] = n + i
                refs.extend((n + i, t) for t in row.supersedes)
                if not store._stored_replay(row):  # a re-ingest of a stored document records nothing
                    entries.append((n + i, where[i], row.key, row.date, row.supersedes))
            n += len(batch)
            bar.update(len(batch))
    store._check_supersessions(entries, backdate)
    spans = sorted((i, last[t]) for i, t in refs if last.get(t, -1) > i)
    joins: list[tuple[int, int]] = []
    for lo, hi in spans:
        if joins and lo <= joins[-1][1]:
            joins[-1] = (joins[-1][0], max(joins[-1][1], hi))
        else:
            joins.append((lo, hi))
    return n, joins


def _distributed():
    """``mempp.distributed``; without the ``ray`` extra, a clear error naming it."""
    from . import distributed

    if distributed.ray is None:
        raise MemppError(distributed.NO_RAY)
    return distributed


def cmd_embed(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from .progress import ProgressBar

    if args.gpus < 0 or (args.workers is not None and args.workers < 1):
        raise ValidationError("--gpus must be >= 0 and --workers >= 1", field="--gpus")
    distributed = _distributed()
    distributed.connect(args.ray)
    total = 0
    for src in args.sources:
        if src.endswith(".parquet"):
            total += pq.ParquetFile(src).metadata.num_rows
        else:
            total += sum(1 for line in open(src, "rb") if line.strip())
    workers = args.workers if args.workers is not None else (args.gpus or None)
    rows = 0
    writer = None
    try:
        with ProgressBar(total, "embed", enabled=not args.quiet) as bar:
            for piece in distributed.embed_batches(
                args.sources, num_workers=workers, num_gpus=1 if args.gpus else 0, batch_size=args.batch_size, store=args.store
            ):
                if writer is None:
                    writer = pq.ParquetWriter(args.out, piece.schema)
                writer.write_table(piece)
                rows += piece.num_rows
                bar.update(piece.num_rows)
    finally:
        if writer is not None:
            writer.close()
    print(f"{args.out}: {rows} documents embedded")
    return 0


def _query_kwargs(args: argparse.Namespace) -> dict:
    return dict(
        authors=args.author,
        threads=args.thread,
        date_from=args.date_from,
        date_to=args.date_to,
        channels=args.channel,
        weights=args.weights,
        depth=args.depth,
        reserve=not args.no_reserve,
        legs=args.legs,
        context=args.context,
        context_length=args.context_length,
        context_mode=args.context_mode,
        siblings=args.siblings,
        reserve_rule=args.reserve_rule,
        feedback=args.feedback,
        tag_rank=args.tag_rank,
        question_dates=args.question_dates,
    )


def cmd_get(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, read_only=True, create=False, version=args.version) as store:
        ref = int(args.key) if args.key.isdigit() and not _has_key(store, args.key) else args.key
        print(json.dumps(store.get(ref).to_dict(), ensure_ascii=False, indent=1))
    return 0


def _has_key(store, key: str) -> bool:
    from .errors import DocumentNotFound

    try:
        store.get(key)
    except DocumentNotFound:
        return False
    return True


def cmd_history(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, read_only=True, create=False) as store:
        for record in store.history(args.key):
            out = record.to_dict()
            out["replaced_by"] = store.replacements(record.doc_id)  # [{doc_id, key, effective, recorded_at}], earliest first
            print(json.dumps(out, ensure_ascii=False))
    return 0


def _check_authors(store, names: list[str] | None) -> None:
    """An author filter naming nobody in the store is an error that suggests the closest names
    (case and spacing never matter); one naming some: a warning for the others."""
    import difflib
    import warnings

    if not names:
        return
    stored = store.authors()
    folded = {" ".join(n.split()).casefold(): n for n in stored}
    unknown = [n for n in names if " ".join(n.split()).casefold() not in folded]
    if not unknown:
        return
    parts = []
    for n in unknown:
        close = difflib.get_close_matches(" ".join(n.split()).casefold(), list(folded), n=3, cutoff=0.6)
        parts.append(f"no author named {n!r}" + (f" (closest: {', '.join(folded[c] for c in close)})" if close else ""))
    msg = "; ".join(parts) + (f"; the store has {len(stored)} authors (`mempp ls` lists documents by author)" if stored else "; the store has no authors")
    if len(unknown) == len(names):
        raise ValidationError(msg, field="--author")
    warnings.warn(msg)


def cmd_ls(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, read_only=True, create=False) as store:
        _check_authors(store, args.author)
        records = store.documents(as_of=args.as_of, authors=args.author)
    for r in records:
        if args.json:
            print(json.dumps(r.to_dict(), ensure_ascii=False))
            continue
        state = f"replaced {r.valid_until.date().isoformat()}" if r.valid_until else "active"
        text = " ".join(r.text.split())
        print(f"{r.doc_id:>6}  {r.key or '-':<16} {r.date.date().isoformat() if r.date else 'undated':<10}  "
              f"{(r.author or '-'):<20} {state:<19} {text[:60] + ('...' if len(text) > 60 else '')}")
    if not args.json:
        print(f"{len(records)} documents" + (f" valid at {args.as_of}" if args.as_of else ""))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import write_export
    from .store import Store

    with Store.open(args.store, read_only=True, create=False) as store:
        n = write_export(store, args.out)
        print(f"{args.out}: {n} documents of {args.store} at version {store.version}, with their embeddings and supersessions")
    return 0


def cmd_supersede(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, create=False, lock_timeout=args.wait) as store:
        store.supersede(args.old, args.new, effective=args.effective, backdate=args.backdate)
        print(f"{args.store}: {args.new} replaces {args.old} from {store.get(args.old).valid_until.isoformat()}; version {store.version}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, create=False, lock_timeout=args.wait, merge="manual") as store:
        before = len(store._snap.segments)
        got = store.merge(force=args.force)
        print(f"{args.store}: {got['merges']} merges, {before} -> {got['segments']} segments in {got['seconds']} s; version {store.version}")
    return 0


def cmd_query_batch(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from .jsonl import read_jsonl
    from .progress import ProgressBar
    from .store import Store

    texts, as_ofs, ids = [], [], []
    for lineno, obj in read_jsonl(args.batch):
        if not isinstance(obj.get("text"), str):
            raise ValidationError(f"{args.batch}:{lineno}: expected a string", field="text")
        texts.append(obj["text"])
        as_ofs.append(obj.get("as_of", args.as_of))
        ids.append(str(obj.get("id", len(ids))))
    from .reads import _BATCH_SCHEMA

    schema = _BATCH_SCHEMA.insert(1, pa.field("query_id", pa.string()))
    rows = 0
    if args.ray is None and (args.shards is not None or args.workers is not None):
        raise ValidationError("--shards and --workers need --ray", field="--ray")
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(Store.open(args.store, read_only=True, version=args.version, as_known_at=args.as_known_at))
        _check_authors(store, args.author)
        bar = stack.enter_context(ProgressBar(len(texts), "query", unit="queries"))
        writer = None
        if args.out:
            sink = stack.enter_context(pa.OSFile(args.out, "wb"))
            writer = stack.enter_context(pa.ipc.new_file(sink, schema))
        if args.ray is not None:
            distributed = _distributed()
            distributed.connect(args.ray)
            table = distributed.score(
                store, texts, k=args.k, as_of=as_ofs, num_workers=args.workers, shards=args.shards, progress=bar, **_query_kwargs(args)
            )
            stream = table.to_batches()
        else:
            stream = store.query_stream(texts, k=args.k, as_of=as_ofs, progress=bar, **_query_kwargs(args))
        # Written as the chunks come: memory holds one chunk of queries, not the whole result.
        for batch in stream:
            batch = batch.add_column(1, "query_id", pa.array([ids[i] for i in batch.column("query").to_pylist()], pa.string()))
            rows += batch.num_rows
            if writer is not None:
                writer.write_batch(batch)
            else:
                for row in batch.to_pylist():
                    print(json.dumps(row, ensure_ascii=False))
    if args.out:
        print(f"{args.out}: {rows} rows for {len(texts)} queries")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from .evidence import evidence_header
    from .store import Store

    if args.batch is not None:
        if args.text is not None:
            raise ValidationError("give a question or --batch FILE, not both", field="text")
        return cmd_query_batch(args)
    if args.out is not None:
        raise ValidationError("--out writes the rows of --batch FILE; give --batch too (or drop --out)", field="--out")
    if args.text is None:
        raise ValidationError("a question is needed (or --batch FILE)", field="text")
    with Store.open(args.store, read_only=True, version=args.version, as_known_at=args.as_known_at) as store:
        _check_authors(store, args.author)
        hits = store.query(
            args.text,
            as_of=args.as_of,
            k=args.k,
            **_query_kwargs(args),
        )
    if args.json:
        print(hits.to_json())
        return 0
    if args.explain and hits.plan:
        p = hits.plan
        legs = ", ".join(f"{leg} w={v['weight']:g} returned {v['returned']}" for leg, v in p.legs.items())
        print(f"# as_of={p.as_of.isoformat() if p.as_of else 'now'} candidates={p.candidates} depth={p.depth} "
              f"reserve={p.reserve}; {legs}; authors named: {', '.join(p.matched_authors) or 'none'}")
        print("# timings ms, each stage on its own: " + ", ".join(f"{k} {v:.2f}" for k, v in p.timings_ms.items())
              + f"; total {sum(p.timings_ms.values()):.2f}")
    if not hits:
        print("no matching documents")
    for i, h in enumerate(hits, 1):
        line = f"{i}. {evidence_header(h)}"
        if args.explain:
            ranks = " ".join(f"{leg}={'-' if r is None else r + 1}" for leg, r in h.ranks.items())  # from 1, as the hits
            line += f"  [id {h.key or h.doc_id}; score {h.score:.5f}; {ranks}{'; reserve' if h.reserved else ''}]"
        print(line)
        text = h.text if len(h.text) <= args.max_chars else h.text[: args.max_chars].rstrip() + f" ... [{len(h.text) - args.max_chars} more characters; --json prints it whole]"
        print("   " + text.replace("\n", "\n   "))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, read_only=True, create=False) as store:
        stats = store.stats()
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        for key, value in stats.items():
            print(f"{key:>14}: {value}")
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, read_only=True, create=False) as store:
        for v in store.versions():
            print(f"{v['version']:>6}  {v['committed_at']}  +{v['docs']} docs" + ("  (supersessions)" if v["supersessions"] else ""))
    return 0


def _report(report: dict, as_json: bool, actions: bool = False) -> int:
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for a in report.get("actions", []) if actions else []:
            print(f"repair: {a}")
        for p in report["problems"]:
            print(f"{p['kind']}: {p['file']}: {p['problem']}")
        state = "clean" if report["clean"] else "damaged"
        where = f"version {report['version']}" if report["version"] is not None else "no readable CURRENT"
        best = f"; newest whole version on disk: {report['newest_whole']}" if report.get("newest_whole") is not None else ""
        print(f"{report['store']}: {state} ({where}, {report['files']} files checked{best})")
    return 0 if report["clean"] else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from .store import verify

    return _report(verify(args.store), args.json)


def cmd_repair(args: argparse.Namespace) -> int:
    from .store import repair

    return _report(repair(args.store, rollback=args.rollback, lock_timeout=args.wait), args.json, actions=True)


def cmd_eval(args: argparse.Namespace) -> int:
    import warnings

    from mempp.bench.evaluate import check, evaluate, format_report, load, preset

    ks = tuple(sorted(set(args.k or [10, 50])))
    if any(k < 1 for k in ks):
        raise ValidationError("must be >= 1", field="--k")
    doc_groups, q_groups = load(args.docs, args.questions)
    problems = check(doc_groups, q_groups)
    scored = sum(1 for qs in q_groups.values() for q in qs if q.get("evidence"))
    if not scored:
        raise ValidationError(f"{args.questions}: no question carries evidence, so nothing can be scored (docs/EVAL_FORMAT.md)", field="--questions")
    for problem in problems:
        warnings.warn(problem)
    if args.baseline:
        from mempp.bench.baseline import evaluate_baseline

        # the baselines are defined with all-MiniLM-L6-v2, whatever mempp's default model
        report = evaluate_baseline(
            args.docs, args.questions, args.baseline, ks, embedder_name=args.embedder or "minilm", ranked_out=args.ranked_out
        )
        report["warnings"] = problems
        print(json.dumps(report) if args.json else format_report(report))
        return 0
    cfg = preset(
        args.preset, ks=ks, weights=args.weights, depth=args.depth, reserve=None if args.no_reserve is None else not args.no_reserve,
        legs=args.legs, embedder=args.embedder, context=args.context, context_length=args.context_length, context_mode=args.context_mode, question_dates=args.question_dates, stem=args.stem,
        siblings=args.siblings, reserve_rule=args.reserve_rule, feedback=args.feedback, tag_rank=args.tag_rank,
        embed_template=args.embed_template, window_stride=args.window_stride,
    )
    report = evaluate(args.docs, args.questions, cfg, ranked_out=args.ranked_out, progress=not args.quiet)
    report["warnings"] = problems
    print(json.dumps(report) if args.json else format_report(report))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(embedder=_embedder(args.embedder), k=args.k)




def cmd_warmup(args: argparse.Namespace) -> int:
    from mempp.kernels import _numba_cache, _warm

    got = _warm.compile_all()
    if not args.quiet:
        print(f"{got['compiled']} kernel signatures ready in {got['seconds']} s (cache: {_numba_cache.cache_root()})")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from mempp.bench.speed import main as bench_main

    return bench_main(args.rest)


COMMANDS = {
    "add": cmd_add, "embed": cmd_embed, "query": cmd_query, "get": cmd_get, "history": cmd_history, "supersede": cmd_supersede,
    "merge": cmd_merge, "stats": cmd_stats, "ls": cmd_ls, "export": cmd_export, "versions": cmd_versions, "eval": cmd_eval, "demo": cmd_demo, "warmup": cmd_warmup,
    "bench": cmd_bench, "verify": cmd_verify, "repair": cmd_repair, "mcp": mcp_server.cmd_mcp,
}

def _warn(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"mempp: warning: {message}", file=sys.stderr)


# A command whose reader goes away (``mempp stats S | head -1``) stops quietly with the status a
# shell gives a tool that SIGPIPE ended (128 + 13), as ``cat`` or ``seq`` would.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        return _broken_pipe()


def _main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:  # its options are its own (argparse REMAINDER drops a leading --option)
        rc = cmd_bench(argparse.Namespace(rest=argv[1:]))
        sys.stdout.flush()
        return rc
    try:
        args = parse_args(build_parser(), argv)
    except SystemExit:
        sys.stdout.flush()  # --help into a pipe already closed: caught in main
        raise
    import warnings

    warnings.showwarning = _warn  # a library warning (a store read after a loss) as one line, like errors
    try:
        rc = COMMANDS[args.command](args)
        sys.stdout.flush()  # what is still buffered is written here, where a closed pipe is caught
        return rc
    except BrokenPipeError:
        raise
    except (MemppError, OSError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"mempp: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mempp: interrupted", file=sys.stderr)
        return 130


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The command line, options and positionals in any order (``mempp query S --k 1 "question"``
    as ``mempp query S "question" --k 1``): a command's arguments are read by its own parser,
    intermixed (argparse's ``parse_intermixed_args``), which the top parser cannot do."""
    command = parser.commands.get(argv[0]) if argv else None
    if command is None:
        return parser.parse_args(argv)  # no command, an unknown one, or --help: the top parser's answer
    args = command.parse_intermixed_args(argv[1:])
    args.command = argv[0]
    return args


def _broken_pipe() -> int:
    """The reader of stdout went away: no message, no traceback, and nothing more written (what
    is still buffered goes to /dev/null when the interpreter exits)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in tests)
        pass
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
