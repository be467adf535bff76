"""The tag leg (docs/DESIGN.md §3.2): which authors a question names, and their candidate documents.

Owns author-name matching (the exact label, the full name, a first or last name) and the
unranked set of candidates those authors wrote (the planner orders them by BM25, date and
ingest order). It must never import the other legs, fusion, the planner or the store.

Never imports: lexical, vector, vector_batch, fusion, planner, store.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable, Sequence

import numpy as np

from mempp.kernels.masks import keep_codes
from mempp.storage import Snapshot
from mempp.storage.analyzer import STOPWORDS

from .candidates import rare_ids, code_mask


_WORDS = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"(?<=[^\W_])['\u2019]s\b", "", text)
    return _WORDS.findall(text)


class NameMatcher:
    """Finds the authors a question names: the exact label, the full name, or a first or last name."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.by_token: dict[str, set[int]] = {}
        self.full: list[tuple[str, ...]] = []
        for code, name in enumerate(self.names):
            toks = tuple(_words(name))
            self.full.append(toks)
            parts = {toks[0], toks[-1]} if toks else set()
            for tok in parts:
                if len(tok) >= 2 and tok not in STOPWORDS and not tok.isdigit():
                    self.by_token.setdefault(tok, set()).add(code)

    def match(self, question: str) -> list[int]:
        words = _words(question)
        found: set[int] = set()
        joined = " " + " ".join(words) + " "
        for code, toks in enumerate(self.full):
            if toks and (" " + " ".join(toks) + " ") in joined:
                found.add(code)
        for w in words:
            found.update(self.by_token.get(w, ()))
        return sorted(found)


def tag_leg(snap: Snapshot, codes: Iterable[int], mask: np.ndarray) -> np.ndarray:
    """Candidates written by the named authors, ascending (unranked; the caller orders them)."""
    codes = sorted(set(int(c) for c in codes))
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    ids = rare_ids(snap.authors, codes)
    if ids is not None:
        return ids[mask[ids].view(bool)].astype(np.int64)
    hit = np.empty(len(mask), dtype=np.uint8)
    keep_codes(mask, snap.authors.codes, code_mask(snap.authors, codes), hit)
    return np.flatnonzero(hit).astype(np.int64)
