"""Dates as int64 microseconds since the epoch, UTC.

Policy (one for the whole library): ISO 8601 strings, ``datetime`` and
``date`` are accepted; a value with no time zone is UTC; a value with an
offset is converted to UTC. A date without a time is the start of that day
for a document's ``date`` and the *end* of that day for a query's ``as_of``
(so a question asked "on 2023-05-08" sees that day's documents).

Owns that policy and its conversions (:func:`to_us`, :func:`from_us`, :func:`iso`). A leaf: the
write path, the read path and time travel all import it.

Never imports: ingest, searcher, writer, versions, store.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DAY_END = time(23, 59, 59, 999999)


def to_us(value: object, *, end_of_day: bool = False) -> int:
    """Parse ``value`` to µs UTC; raises ``ValueError``/``TypeError`` with a short reason."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime.combine(value, _DAY_END if end_of_day else time(0))
    elif isinstance(value, str):
        return _str_to_us(value, end_of_day)  # documents of a batch share few distinct dates: parse each once
    else:
        raise TypeError(f"expected an ISO 8601 string, datetime or date, got {type(value).__name__}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt.astimezone(timezone.utc) - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


@lru_cache(maxsize=1 << 16)
def _str_to_us(value: str, end_of_day: bool) -> int:
    s = value.strip()
    if not s:
        raise ValueError("empty date string")
    if len(s) == 10 and s[4] == "-" and s[7] == "-":
        return to_us(datetime.combine(date.fromisoformat(s), _DAY_END if end_of_day else time(0)))
    return to_us(datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s))


def from_us(us: int | None) -> datetime | None:
    if us is None:
        return None
    return _EPOCH + timedelta(microseconds=int(us))


def iso(us: int | None) -> str | None:
    dt = from_us(us)
    return None if dt is None else dt.isoformat()
