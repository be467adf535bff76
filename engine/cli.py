"""The ``mempp`` command: a thin adapter over the Python API.

Exit codes: 0 ok; 1 an error (one line on stderr: ``mempp: error: ...``); 2 bad usage; 141 (quietly)
when the reader of its output went away, as with ``mempp stats S | head -1``.

Owns the command line: the parser of every subcommand, the checks of flag values, the table of
subcommands (their work is ``mempp.commands``), the warnings' and errors' one-line form, and the
exit codes. It never reaches past the engine into the planner or the storage layer.

Never imports: planner, writer, versions, mempp.storage, onnxruntime.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .config import (
    DEFAULT_CHAIN, DEFAULT_CONTEXT, DEFAULT_CONTEXT_MODE, DEFAULT_DEPTH, DEFAULT_FEEDBACK, DEFAULT_RESERVE_RULE, DEFAULT_SIBLINGS, DEFAULT_TAG_RANK,
)
from .options import ReserveRule, TagRank
from .embedder import DEFAULT_MODEL, EMBEDDER_CHOICES, model_spec
from .errors import MemppError
from . import admin_commands, commands, mcp_server

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
    p.add_argument("--reserve-rule", choices=[m.value for m in ReserveRule], default=d(DEFAULT_RESERVE_RULE),
                   help="which documents may take the 3 reserve slots: relevant (lexical matches near the top; default) or paper (any match)")
    p.add_argument("--feedback", type=_count, default=d(DEFAULT_FEEDBACK),
                   help=f"the vector leg scans again from the question plus this many first fused documents (default {DEFAULT_FEEDBACK}; 0 off)")
    p.add_argument("--chain", type=_count, default=d(DEFAULT_CHAIN),
                   help=f"chain stage: each of the first this many hits lifts the ranked documents it is linked to by rare terms "
                   f"(ticket numbers, names), a day it names, or references (default {DEFAULT_CHAIN}; 0 off)")
    p.add_argument("--no-name-free", action="store_const", const=True, default=d(False),
                   help="keep the names of the people a question names in its vector (by default they are taken out "
                   "where the tag leg holds those people's documents)")
    p.add_argument("--tag-rank", choices=[m.value for m in TagRank], default=d(DEFAULT_TAG_RANK),
                   help="tag leg order: fused (BM25-then-date fused with cosine; default) or lexical (BM25, then date)")


def _as_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as", dest="principal", default=None, metavar="PRINCIPAL",
                   help="read as this principal ('user:NAME' or 'group:NAME'; 'admin' reads everything); a store holding "
                   "documents not everyone may read refuses a read without it")


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
    p.add_argument("--readers", default=None, metavar="P,P,...",
                   help="who may read the records that name no readers of their own ('user:NAME' or 'group:NAME', comma-separated)")
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
                   help="only documents by this author (repeatable; case and spacing do not matter; a name, alias or role of the people directory means every label of that person; a name nobody has is an error naming the closest)")
    p.add_argument("--date-from", default=None, metavar="DATE", help="only documents dated on or after this ISO date")
    p.add_argument("--date-to", default=None, metavar="DATE", help="only documents dated on or before this ISO date (a date alone: its end)")
    p.add_argument("--thread", action="append", default=None, help="only this thread (repeatable)")
    p.add_argument("--channel", action="append", default=None, help="only this channel (repeatable)")
    p.add_argument("--k", type=_positive, default=10, help="hits to return (default 10)")
    p.add_argument("--json", action="store_true", help="print hits (and plan) as JSON, each hit's text whole")
    p.add_argument("--explain", action="store_true", help="show the plan and each hit's per-leg ranks")
    p.add_argument("--max-chars", type=_positive, default=300,
                   help="in the plain output, cut each hit's text to this many characters (default 300; --json prints it whole)")
    _as_arg(p)
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
    _as_arg(p)

    p = sub.add_parser("history", help="print every version stored under an id, oldest first, with what replaced it and from when")
    p.add_argument("store")
    p.add_argument("key")
    _as_arg(p)

    p = sub.add_parser("ls", help="list a store's documents (all, or those valid at --as-of)")
    p.add_argument("store")
    p.add_argument("--as-of", default=None, help="only the documents valid at this ISO date (undated ones left out)")
    p.add_argument("--author", action="append", default=None, help="only this author's documents (repeatable; case does not matter)")
    p.add_argument("--json", action="store_true", help="one JSON object per document (its text whole)")
    _as_arg(p)

    p = sub.add_parser("export", help="write every document, its dates, supersessions and embedding to a file `mempp add` reads back")
    p.add_argument("store")
    p.add_argument("--out", required=True, help="F.parquet or F.jsonl")
    _as_arg(p)

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
    _as_arg(p)

    p = sub.add_parser("members", help="print a group's members (changed first with --add / --remove)")
    p.add_argument("store")
    p.add_argument("group", help="'group:NAME'")
    p.add_argument("--add", nargs="+", default=None, metavar="P", help="principals ('user:NAME', 'group:NAME') to add to the group")
    p.add_argument("--remove", nargs="+", default=None, metavar="P", help="principals to remove from the group")
    p.add_argument("--json", action="store_true", help="print the group as one JSON object")
    _wait_arg(p)

    p = sub.add_parser("people", help="print the store's people directory (names, aliases, roles; added first from FILE)")
    p.add_argument("store")
    p.add_argument("file", nargs="?", default=None, help="people to add (JSON Lines, Parquet or Arrow: name, aliases, roles), each replacing the entry of its name")
    p.add_argument("--json", action="store_true", help="one JSON object per person")
    _as_arg(p)
    _wait_arg(p)

    p = sub.add_parser("readers", help="print who may read a document (set first: principals, or --everyone)")
    p.add_argument("store")
    p.add_argument("key", help="the document's id (every version of it), or a doc id number")
    p.add_argument("principals", nargs="*", metavar="P", help="the new readers ('user:NAME', 'group:NAME')")
    p.add_argument("--everyone", action="store_true", help="let everyone read it")
    p.add_argument("--json", action="store_true", help="one JSON object per version")
    _wait_arg(p)

    p = sub.add_parser("erase", help="destroy documents (text, vector, terms, every copy, in every version); a record of the erasure is kept")
    p.add_argument("store")
    p.add_argument("key", nargs="*", help="ids (every version of each) or doc id numbers to erase")
    p.add_argument("--reason", default=None, help="why (required; kept in the store's access log with the id and the date)")
    p.add_argument("--before", default=None, metavar="DATE", help="erase every document dated before DATE (a retention rule)")
    p.add_argument("--channel", default=None, help="with --before: only this channel's documents")
    p.add_argument("--list", action="store_true", help="print what was erased so far, then exit")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    _wait_arg(p)

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
    p.add_argument("--people", default=None, help="each scope's people directory, JSON Lines ({scope, name, aliases, roles}); default: people.jsonl beside --docs when there is one")
    p.add_argument(
        "--k", type=int, action="append", default=None,
        help="cut-off (repeatable; default 10 and 50); every question is asked once per k and each k scored on its own answer",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument(
        "--ranked-out", default=None,
        help='write one {"id", "k", "ranked": [keys, best first]} line per question and k to this file (k ascending per question)',
    )
    _as_arg(p)  # a question's own "principal" field wins
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


COMMANDS = {
    "add": commands.cmd_add, "embed": commands.cmd_embed, "query": commands.cmd_query, "get": commands.cmd_get, "history": commands.cmd_history, "supersede": commands.cmd_supersede,
    "merge": commands.cmd_merge, "stats": commands.cmd_stats, "ls": commands.cmd_ls, "export": commands.cmd_export, "versions": commands.cmd_versions, "eval": commands.cmd_eval, "demo": commands.cmd_demo, "warmup": commands.cmd_warmup,
    "bench": commands.cmd_bench, "verify": admin_commands.cmd_verify, "repair": admin_commands.cmd_repair, "mcp": mcp_server.cmd_mcp,
    "members": admin_commands.cmd_members, "people": admin_commands.cmd_people, "readers": admin_commands.cmd_readers, "erase": admin_commands.cmd_erase,
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
        rc = commands.cmd_bench(argparse.Namespace(rest=argv[1:]))
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
