"""The lexical analyzer: text to index terms. Fixed at index time and recorded in the manifest.

Case-folded, apostrophes and possessives folded ("Caroline's" -> "caroline"),
decimal numbers kept whole ("99.9"), English stop words dropped. The same
analyzer tokenizes documents at ingest and questions at query time; a store
refuses to open with a different one, since its postings would not match.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass

# A compact English stop list (Lucene's classic list plus common question and chat words).
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves ll ve re d s t m o y
    """.split()
)

_APOS = re.compile(r"['\u2019\u2018`]")
_POSSESSIVE = re.compile(r"(?<=[^\W_])['\u2019]s\b")
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")


@dataclass(frozen=True)
class Analyzer:
    """Tokenizer settings; ``to_json()`` goes into the manifest."""

    name: str = "simple-en"
    version: int = 1
    stopwords: bool = True

    def terms(self, text: str) -> list[str]:
        """Index terms of ``text`` in order (with repeats)."""
        text = unicodedata.normalize("NFKC", text).casefold()
        text = _POSSESSIVE.sub("", text)
        text = _APOS.sub("", text)
        toks = _TOKEN.findall(text)
        if self.stopwords:
            return [t for t in toks if t not in STOPWORDS]
        return toks

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Analyzer":
        return cls(**data)
