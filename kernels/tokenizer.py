"""Tokenizing a batch of texts: the analyzer's possessive, apostrophe and token rules, compiled.

The texts arrive normalized (NFKC and case folded, except that ASCII capitals may remain:
``clean`` lowers A-Z) as one array of code points (``uint8`` for ASCII, ``uint32``
otherwise) with ``offs[t]:offs[t + 1]`` the span of text ``t``. ``cls`` classifies a code
point as the ``re`` module does for ``str`` patterns: ``WORD`` (``\\w``), ``ALNUM``
(``[^\\W_]``) and ``DIGIT`` (``\\d``). The rules, those of ``mempp.storage.analyzer``:

- possessive: an apostrophe (``'`` or U+2019) after an ``ALNUM`` code point and followed by
  ``s`` and a non-``WORD`` code point (or the end of the text) is dropped with its ``s``;
- every other apostrophe (``'``, U+2019, U+2018, `````) is dropped;
- tokens, left to right: a number ``\\d+(?:[.,]\\d+)*`` where a ``DIGIT`` starts one,
  else a run of ``ALNUM`` code points.

``tokenize`` also numbers the distinct tokens in first-seen order (a hash table keyed by the
token's code points), so the caller analyzes each distinct token once.

Owns the compiled tokenizer (:func:`clean`, :func:`tokenize`, the code-point classes) and the
mapping of tokens to term ids (:func:`map_terms`); the analyzer itself (stop words, the stem,
what the manifest records) is ``mempp.storage.analyzer``, which calls this module.

Never imports: mempp.storage, mempp.store, pyarrow.
"""

from __future__ import annotations

import numpy as np
from numba import njit

WORD = 1
ALNUM = 2
DIGIT = 4


@njit(cache=True, nogil=True)
def clean(src, offs, cls, out):
    """Apply the possessive and apostrophe rules and lower A-Z: ``out[:new_offs[-1]]``, ``new_offs`` the texts' spans there."""
    n_texts = offs.shape[0] - 1
    new_offs = np.empty(n_texts + 1, dtype=np.int64)
    new_offs[0] = 0
    m = 0
    for t in range(n_texts):
        a = offs[t]
        b = offs[t + 1]
        i = a
        while i < b:
            c = np.int64(src[i])
            if c == 39 or c == 0x2019:  # ' and U+2019: possessive, else a plain apostrophe
                if i > a and i + 1 < b and (src[i + 1] == 115 or src[i + 1] == 83) and (cls[src[i - 1]] & ALNUM) != 0:
                    if i + 2 == b or (cls[src[i + 2]] & WORD) == 0:
                        i += 2
                        continue
                i += 1
                continue
            if c == 96 or c == 0x2018:
                i += 1
                continue
            if 65 <= c <= 90:
                c += 32
            out[m] = c
            m += 1
            i += 1
        new_offs[t + 1] = m
    return new_offs


@njit(cache=True, nogil=True)
def tokenize(buf, offs, cls):
    """(token's distinct number per token, tokens per text, distinct tokens' starts, their lengths).

    Distinct tokens are numbered 0, 1, ... in first-seen order; ``buf`` is ``clean``'s output.
    ``_scan`` does the work and stops when an array is full; it is grown here and the scan
    resumes (no array is reassigned inside the scan's loop, which would slow it severalfold).
    """
    n_texts = offs.shape[0] - 1
    n = offs[n_texts]
    tok = np.empty(n // 4 + 16, dtype=np.int32)
    tok_first = np.empty(n_texts + 1, dtype=np.int64)
    cap = 1024
    d_start = np.empty(cap, dtype=np.int64)
    d_len = np.empty(cap, dtype=np.int64)
    d_hash = np.empty(cap, dtype=np.uint64)
    d_off = np.zeros(cap + 1, dtype=np.int64)
    d_buf = np.empty(8 * cap, dtype=buf.dtype)
    t_idx = np.full(2 * cap, -1, dtype=np.int32)
    t_hash = np.zeros(2 * cap, dtype=np.uint64)
    t = 0
    i = offs[0] if n_texts else 0
    n_tok = 0
    n_dist = 0
    while True:
        t, i, n_tok, n_dist, need = _scan(
            buf, offs, cls, t, i, tok, tok_first, n_tok, d_start, d_len, d_hash, d_off, d_buf, t_idx, t_hash, n_dist
        )
        if need == 0:
            break
        if need == 1:
            tok = _grow(tok, 2 * tok.shape[0])
        elif need == 2:
            size = 2 * d_buf.shape[0]
            while size < d_off[n_dist] + (offs[t + 1] - i):  # room for the token, which ends within its text
                size *= 2
            d_buf = _grow(d_buf, size)
        else:
            cap *= 2
            d_start = _grow(d_start, cap)
            d_len = _grow(d_len, cap)
            d_hash = _grow(d_hash, cap)
            d_off = _grow(d_off, cap + 1)
            mask = 2 * cap - 1
            t_idx = np.full(2 * cap, -1, dtype=np.int32)
            t_hash = np.zeros(2 * cap, dtype=np.uint64)
            for e in range(n_dist):
                s = np.int64(_mix(d_hash[e]) & np.uint64(mask))
                while t_idx[s] >= 0:
                    s = (s + 1) & mask
                t_idx[s] = e
                t_hash[s] = d_hash[e]
    tok_first[n_texts] = n_tok
    return tok[:n_tok], np.diff(tok_first), d_start[:n_dist].copy(), d_len[:n_dist].copy()


@njit(cache=True, nogil=True)
def _scan(buf, offs, cls, t0, i0, tok, tok_first, n_tok, d_start, d_len, d_hash, d_off, d_buf, t_idx, t_hash, n_dist):
    """Tokenize from text ``t0``, position ``i0``; returns (t, i, n_tok, n_dist, need).

    ``need``: 0 done, else the scan stopped before the token at ``i`` of text ``t`` because
    ``tok`` (1), ``d_buf`` (2) or the distinct arrays and table (3) are full.
    """
    n_texts = offs.shape[0] - 1
    cap = d_start.shape[0]
    mask = t_idx.shape[0] - 1
    for t in range(t0, n_texts):
        a = offs[t]
        b = offs[t + 1]
        i = a
        if t == t0:
            i = i0
        if i == a:
            tok_first[t] = n_tok
        while i < b:
            k = cls[buf[i]]
            if k & DIGIT:
                j = i + 1
                while j < b and (cls[buf[j]] & DIGIT) != 0:
                    j += 1
                while j + 1 < b and (buf[j] == 46 or buf[j] == 44) and (cls[buf[j + 1]] & DIGIT) != 0:
                    j += 2
                    while j < b and (cls[buf[j]] & DIGIT) != 0:
                        j += 1
            elif k & ALNUM:
                j = i + 1
                while j < b and (cls[buf[j]] & ALNUM) != 0:
                    j += 1
            else:
                i += 1
                continue
            if n_tok == tok.shape[0]:
                return t, i, n_tok, n_dist, 1
            ln = j - i
            # The token's key: a token of at most 7 code points below 256 is its own key (the code
            # points a byte each, the length in the top byte), compared exactly in the table; a
            # longer one is keyed by its FNV-1a hash with the top byte 0xFF and compared in full.
            short = ln <= 7
            key = np.uint64(0)
            if short:
                for p in range(ln):
                    c = np.uint64(buf[i + p])
                    if c > 255:
                        short = False
                        break
                    key |= c << np.uint64(8 * p)
            if short:
                key |= np.uint64(ln) << np.uint64(56)
            else:
                key = np.uint64(14695981039346656037)
                for p in range(i, j):
                    key = (key ^ np.uint64(buf[p])) * np.uint64(1099511628211)
                key |= np.uint64(0xFF) << np.uint64(56)
            slot = np.int64(_mix(key) & np.uint64(mask))
            d = np.int64(-1)
            while True:
                e = np.int64(t_idx[slot])
                if e < 0:
                    break
                if t_hash[slot] == key:
                    if short:
                        d = e
                        break
                    if d_len[e] == ln:
                        o = d_off[e]
                        same = True
                        for p in range(ln):
                            if d_buf[o + p] != buf[i + p]:
                                same = False
                                break
                        if same:
                            d = e
                            break
                slot = (slot + 1) & mask
            if d < 0:  # a new distinct token, into the empty slot found
                if n_dist == cap:
                    return t, i, n_tok, n_dist, 3
                o = d_off[n_dist]
                if o + ln > d_buf.shape[0]:
                    return t, i, n_tok, n_dist, 2
                d = n_dist
                t_idx[slot] = d
                t_hash[slot] = key
                d_start[d] = i
                d_len[d] = ln
                d_hash[d] = key
                for p in range(ln):
                    d_buf[o + p] = buf[i + p]
                d_off[d + 1] = o + ln
                n_dist += 1
            tok[n_tok] = d
            n_tok += 1
            i = j
    return n_texts, 0, n_tok, n_dist, 0


@njit(cache=True, nogil=True)
def _mix(h):
    """murmur3's 64-bit finalizer: every bit of ``h`` reaches the low bits that index the table."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(cache=True, nogil=True)
def _grow(a, cap):
    out = np.empty(cap, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, nogil=True)
def gather(buf, starts, lens, sep, out):
    """The distinct tokens back to back, each followed by ``sep``, into ``out``; returns the length used."""
    m = 0
    for d in range(starts.shape[0]):
        s = starts[d]
        for p in range(lens[d]):
            out[m] = buf[s + p]
            m += 1
        out[m] = sep
        m += 1
    return m


@njit(cache=True, nogil=True)
def map_terms(tok, counts, code):
    """(term ids of the kept tokens back to back, kept tokens per text); ``code[d] < 0`` drops distinct token ``d``."""
    flat = np.empty(tok.shape[0], dtype=np.int64)
    lengths = np.empty(counts.shape[0], dtype=np.int64)
    i = 0
    m = 0
    for t in range(counts.shape[0]):
        first = m
        for _ in range(counts[t]):
            c = code[tok[i]]
            i += 1
            if c >= 0:
                flat[m] = c
                m += 1
        lengths[t] = m - first
    return flat[:m], lengths


@njit(cache=True, nogil=True)
def maybe_unnormalized_ascii(buf, offs, out):
    """``out[t]`` is False only if ``" ".join(text.split())`` leaves ASCII text ``t`` (``buf[offs[t]:offs[t + 1]]``) as it is.

    ASCII whitespace is 9-13, 28-31 and the space: a text without control characters, two
    spaces in a row, or a space at either end is left as it is. (True: look closer; any
    control character counts, so the loop has no branch to mispredict.)
    """
    for t in range(offs.shape[0] - 1):
        a = offs[t]
        b = offs[t + 1]
        bad = 0
        if b > a and (buf[a] == 32 or buf[b - 1] == 32):
            bad = 1
        prev = 0
        for i in range(a, b):
            c = buf[i]
            s = 1 if c == 32 else 0
            bad |= (s & prev) | (1 if c < 32 else 0)
            prev = s
        out[t] = bad != 0
