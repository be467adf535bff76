"""mempp's storage: immutable Arrow segments, postings, term dictionary, supersession log, manifests.

Imports only ``mempp.kernels`` (for index building), numpy, pyarrow and pyroaring.
"""

from .analyzer import Analyzer
from .errors import CorruptStoreError, MemppError, StoreError, StoreLockedError, StoreWriteError
from .lock import WriterLock
from .manifest import list_versions, read_current, read_manifest
from .segment import NAT
from .snapshot import FOREVER, Snapshot
from .writer import CommitBatch, clean_strays, commit, new_manifest, now_us

__all__ = [
    "Analyzer",
    "CommitBatch",
    "CorruptStoreError",
    "FOREVER",
    "MemppError",
    "NAT",
    "Snapshot",
    "StoreError",
    "StoreLockedError",
    "StoreWriteError",
    "WriterLock",
    "clean_strays",
    "commit",
    "list_versions",
    "new_manifest",
    "now_us",
    "read_current",
    "read_manifest",
]
