"""Typed errors raised by the storage layer (re-exported by ``mempp``).

Owns the storage layer's error types: :class:`MemppError` (the base of every mempp error),
:class:`StoreError`, :class:`CorruptStoreError`, :class:`StoreLockedError` and
:class:`StoreWriteError`. A leaf: every module of the layer may import it.

Never imports: fsutil, files, manifest, mempp.errors, mempp.store.
"""

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


class StoreWriteError(StoreError):
    """A commit failed on an I/O error (disk full, EIO, failed fsync); nothing was acknowledged.

    ``errno`` is the operating system's error number. After a failed fsync the
    writer refuses further writes (``broken``) until the store is reopened: the
    kernel may have dropped the unsynced pages, and retrying fsync would report
    success for data that is gone.
    """

    def __init__(self, message: str, errno: int | None = None, broken: bool = False) -> None:
        super().__init__(message)
        self.errno = errno
        self.broken = broken


class StoreRecoveredWarning(UserWarning):
    """A store was opened at the newest whole version on disk because ``CURRENT`` or a version
    file was lost or damaged; it reads, and refuses writes until ``mempp repair``."""
