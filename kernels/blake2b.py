"""BLAKE2b with an 8-byte digest (no key, no salt), over many short messages at once.

A document's fingerprint is ``blake2b(author + b"\\x00" + normalized text, digest_size=8)``
read as a little-endian integer (``mempp.ingest.fingerprint``). For a batch of tens of
thousands of texts, hashlib costs a Python call, a bytes concatenation and an int
conversion per text, about 2 µs each. ``blake2b8_rows`` hashes them all in one compiled
call that releases the GIL. It is RFC 7693's BLAKE2b, checked against ``hashlib.blake2b``
in tests/test_fast_paths.py: the digest's 8 bytes are the first state word, little-endian.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

_IV = np.array(
    [
        0x6A09E667F3BCC908,
        0xBB67AE8584CAA73B,
        0x3C6EF372FE94F82B,
        0xA54FF53A5F1D36F1,
        0x510E527FADE682D1,
        0x9B05688C2B3E6C1F,
        0x1F83D9ABFB41BD6B,
        0x5BE0CD19137E2179,
    ],
    dtype=np.uint64,
)
_SIGMA = np.array(
    [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
        [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
        [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
        [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
        [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
        [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
        [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
        [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
        [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    ],
    dtype=np.int64,
)
BLOCK = 128


@njit(cache=True, inline="always")
def _rotr(x, r):
    return (x >> uint64(r)) | (x << uint64(64 - r))


@njit(cache=True, inline="always")
def _g(a, b, c, d, x, y):
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@njit(cache=True, inline="always")
def _compress(h, m, t, last):
    """One block: the state words are locals (registers), ``m`` the block's 16 words."""
    v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    v8, v9, v10, v11 = _IV[0], _IV[1], _IV[2], _IV[3]
    v12 = _IV[4] ^ uint64(t)
    v13 = _IV[5]
    v14 = ~_IV[6] if last else _IV[6]
    v15 = _IV[7]
    for r in range(12):
        s = _SIGMA[r % 10]  # RFC 7693: round r permutes by sigma[r mod 10]
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m[s[0]], m[s[1]])
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m[s[2]], m[s[3]])
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m[s[4]], m[s[5]])
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m[s[6]], m[s[7]])
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m[s[8]], m[s[9]])
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m[s[10]], m[s[11]])
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m[s[12]], m[s[13]])
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m[s[14]], m[s[15]])
    h[0] ^= v0 ^ v8
    h[1] ^= v1 ^ v9
    h[2] ^= v2 ^ v10
    h[3] ^= v3 ^ v11
    h[4] ^= v4 ^ v12
    h[5] ^= v5 ^ v13
    h[6] ^= v6 ^ v14
    h[7] ^= v7 ^ v15


@njit(cache=True, nogil=True)
def blake2b8_rows(pre, pre_offs, data, offs, todo, out):
    """``out[t]``: BLAKE2b-64 of ``pre[pre_offs[t]:pre_offs[t + 1]] + data[offs[t]:offs[t + 1]]``
    as a little-endian integer, for each ``t`` with ``todo[t]`` (``out[t]`` is left alone otherwise).

    ``pre`` and ``data`` are uint8 arrays. Each message is copied into a zero-padded buffer
    (whole 128-byte blocks), then compressed block by block.
    """
    h = np.empty(8, dtype=np.uint64)
    cap = BLOCK
    buf = np.zeros(cap // 8, dtype=np.uint64)
    for t in range(offs.shape[0] - 1):
        if not todo[t]:
            continue
        pa = pre_offs[t]
        np_ = pre_offs[t + 1] - pa
        da = offs[t]
        nd = offs[t + 1] - da
        n = np_ + nd
        blocks = max(1, (n + BLOCK - 1) // BLOCK)
        if blocks * BLOCK > cap:
            cap = blocks * BLOCK * 2
            buf = np.zeros(cap // 8, dtype=np.uint64)
        b8 = buf.view(np.uint8)
        b8[:np_] = pre[pa : pa + np_]
        b8[np_:n] = data[da : da + nd]
        b8[n : blocks * BLOCK] = 0
        for i in range(8):
            h[i] = _IV[i]
        h[0] ^= uint64(0x01010008)  # digest length 8, no key, fanout 1, depth 1
        for k in range(blocks):
            last = k == blocks - 1
            counted = n if last else (k + 1) * BLOCK
            _compress(h, buf[k * 16 : (k + 1) * 16], counted, last)
        out[t] = h[0]
