"""Reading JSON Lines documents and questions, with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .errors import ValidationError


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line; a bad line raises ``ValidationError``."""
    path = Path(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except UnicodeDecodeError as exc:
                raise ValidationError(f"{path}:{lineno}: not UTF-8 ({exc.reason})") from None
            except ValueError as exc:
                raise ValidationError(f"{path}:{lineno}: not valid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise ValidationError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj
