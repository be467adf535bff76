"""The errors mempp raises on purpose. Every one derives from :class:`MemppError`.

Owns the engine's error types (:class:`ValidationError`, which names the field and the record;
:class:`DocumentNotFound`; :class:`EmbedderError`) and re-exports the storage layer's, so a
caller catches everything from one place. A leaf: every engine module may import it.

Never imports: config, ingest, store, searcher, writer.
"""

from __future__ import annotations

from mempp.storage.errors import CorruptStoreError, MemppError, StoreError, StoreLockedError, StoreWriteError


class ValidationError(MemppError, ValueError):
    """Bad input: names the record (its position in the batch, and key if any) and the field."""

    def __init__(self, message: str, *, field: str | None = None, record: int | None = None, key: str | None = None):
        where = []
        if record is not None:
            where.append(f"record {record}" + (f" (id {key!r})" if key is not None else ""))
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(": ".join(where + [message]))
        self.message = message
        self.field = field
        self.record = record
        self.key = key


class DocumentNotFound(MemppError, KeyError):
    """No document has that key or doc id."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "document not found"


class EmbedderError(MemppError):
    """The embedding model cannot be loaded or does not match the store."""


class AccessDenied(MemppError, PermissionError):
    """A read the store's permissions do not allow: a store holding restricted documents read
    without a principal."""


__all__ = [
    "AccessDenied",
    "CorruptStoreError",
    "DocumentNotFound",
    "EmbedderError",
    "MemppError",
    "StoreError",
    "StoreLockedError",
    "ValidationError",
]
