"""TensorFlow's string hashes, bit for bit, beside FarmHash (``pyfarmhash``).

- ``hash64``: TF's ``Hash64`` (``tensorflow/core/lib/hash/hash.cc``, a MurmurHash64A variant with
  seed 0xDECAFCAFFE), used by ``StringToHashBucket``.
- ``siphash24``: SipHash-2-4 with a 128-bit key, TF's ``StrongKeyedHash``.
- ``fingerprint_cat64``: TF's ``FingerprintCat64``, how ``SparseCross`` combines feature hashes.
- ``shift_mix``: TF's ``ShiftMix``.

All return unsigned 64-bit Python ints. Thread-safety: pure functions.
"""

from __future__ import annotations

import struct

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


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def siphash24(k0: int, k1: int, data: bytes) -> int:
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(v0, v1, v2, v3, count):
        for _ in range(count):
            v0 = (v0 + v1) & _MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _MASK
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _MASK
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)
        return v0, v1, v2, v3

    n = len(data)
    full = n - n % 8
    for (m,) in struct.iter_unpack("<Q", data[:full]):
        v3 ^= m
        v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    last = ((n & 0xFF) << 56) | int.from_bytes(data[full:], "little")
    v3 ^= last
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
    v0 ^= last
    v2 ^= 0xFF
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3


def shift_mix(value: int) -> int:
    return (value ^ (value >> 47)) & _MASK


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TF's ``FingerprintCat64``: combines two fingerprints (not commutative)."""
    result = fp1 ^ _M
    result ^= (shift_mix((fp2 * _M) & _MASK) * _M) & _MASK
    result = (result * _M) & _MASK
    result = (shift_mix(result) * _M) & _MASK
    return shift_mix(result)
