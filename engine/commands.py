"""What each ``mempp`` subcommand does once its flags are parsed (``mempp.cli`` parses them).

Owns the subcommands' work: opening the store each needs, the calls of :class:`Store` (and a
few helpers of the read and ingest paths) that its flags ask for, what it prints, and the exit
status it returns. ``eval`` and ``bench`` reach ``mempp.bench``; nothing here reaches past the
engine into the planner or the storage layer.

Never imports: planner, writer, versions, mempp.storage, onnxruntime.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from .access import check_readers
from .errors import MemppError, ValidationError

def _embedder(name: str | None):
    """``--embedder``: None (the store's model, or the default for a new store), "hash", or a shipped
    model's name, which the store loads on first use."""
    from .embedder import HashEmbedder

    return HashEmbedder() if name == "hash" else name


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
    readers = None if args.readers is None else check_readers(args.readers.split(","), "--readers")
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
                batch = _with_readers(batch, readers)
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


def _with_readers(batch, readers):
    """``batch`` (records or a table) with ``readers`` for every record that names none (``--readers``)."""
    if readers is None:
        return batch
    if isinstance(batch, list):
        return [r if not isinstance(r, dict) or "readers" in r else {**r, "readers": list(readers)} for r in batch]
    if "readers" in batch.column_names:
        raise ValidationError("the file has a readers column; give readers there or with --readers, not both", field="--readers")
    import pyarrow as pa

    return batch.append_column("readers", pa.array([list(readers)] * batch.num_rows, pa.list_(pa.string())))


def _principal(args: argparse.Namespace):
    """``--as`` (``access.principal_arg``): a principal, ``admin`` for :data:`mempp.ADMIN`, or None."""
    from .access import principal_arg

    return principal_arg(getattr(args, "principal", None))


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
            got = add_export(store, rows, progress=bar.update, header=header)
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
    from .inputs import read_records, read_tables

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
    from .access import record_readers
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
                record_readers(batch)
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
                if not store.writer.stored_replay(row):  # a re-ingest of a stored document records nothing
                    entries.append((n + i, where[i], row.key, row.date, row.supersedes))
            n += len(batch)
            bar.update(len(batch))
    store.writer.check_supersessions(entries, backdate)
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
        chain=args.chain,
        name_free=not args.no_name_free,
        question_dates=args.question_dates,
        principal=_principal(args),
    )


def cmd_get(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, read_only=True, create=False, version=args.version) as store:
        who = _principal(args)
        ref = int(args.key) if args.key.isdigit() and not _has_key(store, args.key, who) else args.key
        print(json.dumps(store.get(ref, principal=who).to_dict(), ensure_ascii=False, indent=1))
    return 0


def _has_key(store, key: str, principal=None) -> bool:
    from .errors import DocumentNotFound

    try:
        store.get(key, principal=principal)
    except DocumentNotFound:
        return False
    return True


def cmd_history(args: argparse.Namespace) -> int:
    from .store import Store

    with Store.open(args.store, read_only=True, create=False) as store:
        who = _principal(args)
        for record in store.history(args.key, principal=who):
            out = record.to_dict()
            out["replaced_by"] = store.replacements(record.doc_id, principal=who)  # [{doc_id, key, effective, recorded_at}], earliest first
            print(json.dumps(out, ensure_ascii=False))
    return 0


def _check_authors(store, names: list[str] | None, principal=None) -> None:
    """An author filter naming nobody in the store (no author, no name, alias or role of the people
    directory) is an error that suggests the closest names (case and spacing never matter); one
    naming some: a warning for the others."""
    import difflib
    import warnings

    if not names:
        return
    stored = store.authors(principal=principal)
    folded = {" ".join(n.split()).casefold(): n for n in stored}
    matcher = store.searcher().reader(principal).name_matcher  # a person's other name or a role, held at any time
    unknown = [n for n in names if " ".join(n.split()).casefold() not in folded and not matcher.resolve([n], any_time=True)]
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
        _check_authors(store, args.author, _principal(args))
        records = store.documents(as_of=args.as_of, authors=args.author, principal=_principal(args))
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
        searcher = store.searcher()
        searcher.allow(_principal(args))
        n = write_export(searcher, args.out)
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
        before = len(store.searcher().snapshot.segments)
        got = store.merge(force=args.force)
        print(f"{args.store}: {got['merges']} merges, {before} -> {got['segments']} segments in {got['seconds']} s; version {store.version}")
    return 0


def cmd_query_batch(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from .inputs import read_jsonl
    from .progress import ProgressBar
    from .store import Store

    texts, as_ofs, ids = [], [], []
    for lineno, obj in read_jsonl(args.batch):
        if not isinstance(obj.get("text"), str):
            raise ValidationError(f"{args.batch}:{lineno}: expected a string", field="text")
        texts.append(obj["text"])
        as_ofs.append(obj.get("as_of", args.as_of))
        ids.append(str(obj.get("id", len(ids))))
    from .results import BATCH_SCHEMA

    schema = BATCH_SCHEMA.insert(1, pa.field("query_id", pa.string()))
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
        _check_authors(store, args.author, _principal(args))
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
        for h, ds in p.chained.items():
            print(f"# chained: doc {h} lifted docs {', '.join(map(str, ds))} (they share its rare terms)")
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
        stats = store.stats(principal=_principal(args))
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
        siblings=args.siblings, reserve_rule=args.reserve_rule, feedback=args.feedback, tag_rank=args.tag_rank, chain=args.chain,
        name_free=None if args.no_name_free is None else not args.no_name_free, embed_template=args.embed_template, window_stride=args.window_stride, principal=_principal(args),
    )
    report = evaluate(args.docs, args.questions, cfg, ranked_out=args.ranked_out, progress=not args.quiet, people=args.people)
    report["warnings"] = problems
    print(json.dumps(report) if args.json else format_report(report))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(embedder=_embedder(args.embedder), k=args.k)


def cmd_warmup(args: argparse.Namespace) -> int:
    from mempp.kernels import jitcache, precompile

    got = precompile.compile_all()
    if not args.quiet:
        print(f"{got['compiled']} kernel signatures ready in {got['seconds']} s (cache: {jitcache.cache_root()})")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from mempp.bench.speed import main as bench_main

    return bench_main(args.rest)
