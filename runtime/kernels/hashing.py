"""TensorFlow's string hashes, bit for bit, beside FarmHash (``pyfarmhash``).

- ``hash64``: TF's ``Hash64`` (``tensorflow/core/lib/hash/hash.cc``, a MurmurHash64A variant with
  seed 0xDECAFCAFFE), used by ``StringToHashBucket``.
- ``siphash24``: SipHash-2-4 with a 128-bit key, TF's ``StrongKeyedHash``; ``siphash24_many`` hashes
  a batch of strings in numpy lanes; ``siphash24_memo`` remembers each key's hashes.
- ``fingerprint_cat64``: TF's ``FingerprintCat64``, how ``SparseCross`` combines feature hashes
  (``fingerprint_cat64_many`` over uint64 arrays).
- ``shift_mix``: TF's ``ShiftMix``.

All return unsigned 64-bit Python ints (``siphash24_many`` a list of them). Thread-safety: pure functions (the memo is a plain dict:
a lost update costs only a second hash).
"""

from __future__ import annotations

import struct

import numpy as np

_MASK = 0xFFFFFFFFFFFFFFFF
_M = 0xC6A4A7935BD1E995


def hash64(data: bytes, seed: int = 0xDECAFCAFFE) -> int:
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    full = n - n % 8
    for (k,) in struct.iter_unpack("<Q", data[:full]):
        k = (k * _M) & _MASK
        k ^= k >> 47
        k = (k * _M) & _MASK
        h ^= k
        h = (h * _M) & _MASK
    tail = data[full:]
    if tail:
        for i in range(len(tail) - 1, -1, -1):
            h ^= tail[i] << (8 * i)
        h = (h * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    h ^= h >> 47
    return h


def siphash24(k0: int, k1: int, data: bytes) -> int:
    # The SipRounds are written out, not called: a Python call per round cost three times the
    # arithmetic. Rotations are ((x << b) | (x >> (64 - b))) & _MASK on 64-bit values.
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    full = n - n % 8
    words = [m for (m,) in struct.iter_unpack("<Q", data[:full])]
    words.append(((n & 0xFF) << 56) | int.from_bytes(data[full:], "little"))
    mask = _MASK
    last = len(words)
    words.append(0)  # a last pass for the finalization: v2 ^= 0xFF, then 4 rounds
    for i, m in enumerate(words):
        if i < last:
            v3 ^= m
            rounds = 2
        else:
            v2 ^= 0xFF
            rounds = 4
        for _ in range(rounds):
            v0 = (v0 + v1) & mask
            v1 = (((v1 << 13) | (v1 >> 51)) & mask) ^ v0
            v0 = ((v0 << 32) | (v0 >> 32)) & mask
            v2 = (v2 + v3) & mask
            v3 = (((v3 << 16) | (v3 >> 48)) & mask) ^ v2
            v0 = (v0 + v3) & mask
            v3 = (((v3 << 21) | (v3 >> 43)) & mask) ^ v0
            v2 = (v2 + v1) & mask
            v1 = (((v1 << 17) | (v1 >> 47)) & mask) ^ v2
            v2 = ((v2 << 32) | (v2 >> 32)) & mask
        v0 ^= m  # m is 0 on the finalization pass
    return v0 ^ v1 ^ v2 ^ v3


# Below this many strings, one Python SipHash per string beats the fixed cost of numpy's calls.
_BATCH_FROM = 16


def siphash24_many(k0: int, k1: int, items: list[bytes]) -> list[int]:
    """``siphash24`` of every item: strings of the same word count hash together, lane by lane,
    in numpy uint64 arithmetic (which wraps as SipHash's does)."""
    if len(items) < _BATCH_FROM:
        return [siphash24(k0, k1, item) for item in items]
    out = [0] * len(items)
    groups: dict[int, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(len(item) // 8 + 1, []).append(i)
    for words, members in groups.items():
        # Each item as its SipHash message words: the bytes, zeros, then the length's low byte.
        padded = b"".join(
            items[i] + bytes(words * 8 - 1 - len(items[i])) + bytes((len(items[i]) & 0xFF,)) for i in members
        )
        lanes = np.frombuffer(padded, dtype="<u8").reshape(len(members), words)
        hashed = _siphash24_lanes(k0, k1, lanes)
        for i, value in zip(members, hashed.tolist()):
            out[i] = value
    return out


# SipHash per string costs about a microsecond in Python; categorical strings repeat within and
# across requests, so hashes are kept per key, up to this many strings (then the memo restarts).
_MEMO_SIZE = 1 << 16
_MEMOS: dict[tuple[int, int], dict[bytes, int]] = {}


def siphash24_memo(k0: int, k1: int, items: list[bytes]) -> list[int]:
    """``siphash24_many``, each distinct string hashed once and remembered (thread-safe: a lost
    update only costs a second hash)."""
    memo = _MEMOS.setdefault((k0, k1), {})
    hashes = [memo.get(item) for item in items]
    if None not in hashes:
        return hashes
    unique = list(dict.fromkeys(item for item, h in zip(items, hashes) if h is None))
    computed = dict(zip(unique, siphash24_many(k0, k1, unique)))
    if len(memo) + len(computed) > _MEMO_SIZE:
        memo.clear()
    memo.update(computed)
    return [h if h is not None else computed[item] for item, h in zip(items, hashes)]


def _sip_rounds(v0, v1, v2, v3, count: int) -> tuple:
    for _ in range(count):
        v0 += v1
        v1 = ((v1 << _U13) | (v1 >> _U51)) ^ v0
        v0 = (v0 << _U32) | (v0 >> _U32)
        v2 += v3
        v3 = ((v3 << _U16) | (v3 >> _U48)) ^ v2
        v0 += v3
        v3 = ((v3 << _U21) | (v3 >> _U43)) ^ v0
        v2 += v1
        v1 = ((v1 << _U17) | (v1 >> _U47)) ^ v2
        v2 = (v2 << _U32) | (v2 >> _U32)
    return v0, v1, v2, v3


_U13, _U51, _U32, _U16, _U48, _U21, _U43, _U17, _U47 = (
    np.uint64(b) for b in (13, 51, 32, 16, 48, 21, 43, 17, 47)
)


def _siphash24_lanes(k0: int, k1: int, lanes: np.ndarray) -> np.ndarray:
    count = lanes.shape[0]
    v0 = np.full(count, k0 ^ 0x736F6D6570736575, np.uint64)
    v1 = np.full(count, k1 ^ 0x646F72616E646F6D, np.uint64)
    v2 = np.full(count, k0 ^ 0x6C7967656E657261, np.uint64)
    v3 = np.full(count, k1 ^ 0x7465646279746573, np.uint64)
    for j in range(lanes.shape[1]):
        m = lanes[:, j]
        v3 ^= m
        v0, v1, v2, v3 = _sip_rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    v2 ^= np.uint64(0xFF)
    v0, v1, v2, v3 = _sip_rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3


def shift_mix(value: int) -> int:
    return (value ^ (value >> 47)) & _MASK


_M64 = np.uint64(_M)


def fingerprint_cat64_many(fp1: np.ndarray, fp2: np.ndarray) -> np.ndarray:
    """``fingerprint_cat64`` over uint64 arrays, elementwise (numpy's uint64 products wrap)."""
    mixed = fp2 * _M64
    mixed ^= mixed >> _U47
    result = (fp1 ^ _M64) ^ (mixed * _M64)
    result *= _M64
    result ^= result >> _U47
    result *= _M64
    result ^= result >> _U47
    return result


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TF's ``FingerprintCat64``: combines two fingerprints (not commutative)."""
    result = fp1 ^ _M
    result ^= (shift_mix((fp2 * _M) & _MASK) * _M) & _MASK
    result = (result * _M) & _MASK
    result = (shift_mix(result) * _M) & _MASK
    return shift_mix(result)
