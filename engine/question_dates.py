"""Dates written in a question ("as of 2023-03-12", "in March 2023", "on 5 May 2023").

Used only when the caller opts in (``question_dates=True``) and gives no ``as_of``:
the latest date the question names becomes the ``as_of``, at the end of the period
it names (a day, a month, or a year written as "in 2023"). A question naming no
date is left alone. The rule is deliberately plain, so a user can predict it.

Owns that rule (:func:`question_as_of`) and its patterns, the periods a question names
(:func:`question_periods`, for a role's holder at the time), and the days a text names in full
(:func:`days_named`, for the chain stage); the read path calls them. A leaf.

Never imports: searcher, planner, store.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

_MICRO = timedelta(microseconds=1)

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
MONTHS["sept"] = 9
_M = "|".join(sorted(MONTHS, key=len, reverse=True))

_PATTERNS = [
    # 2023-03-12, 2023/03/12
    (re.compile(r"\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})\b"), lambda m: _day(m[1], m[2], m[3])),
    # 12 March 2023, 12th of March, 2023
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_M})\.?,?\s+(\d{{4}})\b", re.I), lambda m: _day(m[3], MONTHS[m[2].lower()], m[1])),
    # March 12, 2023
    (re.compile(rf"\b({_M})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), lambda m: _day(m[3], MONTHS[m[1].lower()], m[2])),
    # March 2023
    (re.compile(rf"\b({_M})\.?,?\s+(\d{{4}})\b", re.I), lambda m: _month_end(m[2], MONTHS[m[1].lower()])),
    # 2023-03
    (re.compile(r"\b(\d{4})-(\d{1,2})\b(?![-/]\d)"), lambda m: _month_end(m[1], m[2])),
    # in 2023 / during 2023 / as of 2023 / by 2023 / end of 2023
    (re.compile(r"\b(?:in|during|as of|by|end of|before|through)\s+(\d{4})\b", re.I), lambda m: _day(m[1], 12, 31)),
]


def _day(y, m, d) -> date | None:
    try:
        return date(int(y), int(m), int(d))
    except ValueError:
        return None


def _month_end(y, m) -> date | None:
    y, m = int(y), int(m)
    if not 1 <= m <= 12:
        return None
    return date(y, m, calendar.monthrange(y, m)[1])


_YEAR = re.compile(r"(?<!\w)(?:1[89]|2[01])\d\d(?!\w)")  # a year from 1800 to 2199 standing alone, as every day pattern writes it
_SPAN = 40  # a full date is written within this many characters of its year


def days_named(text: str) -> set[date]:
    """The days ``text`` names in full (a year, a month and a day: "2023-03-12", "12 March 2023",
    "March 12, 2023"); months and years alone are not days. Only the text around each
    year from 1800 to 2199 is searched (a long text names few years)."""
    spans: list[list[int]] = []  # the windows around the years, overlapping ones merged
    for y in _YEAR.finditer(text):
        lo, hi = max(0, y.start() - _SPAN), y.end() + _SPAN
        if spans and lo <= spans[-1][1]:
            spans[-1][1] = hi
        else:
            spans.append([lo, hi])
    found: set[date] = set()
    for lo, hi in spans:
        for pattern, make in _PATTERNS[:3]:
            for m in pattern.finditer(text[lo:hi]):
                d = make(m)
                if d is not None:
                    found.add(d)
    return found


def _periods(text: str) -> list[tuple[date, date]]:
    """Every period (first day, last day) the text names: a day, a month, or a year."""
    found: list[tuple[date, date]] = []
    rest = text
    for n, (pattern, make) in enumerate(_PATTERNS):
        for m in pattern.finditer(rest):
            d = make(m)
            if d is not None and 1 <= d.year <= 9999:
                found.append((d if n < 3 else d.replace(day=1) if n < 5 else d.replace(month=1, day=1), d))
        rest = pattern.sub(" ", rest)  # a matched span is not matched again by a looser pattern
    return found


def question_as_of(text: str) -> date | None:
    """The end of the latest period the question names, or None."""
    found = _periods(text)
    return max(end for _, end in found) if found else None


def question_periods(text: str) -> list[tuple[int, int]]:
    """The periods the question names, as µs UTC from the first day's start to the last day's end
    (the people directory's roles are held during them)."""
    from datetime import datetime, time, timezone

    def us(d: date, t: time) -> int:
        dt = datetime.combine(d, t, tzinfo=timezone.utc)
        return (dt - datetime(1970, 1, 1, tzinfo=timezone.utc)) // _MICRO

    return [(us(a, time(0)), us(b, time.max)) for a, b in _periods(text)]
