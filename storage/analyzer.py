"""The lexical analyzer: text to index terms. Fixed at index time and recorded in the manifest.

Case-folded, apostrophes and possessives folded ("Caroline's" -> "caroline"),
decimal numbers kept whole ("99.9"), English stop words dropped, and words
reduced to their Snowball English stem ("painted", "painting" -> "paint"),
as Lucene's EnglishAnalyzer and PostgreSQL's english configuration do. The same
analyzer tokenizes documents at ingest and questions at query time; a store
refuses to open with a different one, since its postings would not match.

Owns the analysis rules (stop words, apostrophes and possessives, numbers, the Snowball stem),
:class:`Analyzer` (what the manifest records) and :func:`tokenize`; the scan itself is compiled in
``kernels.tokenizer``, which this module calls.

Never imports: segment, postings, snapshot, writer, mempp.ingest, mempp.store.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from mempp.kernels import tokenizer as _tokenizer

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

APOS = re.compile(r"['\u2019\u2018`]")
POSSESSIVE = re.compile(r"(?<=[^\W_])['\u2019]s\b")
TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")
_SEP = "\x00"
_TOKEN_OR_SEP = re.compile(r"\x00|\d+(?:[.,]\d+)*|[^\W_]+")


_local = threading.local()


@lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """Snowball English stem of one (already case-folded) word; numbers pass through.

    Every rule of the English stemmer rewrites a suffix of letters (or marks a "y", which
    its postlude restores) or drops a leading apostrophe (tokens have none), so a token ending in a digit ("v2", "covid19", "ticket4711")
    and a token of at most two characters are their own stem: they skip the (pure-Python,
    tens of microseconds) stemmer. tests/test_analyzer.py checks this against it.
    """
    if word[0].isdigit() or word[-1].isdigit() or len(word) <= 2:
        return word
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        # The pure-Python Snowball stemmer, named explicitly: ``snowballstemmer.stemmer()``
        # silently switches to PyStemmer when that is installed, whose older Snowball
        # release stems some words differently ("organization": "organ", not "organiz"),
        # which would make a store's postings depend on what else is installed.
        from snowballstemmer.english_stemmer import EnglishStemmer

        stemmer = _local.stemmer = EnglishStemmer()
    return stemmer.stemWord(word)


_CLASSES = np.zeros(0, dtype=np.uint8)


def _classes(size: int) -> np.ndarray:
    """Classes of the code points below ``size`` (at least) as ``re`` sees them in ``str`` patterns:
    1 ``\\w``, 2 ``[^\\W_]``, 4 ``\\d``.

    Computed with ``re`` itself over every code point of the range: ASCII, then the Basic
    Multilingual Plane (~20 ms), then all of Unicode (~0.4 s) only for text beyond it.
    """
    global _CLASSES
    if len(_CLASSES) >= size:
        return _CLASSES
    size = 128 if size <= 128 else 0x10000 if size <= 0x10000 else 0x110000
    every = "".join(map(chr, range(size)))
    out = np.zeros(size, dtype=np.uint8)
    for bit, pattern in ((1, r"\w"), (2, r"[^\W_]"), (4, r"\d")):
        at = np.fromiter((m.start() for m in re.finditer(pattern, every)), dtype=np.int64)
        out[at] |= bit
    _CLASSES = out
    return out


def joined_ascii(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(the texts' bytes back to back, uint8; each text's span ``offs[t]:offs[t + 1]``) when they
    are all ASCII, else None: shared by the tokenizer and the fingerprints of a batch."""
    joined = "".join(texts)
    if not joined.isascii():
        return None
    offs = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offs[1:])
    return np.frombuffer(joined.encode("ascii"), dtype=np.uint8), offs


def _code_points(texts: Sequence[str], ascii: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(code points of the normalized texts back to back, each text's span, the class table).

    ASCII text is its own NFKC form and its case folding only lowers A-Z, which the kernel
    does; other text is normalized here, text by text, as :meth:`Analyzer.terms` does.
    ``ascii``: :func:`joined_ascii` of ``texts``, if already made.
    """
    if ascii is None:
        ascii = joined_ascii(texts)
    if ascii is not None:
        buf, offs = ascii
    else:
        parts = [t if t.isascii() else unicodedata.normalize("NFKC", t).casefold() for t in texts]
        buf = np.frombuffer("".join(parts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        offs = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offs[1:])
    classes = _classes(128 if buf.dtype == np.uint8 else int(buf.max()) + 1)
    clean = np.empty(len(buf), dtype=buf.dtype)
    new_offs = _tokenizer.clean(buf, offs, classes, clean)
    return clean, new_offs, classes


Tokens = tuple  # (each token's distinct number, tokens per text, the distinct tokens): see tokenize


def tokenize(texts: Sequence[str], ascii: tuple | None = None) -> Tokens:
    """The tokens of ``texts`` before stop words and stemming, which do not depend on the settings.

    Returns (each token's distinct number, int64 tokens per text, the distinct tokens in
    first-seen order). The compiled part releases the GIL: a writer runs this in a thread.
    ``ascii``: :func:`joined_ascii` of ``texts``, if already made.
    """
    if len(texts) == 0:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), []
    buf, offs, classes = _code_points(texts, ascii)
    tok, counts, starts, lens = _tokenizer.tokenize(buf, offs, classes)
    if len(starts):
        # the distinct tokens, decoded in one go: they hold no space
        out = np.empty(int(lens.sum()) + len(lens), dtype=buf.dtype)
        used = _tokenizer.gather(buf, starts, lens, 32, out)
        words = out[: used - 1].tobytes().decode("ascii" if buf.dtype == np.uint8 else "utf-32-le").split(" ")
    else:
        words = []
    return tok, counts, words


@dataclass(frozen=True)
class Analyzer:
    """Tokenizer settings; ``to_json()`` goes into the manifest."""

    name: str = "simple-en"
    version: int = 1
    stopwords: bool = True
    stem: bool = True

    def terms(self, text: str) -> list[str]:
        """Index terms of ``text`` in order (with repeats)."""
        # ASCII is its own NFKC form and its case folding is lowering; text without an apostrophe
        # (most questions) skips both substitutions, which only remove apostrophes and what follows one.
        text = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()
        if "'" in text or "\u2019" in text or "\u2018" in text or "`" in text:
            text = APOS.sub("", POSSESSIVE.sub("", text))
        toks = TOKEN.findall(text)
        if self.stopwords:
            toks = [t for t in toks if t not in STOPWORDS]
        if self.stem:
            toks = [stem(t) for t in toks]
        return toks

    def term_ids(self, texts: Sequence[str], intern: Callable[[str], int]) -> tuple[np.ndarray, np.ndarray]:
        """The terms of many texts at once: (flat term ids, int64 count per text).

        ``intern(term)`` gives a term's id (assigning new ones), called once per distinct
        term in first-seen order. Same terms as :meth:`terms`, text by text: each text is
        normalized as there (ASCII text needs no NFKC, and its case folding is lowering
        A-Z, done by the kernel), then the possessive, apostrophe and token rules run
        compiled over all texts' code points at once (``mempp.kernels.tokenizer``, which
        classifies code points as ``re`` does), and each distinct token is stemmed and
        interned once.
        """
        return self.intern_tokens(tokenize(texts), intern)

    def intern_tokens(
        self, tokens: "Tokens", intern: Callable[[str], int], known: dict[str, int] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`term_ids` of texts already split by :func:`tokenize`.

        ``known``: terms whose id ``intern`` gives without assigning one (the store's
        dictionary): looked up at C speed, ``intern`` called for the others only, in the
        same order, so the same terms are assigned the same ids.
        """
        tok, counts, words = tokens
        if len(counts) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        stop = STOPWORDS if self.stopwords else frozenset()
        if known is None:
            code = np.array(
                [-1 if w in stop else intern(stem(w) if self.stem else w) for w in words], dtype=np.int64
            )
        else:
            terms = list(map(stem, words)) if self.stem else list(words)
            ids = list(map(known.get, terms))
            for i in [i for i, t in enumerate(ids) if t is None]:
                ids[i] = -1 if words[i] in stop else intern(terms[i])
            for i in [i for i, w in enumerate(map(stop.__contains__, words)) if w]:
                ids[i] = -1
            code = np.array(ids, dtype=np.int64)
        return _tokenizer.map_terms(tok, counts, code)

    def _term_ids_regex(self, texts: Sequence[str], intern: Callable[[str], int]) -> tuple[np.ndarray, np.ndarray]:
        """The batch path before the compiled tokenizer (kept as a second reference for the tests)."""
        n = len(texts)
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if any(_SEP in t for t in texts):
            per = [np.array([intern(t) for t in self.terms(x)], dtype=np.int64) for x in texts]
            return np.concatenate(per), np.array([len(x) for x in per], dtype=np.int64)
        text = unicodedata.normalize("NFKC", _SEP.join(texts) + _SEP).casefold()
        text = POSSESSIVE.sub("", text)
        text = APOS.sub("", text)
        toks = _TOKEN_OR_SEP.findall(text)
        code: dict[str, int] = {}
        for tok in dict.fromkeys(toks):  # distinct, first-seen order
            if tok == _SEP:
                code[tok] = -2
            elif self.stopwords and tok in STOPWORDS:
                code[tok] = -1
            else:
                code[tok] = intern(stem(tok) if self.stem else tok)
        ids = np.fromiter(map(code.__getitem__, toks), dtype=np.int64, count=len(toks))
        sep = ids == -2
        doc = np.cumsum(sep) - sep  # text index of each token
        keep = ids >= 0
        return ids[keep], np.bincount(doc[keep], minlength=n).astype(np.int64)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Analyzer":
        # Stores written before stemming existed record no "stem": they were not stemmed.
        return cls(**{"stem": False, **data})
