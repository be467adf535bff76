"""``mempp mcp STORE``: a store as five tools an agent calls over the Model Context Protocol.

Owns the MCP server of a store: the tools ``remember``, ``recall``, ``get``, ``history`` and
``supersede`` (their argument schemas and the descriptions an agent reads), the checks that turn
bad arguments into tool errors naming the field, the stdio and streamable-HTTP transports, and
the ``mempp mcp`` subcommand (its parser and its function; ``cli.py`` only registers them).

The official SDK (``mcp``, extra ``mempp[mcp]``) and pydantic are imported only when a server is
built: ``import mempp.mcp_server`` works without them, and ``mempp mcp`` without them says how to
install them. :class:`MemoryTools` is the tools' logic without the SDK (plain dicts in and out).

One process holds one read-only :class:`Store` for reads, refreshed to the newest commit before
each, and opens a writer for each ``remember`` or ``supersede``, closed when it returns: the
store's writer lock is held only while a write runs, so HTTP clients of one server, several
servers on one store (one per stdio client) and ``mempp add`` take turns (``--wait`` seconds
each). A write is one commit: a server killed in the middle of one leaves the store as it was.

Never imports: cli, planner, writer, searcher, versions, mempp.bench, mempp.storage.
"""

from __future__ import annotations

import hashlib
import logging
import re
import socket
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .access import check_principal
from .errors import DocumentNotFound, MemppError, StoreLockedError, ValidationError
from .evidence import format_evidence
from .store import Store
from .fusion import RRF_C
from .types import Hit, Plan, Record

logger = logging.getLogger(__name__)
NO_MCP = "mempp mcp needs the MCP Python SDK: pip install 'mempp[mcp]'"
MAX_K = 100
DEFAULT_WAIT = 30.0  # seconds a write waits for another writer (another server, `mempp add`)

INSTRUCTIONS = (
    "Organizational memory (mempp). Every memory is kept whole and never deleted; a newer one can "
    "replace an older one from a date on, and the older stays the answer for questions about "
    "earlier dates. Use `remember` to store what someone said or decided (with its author and date), "
    "`recall` to find the evidence for a question (give `as_of` to ask what held on a date), "
    "`get` and `history` to read one memory and its versions, `supersede` to record that one "
    "memory replaces another. Answer from the evidence `recall` returns and cite its dates and authors."
)

DESCRIPTIONS = {
    "remember": (
        "Store one memory: a statement, message or decision, kept verbatim with its author and date. "
        "Give `id` to name it (reusing the id of a stored memory with new text stores a new version "
        "that replaces the old one from this memory's date on); without `id` one is derived from the "
        "text and author, so repeating the same call stores nothing new. `supersedes` lists ids of "
        "other memories this one replaces from its date on. Returns the memory's id and what it replaced."
    ),
    "recall": (
        "Find the memories that answer a question, best first: the original text of each with its date "
        "and author. `as_of` (ISO date or datetime) answers as the record stood then: memories dated "
        "later, and replacements that took effect later, are left out, so the answer is what was "
        "true on that date; without it, what holds now. Filter by `authors` (a name, an alias, or a "
        "role such as \"CTO\", meaning whoever held it at `as_of`) or `channels` when the question names them."
    ),
    "get": "Read one memory by its id: its text, author, date, and until when it held (`valid_until`, null if it still holds).",
    "history": "Every version stored under an id, oldest first, each with the date it was replaced (`valid_until`, null for the one that still holds).",
    "supersede": (
        "Record that memory `new` replaces memory `old` from `effective` on (default: `new`'s date). "
        "Nothing is deleted: `old` stays the answer for questions as of earlier dates. Refused when "
        "it would leave the record without any valid version for a while."
    ),
}


class ToolInputError(MemppError):
    """A tool's argument is wrong: ``field`` names it (the tool's own argument name)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"field {field!r}: {message}")
        self.field = field


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def record_dict(r: Record) -> dict[str, Any]:
    """A stored memory as the tools return it."""
    return {
        "id": r.key,
        "doc_id": r.doc_id,
        "date": _iso(r.date),
        "author": r.author,
        **({"person": r.person} if r.person else {}),  # the people directory's name for that author
        "thread": r.thread,
        "channel": r.channel,
        "valid_until": _iso(r.valid_until),
        "superseded_by": r.superseded_by.to_dict() if r.superseded_by else None,
        "text": r.text,
    }


def leg_scores(h: Hit, plan: Plan | None) -> dict[str, float | None]:
    """Each leg's share of the fused score, ``weight / (RRF_C + rank)`` (None: the leg did not return it)."""
    legs = plan.legs if plan is not None else {}
    return {leg: None if r is None else float(legs.get(leg, {}).get("weight", 1.0)) / (RRF_C + r) for leg, r in h.ranks.items()}


def hit_dict(h: Hit, plan: Plan | None = None) -> dict[str, Any]:
    return {**record_dict(h), "score": float(h.score), "leg_scores": leg_scores(h, plan), "ranks": dict(h.ranks),
            "reserved": bool(h.reserved)}


def derived_id(text: str, author: str | None) -> str:
    """The id of a memory given without one: the same text (whitespace aside) and author give the same id."""
    norm = " ".join(text.split())
    return "m-" + hashlib.blake2b(f"{author or ''}\x00{norm}".encode(), digest_size=6).hexdigest()


def _strings(value: Any, field: str) -> list[str] | None:
    """None, one string, or a list of non-empty strings (as a list)."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(x, str) and x.strip() for x in items):
        raise ToolInputError(field, f"expected a non-empty string or a list of them, got {value!r}")
    return list(items)


def _text(value: Any, field: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(field, f"expected a non-empty string, got {value!r}")
    return value


def _ref(store: Store, ref: str, principal: Any = None) -> str | int:
    """An id, or a doc id number written as digits when no memory has that id (as ``mempp get``)."""
    if ref.isdigit():
        try:
            store.get(ref, principal=principal)
        except DocumentNotFound:
            return int(ref)
    return ref


class MemoryTools:
    """The tools' logic over one store, without the SDK: dicts in, dicts out.

    ``embedder``: for a new store, its model (an embedder or a shipped model's name; default
    mempp's); an existing store keeps its own. ``wait``: seconds a write waits for another
    writer's lock. ``principal``: who the agent reads as (``mempp.access``; None: a store
    holding restricted documents refuses its reads). Safe to call from several threads at once.
    """

    def __init__(self, path: str | Path, *, embedder: Any = None, wait: float = DEFAULT_WAIT, principal: Any = None):
        self.path = Path(path)
        self.wait = wait
        self.principal = None if principal is None else check_principal(principal, "--as")
        if not self.path.exists():
            try:
                Store.open(self.path, embedder=embedder).close()  # a new, empty store (its directory)
            except FileExistsError:
                pass  # another server made it meanwhile
        self.reader = Store.open(self.path, embedder=embedder, read_only=True)
        self._embedder = embedder if embedder is not None and not isinstance(embedder, str) else None
        self._write = threading.Lock()  # one write of this process at a time; the store's lock orders processes

    def close(self) -> None:
        self.reader.close()

    def _writer(self) -> Store:
        if self._embedder is None:
            self._embedder = self.reader.embedder  # loaded once, shared by every writer
        return Store.open(self.path, embedder=self._embedder, lock_timeout=self.wait, create=False, merge="manual")

    @staticmethod
    def _merge(w: Store) -> None:
        """Merge segments as the policy asks (every 8 or so small commits), before the writer closes:
        each memory is its own small commit. The memory is committed already: a failed merge only
        leaves the segments as they were (the next write tries again)."""
        try:
            w.merge()
        except (MemppError, OSError) as exc:
            logger.warning("mempp mcp: merging %s failed: %s", w.path, exc)

    def _read(self) -> Store:
        self.reader.refresh()
        return self.reader

    # --- the tools -------------------------------------------------------------------------------
    def remember(
        self,
        text: Any,
        author: Any = None,
        date: Any = None,
        thread: Any = None,
        channel: Any = None,
        supersedes: Any = None,
        id: Any = None,
    ) -> dict[str, Any]:
        text = _text(text, "text")
        for name, value in (("author", author), ("thread", thread), ("channel", channel), ("id", id)):
            _text(value, name, optional=True)
        if date is not None and not isinstance(date, str):
            raise ToolInputError("date", f"expected an ISO 8601 date or datetime, got {date!r}")
        targets = _strings(supersedes, "supersedes") or []
        key = id if id is not None else derived_id(text, author)
        if key in targets:
            raise ToolInputError("supersedes", "a memory cannot supersede itself")
        doc = {"id": key, "text": text, "author": author, "date": date or datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "thread": thread, "channel": channel}
        if targets:
            doc["supersedes"] = targets
        with self._write, _errors(), self._writer() as w:
            active: dict[int, Record] = {}
            for k in [key, *targets]:
                try:
                    r = w.get(k, principal=self.principal)
                except DocumentNotFound:
                    if w.searcher().doc_ids(k):  # held, but not this agent's to read: refused before anything is written
                        raise ToolInputError("id" if k == key else "supersedes",
                                             f"{k!r} names a memory this agent may not read; it cannot revise or supersede it") from None
                    continue  # a new id; a missing target is refused by add, naming the field
                if r.valid_until is None:
                    active[r.doc_id] = r
            before = len(w)
            doc_id = w.add([doc])[0]
            new = w.get(doc_id, principal=self.principal)
            replaced = []
            for d in active:
                r = w.get(d, principal=self.principal)
                if d != doc_id and r.valid_until is not None and r.valid_until == new.date:
                    replaced.append(record_dict(r))
            version = w.version
            self._merge(w)
        self.reader.refresh()
        return {"stored": doc_id >= before, "memory": record_dict(new), "replaced": replaced, "version": version}

    def recall(self, question: Any, as_of: Any = None, k: Any = 10, authors: Any = None, channels: Any = None) -> tuple[str, dict[str, Any]]:
        question = _text(question, "question")
        if as_of is not None and not isinstance(as_of, str):
            raise ToolInputError("as_of", f"expected an ISO 8601 date or datetime, got {as_of!r}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ToolInputError("k", f"expected a whole number from 1 to {MAX_K}, got {k!r}")
        authors, channels = _strings(authors, "authors"), _strings(channels, "channels")
        with _errors():
            store = self._read()
            hits = store.query(question, as_of=as_of, k=k, authors=authors, channels=channels, principal=self.principal)
        plan = hits.plan
        evidence = format_evidence(hits) if hits else "No memories match."
        return evidence, {
            "as_of": _iso(plan.as_of) if plan is not None else as_of,
            "version": hits.version,
            "hits": [hit_dict(h, plan) for h in hits],
        }

    def get(self, id: Any) -> dict[str, Any]:
        id = _text(id, "id")
        with _errors(missing="id"):
            store = self._read()
            return {"memory": record_dict(store.get(_ref(store, id, self.principal), principal=self.principal))}

    def history(self, id: Any) -> dict[str, Any]:
        id = _text(id, "id")
        with _errors(missing="id"):
            return {"versions": [record_dict(r) for r in self._read().history(id, principal=self.principal)]}

    def supersede(self, old: Any, new: Any, effective: Any = None) -> dict[str, Any]:
        old, new = _text(old, "old"), _text(new, "new")
        if effective is not None and not isinstance(effective, str):
            raise ToolInputError("effective", f"expected an ISO 8601 date or datetime, got {effective!r}")
        with self._write, _errors(), self._writer() as w:
            refs = {}
            for field, ref in (("old", old), ("new", new)):
                try:
                    refs[field] = w.get(_ref(w, ref, self.principal), principal=self.principal).doc_id
                except DocumentNotFound:
                    raise ToolInputError(field, f"no memory with id {ref!r}") from None
            if refs["old"] == refs["new"]:
                raise ToolInputError("new", "a memory cannot supersede itself")
            w.supersede(refs["old"], refs["new"], effective=effective)
            got = {"old": record_dict(w.get(refs["old"], principal=self.principal)), "new": record_dict(w.get(refs["new"], principal=self.principal)), "version": w.version}
            self._merge(w)
        self.reader.refresh()
        return got


class _errors:
    """Turns the engine's errors into :class:`ToolInputError` (naming the tool's field) where the
    caller's arguments are at fault; other store errors pass on with their own message."""

    def __init__(self, missing: str | None = None):
        self.missing = missing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, ToolInputError):
            return False
        if isinstance(exc, ValidationError) and exc.field:
            field = {"key": "id", "effective_date": "effective"}.get(exc.field, exc.field)
            raise ToolInputError(field, exc.message) from None
        if isinstance(exc, DocumentNotFound) and self.missing:
            raise ToolInputError(self.missing, str(exc)) from None
        if isinstance(exc, StoreLockedError):
            raise MemppError(f"{exc}; it was still busy after the server's --wait; try again") from None
        return False


# --- the SDK's server ------------------------------------------------------------------------------
def _sdk():
    try:
        import mcp  # noqa: F401
        from mcp.server.mcpserver import MCPServer  # noqa: F401
    except ImportError as exc:
        raise MemppError(f"{NO_MCP} ({exc})") from None


def build_server(tools: MemoryTools, name: str = "mempp"):
    """An ``mcp.server.mcpserver.MCPServer`` offering ``tools``' five tools (needs ``mempp[mcp]``)."""
    _sdk()
    from .mcp_sdk import build

    return build(tools, name, INSTRUCTIONS, DESCRIPTIONS, MAX_K)  # the SDK side imports nothing of this module


def serve(path: str | Path, *, http: str | None = None, embedder: Any = None, wait: float = DEFAULT_WAIT, principal: Any = None) -> None:
    """Serve the store at ``path`` over stdio, or over streamable HTTP at ``http`` (``HOST:PORT``;
    port 0 picks a free one). Runs until stdin closes (stdio) or the process is interrupted."""
    _sdk()
    sock = _listen(*_host_port(http)) if http is not None else None  # a taken port fails before anything else
    try:
        tools = MemoryTools(path, embedder=embedder, wait=wait, principal=principal)
        try:
            server = build_server(tools)
            if sock is None:
                server.run("stdio")
            else:
                import anyio

                anyio.run(_serve_http, server, sock, http, str(path))
        finally:
            tools.close()
    finally:
        if sock is not None:
            sock.close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket at ``host:port`` (the server's, bound here so a taken port is one clear error)."""
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
    except OSError as exc:
        raise MemppError(f"--http {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise MemppError(f"--http {host}:{port}: cannot listen there ({exc.strerror or exc})") from None
    return sock


async def _serve_http(server, sock: socket.socket, http: str, path: str) -> None:
    import anyio
    import uvicorn

    host = http.rsplit(":", 1)[0].strip("[]")
    app = server.streamable_http_app(host=host)
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: web.serve(sockets=[sock]))
        while not web.started:
            if web.should_exit:
                return
            await anyio.sleep(0.02)
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        print(f"mempp mcp: serving {path} at http://{shown}:{bound[1]}/mcp", file=sys.stderr, flush=True)


def _host_port(value: str) -> tuple[str, int]:
    m = re.fullmatch(r"\[?([^\[\]]*?)\]?:(\d{1,5})", value)
    if not m or not m.group(1) or int(m.group(2)) > 65535:
        raise ValidationError(f"expected HOST:PORT (e.g. 127.0.0.1:8765), got {value!r}", field="--http")
    return m.group(1), int(m.group(2))


# --- the subcommand --------------------------------------------------------------------------------
def add_parser(sub) -> None:
    """Register ``mempp mcp`` on the CLI's subparsers."""
    from .embedder import EMBEDDER_CHOICES

    p = sub.add_parser("mcp", help="serve a store to agents over MCP: stdio, or streamable HTTP with --http (needs mempp[mcp])")
    p.add_argument("store", help="the store (created, empty, if missing)")
    p.add_argument("--http", default=None, metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: a free one, printed on stderr)")
    p.add_argument("--embedder", choices=EMBEDDER_CHOICES, default=None,
                   help="model of a new store (default bge-small; hash: model-free, for tests); an existing store keeps its own")
    p.add_argument("--wait", type=float, default=DEFAULT_WAIT, metavar="SECONDS",
                   help=f"a write waits this long for another writer of the store (default {DEFAULT_WAIT:g})")
    p.add_argument("--as", dest="principal", default=None, metavar="PRINCIPAL",
                   help="the agent reads as this principal ('user:NAME', 'group:NAME'; 'admin' reads everything)")


def cmd_mcp(args) -> int:
    from .embedder import HashEmbedder

    if not args.wait >= 0:
        raise ValidationError("must be >= 0", field="--wait")
    from .access import principal_arg

    principal = principal_arg(args.principal)
    serve(args.store, http=args.http, embedder=HashEmbedder() if args.embedder == "hash" else args.embedder, wait=args.wait, principal=principal)
    return 0
