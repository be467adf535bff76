"""mix64 and wide64: fast 64-bit checksums of store files, for verifying them when a store opens.

sha256 reads about 2 GB/s on one core, so checking a 1M-document store (3.2 GB) took
1.5 to 2.4 s of every open. mix64 detects the same damage (flipped bits, torn or
zeroed pages, truncation, swapped blocks) at about 4.3 GB/s a core here, twice as fast
(the multiplies of its lanes bound it, not memory): four independent lanes of
multiply-rotate-multiply over 8-byte little-endian words (the structure of xxHash64; the
constants are the usual 64-bit primes), merged, the length folded in, then avalanched.
Both are checksums, not cryptographic hashes: they guard against accidents, not forgers.
Stores written before wide64 record mix64 and sha256 for every file (``FileRef.mix64``),
the oldest sha256 only; opening checks the quickest one recorded (``FileRef.quick``), and
``CURRENT``'s digest of the manifest stays sha256.

wide64 (``FileRef.wide64``, what new files record) goes further: 32 independent lanes,
each adding ``lo32(w ^ key) * hi32(w ^ key) + rotl(w, 32)`` for its 8-byte word ``w``
(the lanes vectorize, so the multiplies no longer bound it: 19 GB/s a core in cache, against
mix64's 13), a key per lane and per stripe of a 4 KiB block (so swapped stripes within
a block change it), and every lane's accumulator scrambled by a full 64-bit multiply after
each block (so swapped blocks change it). Files are hashed through a memory map (no copy
out of the page cache) in windows that are populated with ``MADV_POPULATE_READ`` first, so
an unreadable page raises ``OSError`` rather than a bus error. Opening a 1M-document store
hashes 3.2 GB with two threads at 10 GB/s, about the memory bandwidth of the machine, where
mix64 read through a buffer reached 7 to 8.
"""

from __future__ import annotations

import mmap
import os
import sys

import numpy as np
from numba import njit, uint64

P1 = uint64(0x9E3779B185EBCA87)
P2 = uint64(0xC2B2AE3D27D4EB4F)
P3 = uint64(0x165667B19E3779F9)
P4 = uint64(0x85EBCA77C2B2AE63)
P5 = uint64(0x27D4EB2F165667C5)
STRIPE = 32  # bytes per round of the four lanes


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << uint64(r)) | (x >> uint64(64 - r))


@njit(cache=True, inline="always")
def _round(acc, word):
    return _rotl(acc + word * P2, 31) * P1


@njit(cache=True, nogil=True)
def stripes(acc, words):
    """Feed whole 32-byte stripes (``words``: uint64, shape (m, 4)) into the lanes ``acc``."""
    a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
    for w in words:  # rows with constant column indexes: no per-load index arithmetic
        a0 = _round(a0, w[0])
        a1 = _round(a1, w[1])
        a2 = _round(a2, w[2])
        a3 = _round(a3, w[3])
    acc[0], acc[1], acc[2], acc[3] = a0, a1, a2, a3


@njit(cache=True, nogil=True)
def finish(acc, tail, length):
    """The checksum: lanes merged, the last < 32 bytes (``tail``, uint8) and the length folded in."""
    h = _rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)
    for i in range(4):
        h = (h ^ _round(uint64(0), acc[i])) * P1 + P4
    h += uint64(length)
    n = tail.shape[0]
    i = 0
    while i + 8 <= n:
        w = uint64(0)
        for b in range(8):
            w |= uint64(tail[i + b]) << uint64(8 * b)
        h = _rotl(h ^ _round(uint64(0), w), 27) * P1 + P4
        i += 8
    while i < n:
        h = _rotl(h ^ (uint64(tail[i]) * P5), 11) * P1
        i += 1
    h ^= h >> uint64(33)
    h *= P2
    h ^= h >> uint64(29)
    h *= P3
    h ^= h >> uint64(32)
    return h


_M64 = (1 << 64) - 1
_SEEDS = np.array([(int(P1) + int(P2)) & _M64, int(P2), 0, -int(P1) & _M64], dtype=np.uint64)


def _start() -> np.ndarray:
    return _SEEDS.copy()


def mix64_bytes(data) -> str:
    """mix64 of a bytes-like object, as 16 hex digits."""
    buf = np.frombuffer(data, dtype=np.uint8)
    whole = len(buf) // STRIPE * STRIPE
    acc = _start()
    stripes(acc, buf[:whole].view("<u8").reshape(-1, 4))
    return f"{int(finish(acc, buf[whole:], len(buf))):016x}"


def mix64_file(path, chunk: int = 512 << 10) -> str:
    """mix64 of a file's bytes, read in ``chunk``-byte blocks (a multiple of 32; releases the GIL)."""
    acc = _start()
    rest, total = _read_in_units(path, chunk, STRIPE, lambda whole: stripes(acc, whole.view("<u8").reshape(-1, 4)))
    return f"{int(finish(acc, rest, total)):016x}"


def _read_in_units(path, chunk: int, unit: int, feed) -> tuple[np.ndarray, int]:
    """Read ``path`` in ``chunk``-byte blocks (rounded to a multiple of ``unit``), handing
    ``feed`` each run of whole ``unit``-byte pieces in order; returns the last partial piece
    and the file's length (a short read leaves a partial piece, carried to the next)."""
    chunk = max(unit, chunk // unit * unit)
    buf = np.empty(chunk, dtype=np.uint8)
    view = memoryview(buf)
    total = fill = 0  # bytes read; bytes waiting in buf[:fill]
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view[fill:])
            if not n:
                break
            total += n
            fill += n
            whole = fill // unit * unit
            feed(buf[:whole])
            rest = fill - whole
            buf[:rest] = buf[whole:fill]
            fill = rest
    return buf[:fill], total


# --- wide64 ---------------------------------------------------------------------------------

LANES = 32  # 8-byte lanes: one stripe is 256 bytes
BLOCK = 16  # stripes per block: 4 KiB, the unit the accumulators are scrambled after
BLOCK_BYTES = LANES * BLOCK * 8
_M32 = uint64(0xFFFFFFFF)
_M = (1 << 64) - 1


def _wide_keys() -> np.ndarray:
    """The (BLOCK, LANES) keys: splitmix64 from a fixed seed (the digits of pi)."""
    out = np.empty(BLOCK * LANES, dtype=np.uint64)
    x = 0x243F6A8885A308D3
    for i in range(len(out)):
        x = (x + 0x9E3779B97F4A7C15) & _M
        z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M
        out[i] = z ^ (z >> 31)
    return out.reshape(BLOCK, LANES)


WIDE_KEYS = _wide_keys()


@njit(cache=True, nogil=True)
def wide_stripes(acc, words, keys, scramble):
    """Feed the 256-byte stripes ``words`` (uint64, shape (m, LANES)) into the lanes ``acc``;
    the stripe at row ``i`` uses ``keys[i % BLOCK]``. ``scramble``: ``m`` is a whole number
    of blocks, each followed by the scramble (the last, partial block of a file is not)."""
    m = words.shape[0]
    for b in range(0, m, BLOCK):
        for s in range(min(BLOCK, m - b)):
            for j in range(LANES):  # independent lanes: vectorized
                w = words[b + s, j]
                d = w ^ keys[s, j]
                acc[j] += (d & _M32) * (d >> uint64(32)) + ((w << uint64(32)) | (w >> uint64(32)))
        if scramble:
            for j in range(LANES):
                a = acc[j]
                acc[j] = (a ^ (a >> uint64(47))) * P1


@njit(cache=True, nogil=True)
def wide_finish(acc, tail, length):
    """The checksum: the lanes merged in order, then the last < 256 bytes and the length (as :func:`finish`)."""
    merged = np.empty(4, dtype=np.uint64)
    for i in range(4):
        h = P5 + uint64(i)
        for j in range(i, LANES, 4):
            h = _rotl(h ^ _round(uint64(0), acc[j]), 27) * P1 + P4
        merged[i] = h
    return finish(merged, tail, length)


def _wide_start() -> np.ndarray:
    return np.zeros(LANES, dtype=np.uint64)


def _wide_words(buf: np.ndarray) -> np.ndarray:
    return buf.view("<u8").reshape(-1, LANES)


def wide64_bytes(data) -> str:
    """wide64 of a bytes-like object, as 16 hex digits."""
    buf = np.frombuffer(data, dtype=np.uint8)
    blocks = len(buf) // BLOCK_BYTES * BLOCK_BYTES
    stripes_end = len(buf) // (8 * LANES) * (8 * LANES)
    acc = _wide_start()
    wide_stripes(acc, _wide_words(buf[:blocks]), WIDE_KEYS, True)
    wide_stripes(acc, _wide_words(buf[blocks:stripes_end]), WIDE_KEYS, False)
    return f"{int(wide_finish(acc, buf[stripes_end:], len(buf))):016x}"


class Wide64:
    """wide64 fed in pieces of any size: the checksum :func:`wide64_bytes` gives their concatenation.

    Whole 4 KiB blocks are hashed straight from each piece (no copy); a block split across
    pieces is gathered first. Releases the GIL as :func:`wide64_bytes` does: a file can be
    hashed in a thread while it is written.
    """

    def __init__(self) -> None:
        self._acc = _wide_start()
        self._part = bytearray()  # the last, unfinished block: fewer than BLOCK_BYTES bytes
        self._length = 0

    def update(self, data) -> None:
        buf = np.frombuffer(data, dtype=np.uint8)
        self._length += len(buf)
        if self._part:
            need = BLOCK_BYTES - len(self._part)
            self._part += buf[:need].tobytes()
            buf = buf[need:]
            if len(self._part) < BLOCK_BYTES:
                return
            wide_stripes(self._acc, _wide_words(np.frombuffer(bytes(self._part), dtype=np.uint8)), WIDE_KEYS, True)
            self._part.clear()
        whole = len(buf) // BLOCK_BYTES * BLOCK_BYTES
        if whole:
            words = buf[:whole]
            if words.ctypes.data % 8:  # the kernel reads 8-byte words: an odd address is copied first
                words = words.copy()
            wide_stripes(self._acc, _wide_words(words), WIDE_KEYS, True)
        self._part += buf[whole:].tobytes()

    def hexdigest(self) -> str:
        rest = np.frombuffer(bytes(self._part), dtype=np.uint8)
        stripes_end = len(rest) // (8 * LANES) * (8 * LANES)
        acc = self._acc.copy()
        wide_stripes(acc, _wide_words(rest[:stripes_end]), WIDE_KEYS, False)
        return f"{int(wide_finish(acc, rest[stripes_end:], self._length)):016x}"


MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux 5.14+ (EINVAL before)
MAPPED = sys.platform.startswith("linux")  # elsewhere the advice's number means something else: read
WINDOW = 8 << 20  # bytes mapped at a time (a multiple of BLOCK_BYTES and of the page size)


def wide64_file(path, window: int = WINDOW) -> str:
    """wide64 of a file's bytes (releases the GIL: hash files in threads).

    Read through a memory map in ``window``-byte windows, each populated before it is read
    (an I/O error raises ``OSError``, as a read would, not a bus error); where the system
    cannot populate a map, through ``read``.
    """
    window = max(BLOCK_BYTES, window // BLOCK_BYTES * BLOCK_BYTES)
    if not MAPPED or window % mmap.ALLOCATIONGRANULARITY:
        return _wide64_read(path, window)
    acc = _wide_start()
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        blocks = size // BLOCK_BYTES * BLOCK_BYTES
        for off in range(0, blocks, window):
            n = min(window, blocks - off)
            m = mmap.mmap(f.fileno(), n, offset=off, access=mmap.ACCESS_READ)
            try:
                try:
                    m.madvise(MADV_POPULATE_READ)
                except OSError as exc:
                    if exc.errno not in (22, 38):  # EINVAL / ENOSYS: a kernel without it
                        raise
                    if off == 0:
                        return _wide64_read(path, window)  # (the map is closed below)
                view = np.frombuffer(m, dtype=np.uint8)
                try:
                    wide_stripes(acc, _wide_words(view), WIDE_KEYS, True)
                finally:
                    del view
            finally:
                m.close()
        f.seek(blocks)
        rest = np.frombuffer(f.read(), dtype=np.uint8)
    if blocks + len(rest) != size:
        raise OSError(f"{path}: short read")
    stripes_end = len(rest) // (8 * LANES) * (8 * LANES)
    wide_stripes(acc, _wide_words(rest[:stripes_end]), WIDE_KEYS, False)
    return f"{int(wide_finish(acc, rest[stripes_end:], size)):016x}"


def _wide64_read(path, chunk: int) -> str:
    """wide64 of a file read in ``chunk``-byte blocks (a multiple of BLOCK_BYTES)."""
    acc = _wide_start()
    rest, total = _read_in_units(path, chunk, BLOCK_BYTES, lambda whole: wide_stripes(acc, _wide_words(whole), WIDE_KEYS, True))
    stripes_end = len(rest) // (8 * LANES) * (8 * LANES)
    wide_stripes(acc, _wide_words(rest[:stripes_end]), WIDE_KEYS, False)
    return f"{int(wide_finish(acc, rest[stripes_end:], total)):016x}"
