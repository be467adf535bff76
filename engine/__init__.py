"""mempp: non-destructive organizational memory.

Every document is kept whole and immutable; versions are chosen at read time,
when a question brings its own date and wording.

>>> import mempp
>>> mempp.Store, mempp.format_evidence  # doctest: +ELLIPSIS
(<class 'mempp.store.Store'>, <function format_evidence at ...>)

Owns the public API: the names ``import mempp`` gives (``__all__``: :class:`Store` and the :class:`Searcher` and
:class:`Writer` it hands its work to, :class:`QueryOptions` and its modes, the config,
the embedders, the errors, the result types, :func:`format_evidence`, :data:`ADMIN`) and ``__version__``.
Importing it loads no model.

Never imports: cli, planner, mempp.bench, onnxruntime, tokenizers.
"""

from .access import ADMIN
from .config import IndexConfig
from .embedder import Embedder, HashEmbedder, OnnxEmbedder
from .errors import (
    AccessDenied,
    CorruptStoreError,
    DocumentNotFound,
    EmbedderError,
    MemppError,
    StoreError,
    StoreLockedError,
    StoreWriteError,
    ValidationError,
)
from .evidence import format_evidence
from .options import ContextMode, QueryOptions, ReserveRule, TagRank, VectorIndex
from .searcher import Searcher
from .store import Store, repair, verify
from .writer import Writer
from mempp.storage import StoreRecoveredWarning
from .types import Added, Document, Hit, Hits, Plan, Record, Replacement
from mempp.storage import Analyzer

__version__ = "0.1.0"

__all__ = [
    "ADMIN",
    "AccessDenied",
    "Added",
    "Analyzer",
    "ContextMode",
    "CorruptStoreError",
    "Document",
    "DocumentNotFound",
    "Embedder",
    "EmbedderError",
    "HashEmbedder",
    "IndexConfig",
    "Hit",
    "Hits",
    "MemppError",
    "OnnxEmbedder",
    "Plan",
    "QueryOptions",
    "Record",
    "Replacement",
    "ReserveRule",
    "Searcher",
    "Store",
    "StoreError",
    "StoreLockedError",
    "StoreRecoveredWarning",
    "StoreWriteError",
    "TagRank",
    "ValidationError",
    "VectorIndex",
    "Writer",
    "format_evidence",
    "repair",
    "verify",
]
