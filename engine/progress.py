"""A small progress bar on stderr (no dependency): redrawn at most 10 times a second on a terminal,
one summary line when done everywhere else.

Owns :class:`ProgressBar`, shared by the CLI, the demo and the benchmarks. A leaf.

Never imports: store, cli, mempp.storage.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, total: int | None, desc: str, unit: str = "docs", stream: TextIO | None = None, enabled: bool = True):
        self.total = total
        self.desc = desc
        self.unit = unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.n = 0
        self.note = ""  # said after the counts (``mempp add``: how many documents are committed)
        self.start = time.perf_counter()
        self._last = 0.0

    def __call__(self, n: int) -> None:
        self.update(n)

    def say(self, note: str) -> None:
        """Show ``note`` after the counts from now on (redrawn at once on a terminal)."""
        self.note = note
        if self.tty:
            self._last = time.perf_counter()
            self.stream.write("\r" + self._line(self._last))
            self.stream.flush()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if self.tty and (now - self._last > 0.1 or (self.total and self.n >= self.total)):
            self._last = now
            self.stream.write("\r" + self._line(now))
            self.stream.flush()

    def _line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.n / elapsed
        if self.total:
            frac = min(self.n / self.total, 1.0)
            bar = "#" * int(frac * 24)
            eta = (self.total - self.n) / rate if rate > 0 else 0.0
            return f"{self.desc} [{bar:<24}] {self.n}/{self.total} {self.unit} {rate:,.0f}/s eta {eta:,.0f}s {self.note}"
        return f"{self.desc} {self.n} {self.unit} {rate:,.0f}/s {self.note}"

    def close(self) -> None:
        if not self.enabled:
            return
        line = self._line(time.perf_counter()).replace(" eta 0s", "")
        line += " " if self.note else ""
        self.stream.write(("\r" if self.tty else "") + line + f"in {time.perf_counter() - self.start:,.1f}s\n")
        self.stream.flush()

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
