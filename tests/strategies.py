"""Hypothesis strategies shared by the tests.

Documents use a small vocabulary so BM25 terms overlap, a few authors (or none),
and dates over a few years (some undated); with ``provenance``, a few threads and
channels too. ``histories`` builds a random sequence of store operations (batches of
adds, re-adds of an existing ``id`` dated before or after its other versions, replays of
any stored version, ``supersedes`` naming ids stored before or added later in the same
batch, explicit supersessions), some of which the store must refuse (a ``supersedes``
naming a later-dated document without ``backdate=True``, a cycle): the model of
``test_temporal`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

from hypothesis import strategies as st

VOCAB = (
    "sla", "uptime", "contract", "renewal", "budget", "approved",
    "vendor", "latency", "incident", "review", "policy", "release",
)
AUTHORS = ("Aisha Patel", "Ben Okafor", "Chen Wei")
THREADS = ("EV-1", "EV-2", "chat-7")
CHANNELS = ("email", "chat", "wiki")
FIRST_DAY = date(2020, 1, 1)
LAST_DAY = date(2023, 12, 31)
# Hours and time zones are few on purpose: equal instants (a document dated exactly at an
# as_of, a supersession effective exactly at an as_of) must come up often.
HOURS = (0, 12, 23)
ZONES = ("", "Z", "+02:00", "-05:00")

# A few anchor days, drawn most of the time, so documents, supersessions and as_of dates share
# days often; any day of the range otherwise.
ANCHOR_DAYS = tuple(date(2020 + i // 3, 1 + 4 * (i % 3), 1 + 3 * i) for i in range(10))
days = st.one_of(
    st.sampled_from(ANCHOR_DAYS),
    st.sampled_from(ANCHOR_DAYS),
    st.sampled_from(ANCHOR_DAYS),
    st.dates(min_value=FIRST_DAY, max_value=LAST_DAY),
)


@st.composite
def iso_datetimes(draw) -> str:
    d = draw(days)
    h = draw(st.sampled_from(HOURS))
    m = draw(st.sampled_from((0, 30, 59)))
    return f"{d.isoformat()}T{h:02d}:{m:02d}:00{draw(st.sampled_from(ZONES))}"


iso_day_strings = days.map(date.isoformat)

# A document's date: a calendar day or a timestamp (ISO strings).
doc_dates = st.one_of(iso_day_strings, iso_datetimes())
# as_of dates long after every generated date, and after every supersession "effective now"
# (an undated document's) was recorded: those are in effect there.
FAR_FUTURE = ("2100-01-01", "2999-06-30T12:00:00Z", "9999-12-31")
# A query's as_of: None (after everything), a calendar day (end of that day), a timestamp, or far ahead.
as_of_values = st.one_of(st.none(), iso_day_strings, iso_datetimes(), st.sampled_from(FAR_FUTURE))
# as_of dates that are given (not None).
given_as_of_values = st.one_of(iso_day_strings, iso_datetimes(), st.sampled_from(FAR_FUTURE))

authors = st.one_of(st.none(), st.sampled_from(AUTHORS))
author_filters = st.one_of(
    st.none(),
    st.lists(st.sampled_from(AUTHORS + ("Nobody Known",)), min_size=0, max_size=3, unique=True),
)


def texts(min_words: int = 1, max_words: int = 5) -> st.SearchStrategy[str]:
    """Text from the small vocabulary, words joined by varied whitespace."""
    return st.tuples(
        st.lists(st.sampled_from(VOCAB), min_size=min_words, max_size=max_words),
        st.sampled_from((" ", "  ", "\n", " \t ")),
    ).map(lambda t: t[1].join(t[0]))


@st.composite
def documents(
    draw, *, key: str | None = None, text: str | None = None, dated: bool | None = None, provenance: bool = False
) -> dict:
    """One input document: ``text``, maybe ``author``, maybe ``date`` (ISO string), maybe ``id``;
    with ``provenance``, maybe ``thread`` and ``channel``."""
    doc: dict = {"text": draw(texts()) if text is None else text}
    author = draw(authors)
    if author is not None:
        doc["author"] = author
    if provenance:
        for name, values in (("thread", THREADS), ("channel", CHANNELS)):
            value = draw(st.one_of(st.none(), st.sampled_from(values)))
            if value is not None:
                doc[name] = value
    if dated is None:
        dated = draw(st.integers(0, 4)) > 0  # about one in five undated
    if dated:
        doc["date"] = draw(doc_dates)
    if key is not None:
        doc["id"] = key
    return doc


@dataclass
class History:
    """Operations for a store: ``("add", [docs], backdate)`` and ``("supersede", old_key, new_key, effective)``
    (replayed with ``backdate=True``: the effective dates are drawn freely; the replacement is
    meant to be active, though a version added out of date order may leave it superseded, which
    ``Store.supersede`` refuses)."""

    ops: list = field(default_factory=list)
    keys: list = field(default_factory=list)

    def __repr__(self) -> str:  # short, readable falsifying examples
        lines = []
        for op in self.ops:
            if op[0] == "add":
                lines.append("add " + repr(op[1]) + (" backdate=True" if op[2] else ""))
            else:
                lines.append(f"supersede({op[1]!r}, {op[2]!r}, effective={op[3]!r})")
        return "History(\n  " + "\n  ".join(lines) + "\n)"


@st.composite
def histories(draw, max_ops: int = 5, max_batch: int = 4, provenance: bool = False) -> History:
    """A random, valid sequence of store operations.

    Docs with a fresh key carry a unique word (``itemN``) so they are never an accidental
    re-ingest of another document; keyless docs do not, so identical re-ingests happen
    (and whitespace-only keyless texts, which are skipped). A re-add of an existing key
    either changes the text (a new version) or is an exact replay (same text, author and
    date) of one of the key's stored versions: its newest while still active, which is an
    idempotent re-ingest by docs/DESIGN.md §2.2 and by the store's rule alike, or a superseded one,
    which the store's rule (README, *Write rules*) also takes as a re-ingest: replaying a
    file never brings an old decision back. ``provenance``: documents get threads and channels.
    """
    h = History()
    versions: dict[str, list[dict]] = {}  # key -> its stored versions, oldest first (text, author, date, ...)
    retired: set[str] = set()  # keys whose newest version has been superseded
    versions_before: set[str] = set()  # keys stored before the batch being drawn
    counter = 0

    def fresh_text() -> str:
        nonlocal counter
        counter += 1
        return draw(texts()) + f" item{counter}"

    for _ in range(draw(st.integers(1, max_ops))):
        kinds = ["add", "add", "add"] + (["supersede"] if len(h.keys) >= 2 else [])
        live = [k for k in h.keys if k not in retired]  # a replacement must itself be valid (no cycles)
        if draw(st.sampled_from(kinds)) == "supersede" and live and len(h.keys) >= 2:
            new = draw(st.sampled_from(live))
            old = draw(st.sampled_from([k for k in h.keys if k != new]))
            effective = draw(st.one_of(st.none(), doc_dates))
            h.ops.append(("supersede", old, new, effective))
            retired.add(old)
            continue
        batch = []
        for _ in range(draw(st.integers(1, max_batch))):
            kind = draw(st.sampled_from(["new", "new", "keyless", "readd"] if h.keys else ["new", "keyless"]))
            if kind == "readd":
                key = draw(st.sampled_from(h.keys))
                if draw(st.booleans()):
                    kind = "replay"
            if kind == "keyless":
                text = draw(st.one_of(texts(1, 3), texts(1, 3), st.just("  \n ")))
                doc = draw(documents(text=text, provenance=provenance))
            elif kind == "new":
                key = f"k{counter + 1}"
                doc = draw(documents(key=key, text=fresh_text(), provenance=provenance))
                h.keys.append(key)
            elif kind == "replay":  # any stored version: the newest (active or not) or an older, superseded one
                doc = {"id": key, **draw(st.sampled_from(versions[key][::-1]))}
            else:  # a new version of an existing key
                doc = draw(documents(key=key, text=fresh_text(), provenance=provenance))
                retired.discard(key)
            if kind in ("new", "readd"):
                versions.setdefault(doc["id"], []).append({f: doc[f] for f in ("text", "author", "date", "thread", "channel") if f in doc})
            # ``supersedes``: other keys stored before this doc (never the doc's own key), on docs
            # that are surely stored (not keyless, not a replay).
            own = doc.get("id")
            targets = [k for k in h.keys if k != own]
            if targets and kind in ("new", "readd") and draw(st.integers(0, 3)) == 0:
                doc["supersedes"] = draw(st.lists(st.sampled_from(targets), min_size=1, max_size=2, unique=True))
                retired.update(doc["supersedes"])
            batch.append(doc)
        # A forward reference: a document names an id that a later document of the batch adds.
        fresh = [(j, d["id"]) for j, d in enumerate(batch) if d.get("id") and d["id"] not in versions_before]
        if fresh and draw(st.integers(0, 2)) == 0:
            j, key = draw(st.sampled_from(fresh))
            earlier = [i for i in range(j) if batch[i].get("id") is not None and batch[i]["id"] != key]
            if earlier:
                i = draw(st.sampled_from(earlier))
                batch[i] = {**batch[i], "supersedes": list(batch[i].get("supersedes", ())) + [key]}
                retired.add(key)
        versions_before.update(versions)
        h.ops.append(("add", batch, draw(st.integers(0, 2)) == 0))
    return h


@st.composite
def supersession_chains(draw, min_size: int = 2, max_size: int = 5) -> list[dict]:
    """Versions of one document, oldest first, with strictly increasing (date-only) dates.

    Either every version re-uses one ``id`` (each a new version of the last), or each has
    its own ``id`` and names the previous one in ``supersedes``.
    """
    chain_days = sorted(draw(st.lists(days, min_size=min_size, max_size=max_size, unique=True)))
    same_id = draw(st.booleans())
    author = draw(authors)
    out = []
    for i, d in enumerate(chain_days):
        doc = {"text": draw(texts()) + f" version{i}", "date": d.isoformat()}
        if author is not None:
            doc["author"] = author
        if same_id:
            doc["id"] = "chain"
        else:
            doc["id"] = f"chain{i}"
            if i:
                doc["supersedes"] = f"chain{i - 1}"
        out.append(doc)
    return out


def boundary_as_ofs(history: History) -> list[str]:
    """as_of values exactly at (and just before) every date the history uses.

    A bare day ``D`` (the start of D as a document date or ``effective``) gives ``DT00:00:00``
    and the day before at 23:59:59.999999; a timestamp is repeated verbatim.
    """
    out: set[str] = set()

    def visit(value: str | None) -> None:
        if value is None:
            return
        if len(value) == 10:
            d = date.fromisoformat(value)
            out.add(f"{value}T00:00:00")
            out.add(f"{(d - timedelta(days=1)).isoformat()}T23:59:59.999999")
            out.add(value)
        else:
            out.add(value)

    for op in history.ops:
        if op[0] == "add":
            for doc in op[1]:
                visit(doc.get("date"))
        else:
            visit(op[3])
    return sorted(out)


def as_of_for(history: History) -> st.SearchStrategy:
    """as_of values for a history: random ones (None included) or exactly on its boundaries."""
    near = boundary_as_ofs(history)
    if not near:
        return as_of_values
    return st.one_of(as_of_values, st.sampled_from(near), st.sampled_from(near))


# --- numeric helpers for the kernel tests ---------------------------------------------------------
def bool_masks(n: int) -> st.SearchStrategy:
    """A candidate mask of length ``n`` as a list of bools: all false, all true, or random."""
    return st.one_of(
        st.just([False] * n),
        st.just([True] * n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
