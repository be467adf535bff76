"""Typed errors raised by the storage layer (re-exported by ``mempp``)."""

from __future__ import annotations


class MemppError(Exception):
    """Base class of every error mempp raises on purpose."""


class StoreError(MemppError):
    """The store directory cannot be used as asked (not a store, wrong format, read-only)."""


class CorruptStoreError(StoreError):
    """A file of the store does not match what its manifest recorded; ``path`` names it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class StoreLockedError(StoreError):
    """Another writer holds the store's write lock."""
