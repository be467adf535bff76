"""The MCP SDK side of ``mempp mcp``: :class:`~mempp.mcp_server.MemoryTools` as SDK tools.

Owns the tools' typed signatures (the JSON schemas of their arguments, built by the SDK from
these annotations), their output schemas, the text each result shows a model beside its
structured content, and the conversion of the tools' errors into ``ToolError``. Imported only
when a server is built (``mcp_server.build_server``): it needs the ``mcp`` SDK and pydantic.

Never imports: cli, planner, searcher, writer, store, mempp.bench, mempp.storage.
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

from typing import Annotated, Any, Optional, Union

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from .errors import MemppError


class Memory(BaseModel):
    id: Optional[str] = Field(description="the memory's id (null for a document stored without one: use doc_id)")
    doc_id: int = Field(description="the store's number for this version")
    date: Optional[str] = Field(description="when it was said or decided (ISO 8601, UTC)")
    author: Optional[str]
    thread: Optional[str]
    channel: Optional[str]
    valid_until: Optional[str] = Field(description="when a replacement took effect; null while it still holds")
    text: str


class Hit(Memory):
    score: float = Field(description="fused score (higher is better)")
    leg_scores: dict[str, Optional[float]] = Field(
        description="each leg's share of the score (lexical, tag, vector: weight / (60 + rank)); null where that leg did not return it"
    )
    ranks: dict[str, Optional[int]] = Field(description="rank from 0 in each leg (lexical, tag, vector); null where that leg did not return it")
    reserved: bool = Field(description="placed by the latest-date reserve rather than by score")


class Remembered(BaseModel):
    stored: bool = Field(description="false when the same memory was already stored (nothing new written)")
    memory: Memory
    replaced: list[Memory] = Field(description="memories this one replaced, from its date on")
    version: int = Field(description="the store's version after the write")


class Recalled(BaseModel):
    as_of: Optional[str] = Field(description="the date the answer holds for (null: now)")
    version: Optional[int] = Field(description="the store's version the answer was read from")
    hits: list[Hit]


class Got(BaseModel):
    memory: Memory


class History(BaseModel):
    versions: list[Memory]


class Superseded(BaseModel):
    old: Memory
    new: Memory
    version: int


def _day(iso: str) -> str:
    """An ISO datetime as a model reads it best: the date alone when it is midnight UTC."""
    return iso[:10] if iso.endswith("T00:00:00+00:00") else iso


def _short(m: dict) -> str:
    who = m["author"] or "unknown author"
    return f"{m['id'] or '#' + str(m['doc_id'])} ({(m['date'] or 'undated')[:10]}, {who})"


def _result(text: str, structured: dict) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _call(fn, *args: Any, **kwargs: Any):
    try:
        return fn(*args, **kwargs)
    except MemppError as exc:  # bad arguments name their field; a store error says what is wrong
        raise ToolError(str(exc)) from None


def build(tools: Any, name: str, instructions: str, descriptions: dict[str, str], max_k: int) -> MCPServer:
    """The SDK server offering ``tools`` (a ``mcp_server.MemoryTools``; ``max_k``: the largest ``k`` recall takes)."""
    server = MCPServer(name=name, instructions=instructions, log_level="WARNING")
    reading = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    writing = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

    @server.tool(description=descriptions["remember"], annotations=writing)
    def remember(
        text: Annotated[str, Field(description="the memory itself, kept verbatim")],
        author: Annotated[Optional[str], Field(description="who said or wrote it")] = None,
        date: Annotated[Optional[str], Field(description="when it was said (ISO 8601 date or datetime; default: now, UTC)")] = None,
        thread: Annotated[Optional[str], Field(description="the conversation or thread it belongs to")] = None,
        channel: Annotated[Optional[str], Field(description="where it was said: email, chat, meeting, ...")] = None,
        supersedes: Annotated[
            Union[str, list[str], None], Field(description="id (or ids) of memories this one replaces from its date on")
        ] = None,
        id: Annotated[Optional[str], Field(description="this memory's id (default: derived from the text and author)")] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        got = _call(tools.remember, text, author=author, date=date, thread=thread, channel=channel, supersedes=supersedes, id=id)
        m = got["memory"]
        if not got["stored"]:
            said = f"Already stored as {_short(m)}; nothing new written."
        else:
            said = f"Remembered {_short(m)}."
        if got["replaced"]:
            said += f" It replaces {', '.join(_short(r) for r in got['replaced'])} from {_day(m['date'])} on."
        return _result(said, got)

    @server.tool(description=descriptions["recall"], annotations=reading)
    def recall(
        question: Annotated[str, Field(description="the question, in words")],
        as_of: Annotated[Optional[str], Field(description="answer as the record stood on this ISO 8601 date or datetime (default: now)")] = None,
        k: Annotated[int, Field(ge=1, le=max_k, description="how many memories to return")] = 10,
        authors: Annotated[Optional[list[str]], Field(description="only memories by these authors")] = None,
        channels: Annotated[Optional[list[str]], Field(description="only memories from these channels")] = None,
    ) -> Annotated[CallToolResult, Recalled]:
        evidence, got = _call(tools.recall, question, as_of=as_of, k=k, authors=authors, channels=channels)
        return _result(evidence, got)

    @server.tool(description=descriptions["get"], annotations=reading)
    def get(
        id: Annotated[str, Field(description="the memory's id (or its doc_id, as digits)")],
    ) -> Annotated[CallToolResult, Got]:
        got = _call(tools.get, id)
        m = got["memory"]
        until = f"replaced from {_day(m['valid_until'])}" if m["valid_until"] else "still holds"
        return _result(f"{_short(m)}, {until}:\n{m['text']}", got)

    @server.tool(description=descriptions["history"], annotations=reading)
    def history(
        id: Annotated[str, Field(description="the memory's id")],
    ) -> Annotated[CallToolResult, History]:
        got = _call(tools.history, id)
        lines = [
            f"{i}. {_short(m)}, {'replaced from ' + _day(m['valid_until']) if m['valid_until'] else 'still holds'}:\n{m['text']}"
            for i, m in enumerate(got["versions"], 1)
        ]
        return _result("\n\n".join(lines), got)

    @server.tool(description=descriptions["supersede"], annotations=writing)
    def supersede(
        old: Annotated[str, Field(description="id of the memory replaced")],
        new: Annotated[str, Field(description="id of the memory that replaces it")],
        effective: Annotated[Optional[str], Field(description="ISO 8601 date from which `new` replaces `old` (default: `new`'s date)")] = None,
    ) -> Annotated[CallToolResult, Superseded]:
        got = _call(tools.supersede, old, new, effective=effective)
        return _result(f"{_short(got['new'])} replaces {_short(got['old'])} from {_day(got['old']['valid_until'])} on.", got)

    return server
