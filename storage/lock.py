"""One writer per store: an ``flock`` on ``LOCK`` in the store directory.

``flock`` (not ``lockf``) because a POSIX record lock is dropped when *any*
descriptor of the file is closed in the process, and because the kernel
releases an ``flock`` when its holder dies, even on SIGKILL.

Owns :class:`WriterLock`: taking the writer's lock, waiting for it, and letting it go.

Never imports: manifest, writer, snapshot, mempp.store.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from .errors import StoreError, StoreLockedError


class WriterLock:
    def __init__(self, store_dir: Path) -> None:
        self.path = store_dir / "LOCK"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float | None = None) -> None:
        """Take the lock; with ``timeout`` (seconds), wait up to that long for another writer to
        let go before raising ``StoreLockedError`` (None or 0: refuse at once)."""
        if self._fd is not None:
            return
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            try:
                return self._try()
            except StoreLockedError:
                if deadline is None or time.monotonic() >= deadline:
                    raise
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _try(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symlink planted as LOCK is never followed
                raise StoreError(f"{self.path}: the lock file is a symlink; refusing to follow it") from None
            raise StoreError(f"{self.path}: cannot open the lock file ({exc.strerror}); `mempp repair` sets a damaged one aside") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StoreLockedError(
                    f"{self.path.parent}: another writer holds the store (lock file {self.path.name})"
                ) from None
            raise
        self._fd = fd

    def __del__(self) -> None:
        # A Store dropped without close() (a crashed caller, a lost reference) must not keep
        # the store locked for the rest of the process.
        try:
            self.release()
        except OSError:
            pass

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
