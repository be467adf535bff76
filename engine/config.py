"""Index-time settings: fixed when a store is created, recorded in its manifest, checked on open.

Owns :class:`IndexConfig` (embedding template, window stride, vector copy) and its checks, and
the query-time defaults every entry point shares (``DEFAULT_WEIGHTS``, ``DEFAULT_DEPTH``, thread
context, siblings, reserve rule, feedback, tag ranking). Nearly a leaf (it imports ``errors`` only), so the store, the
read path and the CLI can all import it.

Never imports: store, searcher, writer, planner, embedder, mempp.storage.
"""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass
from typing import Any

from .errors import ValidationError

TEMPLATE_FIELDS = {"text", "author", "date", "thread", "channel", "source"}

# Query defaults, chosen by measurement (README, "Retrieval quality"): on LoCoMo and on our
# organizational benchmark both, lexical-heavy fusion with thread context ("max" mode) beats
# the paper's weights 1,1,4 (`mempp eval --preset paper` keeps those).
DEFAULT_WEIGHTS = (2.0, 1.0, 1.0)  # lexical, tag, vector: answers of at most RECALL_K documents (weights=None)
RECALL_WEIGHTS = (1.0, 1.0, 1.0)  # answers of more than RECALL_K documents (weights=None): the legs count alike
RECALL_K = 15  # above this k the default weights are RECALL_WEIGHTS (see docs/quality.md, "weights follow k")
DEFAULT_DEPTH = 50  # candidates per leg; a query for more than 25 documents gets 2k (depth=None, the default)
DEFAULT_CONTEXT = (0.8, 0.6, 0.4)
DEFAULT_CONTEXT_MODE = "max"
DEFAULT_SIBLINGS = 8  # thread stage: a hit's siblings follow it when its thread holds at most this many documents (mempp.threads)
DEFAULT_RESERVE_RULE = "relevant"  # reserve slots only for lexical matches near the top (mempp.threads); "paper": any match
DEFAULT_NAME_FREE = True  # the vector legs read the question without the names of the people it names, when the tag leg holds them (mempp.feedback)
DEFAULT_CHAIN = 2  # chain stage: the first fused documents lift the ranked documents linked to them by rare terms, named days or references (mempp.chain); 0: off
DEFAULT_FEEDBACK = 3  # vector leg: the question's vector plus the mean of the first fused documents' (mempp.feedback); 0: off
DEFAULT_TAG_RANK = "fused"  # tag leg: its documents by BM25-then-date fused with their cosine (mempp.feedback); "lexical": BM25 then date


def default_weights(k: int) -> tuple[float, float, float]:
    """The fusion weights a query for ``k`` documents gets when it names none.

    Doubling the lexical leg puts exact matches in the first slots (LoCoMo's adversarial questions
    name the very words of their evidence); an answer of more than ``RECALL_K`` documents has room
    for them anyway, and there the legs weighted alike find more of the evidence that shares few
    words with the question (chosen on the tuning splits: docs/quality.md).
    """
    return DEFAULT_WEIGHTS if k <= RECALL_K else RECALL_WEIGHTS


@dataclass(frozen=True)
class IndexConfig:
    """How documents are embedded.

    ``embed_template``: the string embedded for each document, e.g. ``"{author}: {text}"``
    (fields: text, author, date (YYYY-MM-DD), thread, channel, source; a missing value is
    empty). None embeds the text alone, as the reference does.
    ``window_stride``: None embeds the first window only (the model's: 256 tokens for
    all-MiniLM-L6-v2, 512 for bge-small-en-v1.5), as the reference does; a number also embeds
    windows of the model's size (less its two framing tokens) starting every that many
    tokens (at most the window), and a document scores as its best window in the vector leg.
    ``vector_copy``: ``"int8"`` (the default) also stores an int8 copy of each embedding (a
    quarter of the bytes), which the vector leg scans first and then rescores exactly, with
    a certificate that the result equals the float32 scan's; None stores float32 only.
    """

    embed_template: str | None = None
    window_stride: int | None = None
    vector_copy: str | None = "int8"

    def __post_init__(self) -> None:
        if self.embed_template is not None:
            try:
                names = {f for _, f, _, _ in string.Formatter().parse(self.embed_template) if f is not None}
            except ValueError as exc:
                raise ValidationError(f"not a format string ({exc})", field="embed_template") from None
            if "text" not in names or names - TEMPLATE_FIELDS:
                raise ValidationError(
                    f"must use {{text}} and only {sorted(TEMPLATE_FIELDS)}", field="embed_template"
                )
        if self.window_stride is not None and (isinstance(self.window_stride, bool) or int(self.window_stride) < 1):
            raise ValidationError("expected an integer >= 1 or None", field="window_stride")
        if self.vector_copy not in (None, "int8"):
            raise ValidationError(f"expected 'int8' or None, got {self.vector_copy!r}", field="vector_copy")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "IndexConfig":
        # Stores written before vector_copy existed have no int8 copy.
        return cls(**{"vector_copy": None, **(data or {})})

    def render(self, text: str, **fields: str | None) -> str:
        if self.embed_template is None:
            return text
        values = {k: (v or "") for k, v in fields.items()}
        return self.embed_template.format(text=text, **values).strip()
