"""mempp's storage: immutable Arrow segments, postings, term dictionary, supersession log, versions.

Where things are: ``files.py`` (how a file is written, named and checked), ``manifest.py`` (the
version files and ``CURRENT``: the on-disk format of a version, and the history), ``commits.py``
(one commit's files), ``merge.py`` (the merge policy and merged files), ``snapshot.py`` (a
version opened for reading, earlier versions included), ``segment.py``/``postings.py``/
``columns.py`` (what a segment holds and how it is read), ``fsutil.py`` (every durable file
operation, with the fault-injection hooks), ``lock.py``, ``confine.py``, ``ann.py``,
``resident.py``, ``analyzer.py``.

Imports only ``mempp.kernels`` (for index building), numpy, pyarrow, pyroaring, hnswlib, xxhash
and snowballstemmer; never the engine.

Owns the layer's public names (``__all__``), re-exported from the modules above.

Never imports: mempp.store, mempp.planner, mempp.bench, onnxruntime.
"""

from .analyzer import Analyzer
from .errors import CorruptStoreError, MemppError, StoreError, StoreLockedError, StoreRecoveredWarning, StoreWriteError
from .files import FileRef, Vanished
from .lock import WriterLock
from .manifest import Entry, State, read_legacy_version, read_pointer, read_state
from .segment import NAT
from .snapshot import FOREVER, Snapshot
from .commits import ACCESS_SCHEMA, CommitBatch, clean_strays, commit, new_meta, now_us

__all__ = [
    "ACCESS_SCHEMA",
    "Analyzer",
    "CommitBatch",
    "CorruptStoreError",
    "Entry",
    "FOREVER",
    "FileRef",
    "MemppError",
    "NAT",
    "Snapshot",
    "State",
    "StoreError",
    "StoreLockedError",
    "StoreRecoveredWarning",
    "StoreWriteError",
    "Vanished",
    "WriterLock",
    "clean_strays",
    "commit",
    "new_meta",
    "now_us",
    "read_legacy_version",
    "read_pointer",
    "read_state",
]
