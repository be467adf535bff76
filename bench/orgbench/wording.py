"""OrgBench's wording of dates and names: how the organization's writers write a day, a month,
a quarter, and an identifier made from a title.

Owns the date formats (:func:`fmt_day` in its five styles, :func:`month_year`, :func:`quarter`)
and :func:`slug`. Imports only the standard library and ``tables``.
"""

from __future__ import annotations

from datetime import datetime

from .tables import MON3, MONTHS


def fmt_day(d: datetime, style: int) -> str:
    if style == 0:
        return f"{d.day} {MONTHS[d.month - 1]} {d.year}"
    if style == 1:
        return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"
    if style == 2:
        return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
    if style == 3:
        return f"{MON3[d.month - 1]} {d.day}"
    return f"{d.day} {MON3[d.month - 1]} {d.year}"


def month_year(d: datetime) -> str:
    return f"{MONTHS[d.month - 1]} {d.year}"


def quarter(d: datetime) -> str:
    return f"Q{(d.month - 1) // 3 + 1} {d.year}"


def slug(s: str) -> str:
    out = []
    for c in s.lower():
        out.append(c if c.isalnum() else "-")
    return "-".join(p for p in "".join(out).split("-") if p)
