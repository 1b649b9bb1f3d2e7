"""Stateful random kernels (RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt).

TF draws from Philox; these draw from numpy's PCG64 seeded from the op's ``seed``/``seed2``. The
distributions match TF's, the bits do not: a model that serves random values (dropout at
inference time, initialisers run by an init op) gets values of the same law, never TF's values.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import invalid, out, shape_str
from runtime.kernels.registry import kernel


def _generator(seed: int, seed2: int) -> np.random.Generator:
    return np.random.default_rng(None if seed == 0 and seed2 == 0 else (seed, seed2))


def _shape(shape) -> list[int]:
    dims = [int(v) for v in np.asarray(shape).reshape(-1)]
    if any(d < 0 for d in dims):
        raise invalid(f"Dimension {min(dims)} must be >= 0")
    return dims


@kernel("RandomUniform", stateful=True, const_inputs=(0,))
def random_uniform(shape, *, dtype, seed=0, seed2=0):
    return out(_generator(seed, seed2).random(_shape(shape)), dtypes.as_numpy_dtype(dtype))


@kernel("RandomStandardNormal", stateful=True, const_inputs=(0,))
def random_standard_normal(shape, *, dtype, seed=0, seed2=0):
    return out(_generator(seed, seed2).standard_normal(_shape(shape)), dtypes.as_numpy_dtype(dtype))


@kernel("TruncatedNormal", stateful=True, const_inputs=(0,))
def truncated_normal(shape, *, dtype, seed=0, seed2=0):
    rng = _generator(seed, seed2)
    values = rng.standard_normal(_shape(shape))
    bad = np.abs(values) > 2
    while np.any(bad):  # resample the (rare) draws beyond two standard deviations, as TF does
        values[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(values) > 2
    return out(values, dtypes.as_numpy_dtype(dtype))


@kernel("RandomUniformInt", stateful=True, const_inputs=(0,))
def random_uniform_int(shape, minval, maxval, *, seed=0, seed2=0):
    lo, hi = int(np.asarray(minval)), int(np.asarray(maxval))
    if lo >= hi:
        raise invalid(f"Need minval < maxval, got {lo} >= {hi}")
    return out(_generator(seed, seed2).integers(lo, hi, _shape(shape)), minval.dtype)


# --------------------------------------------------------------------------- stateless (Philox)
# Counter-based, so TF's values are reproducible bit for bit: Philox4x32-10 over a 128-bit counter,
# one 4-word block per group of outputs, block g at counter + g (TF skips each shard's generator
# to its first group, so sharding never changes the values).

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
PHILOX = 1


def philox(key: tuple[int, int], counter: tuple[int, int, int, int], blocks: int) -> np.ndarray:
    """``blocks`` Philox4x32-10 outputs, shape (blocks, 4) uint32, at counter, counter + 1, ..."""
    low = np.uint64(counter[0] | counter[1] << 32)
    high = np.uint64(counter[2] | counter[3] << 32)
    g = np.arange(blocks, dtype=np.uint64)
    with np.errstate(over="ignore"):
        lo64 = low + g
        hi64 = high + (lo64 < low).astype(np.uint64)  # carry into the high word
    c = [lo64 & _MASK32, lo64 >> np.uint64(32), hi64 & _MASK32, hi64 >> np.uint64(32)]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    with np.errstate(over="ignore"):
        for round_ in range(10):
            p0 = _M0 * c[0]
            p1 = _M1 * c[2]
            c = [
                (p1 >> np.uint64(32)) ^ c[1] ^ k0,
                p1 & _MASK32,
                (p0 >> np.uint64(32)) ^ c[3] ^ k1,
                p0 & _MASK32,
            ]
            if round_ < 9:
                k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return np.stack(c, axis=1).astype(np.uint32)


def _seed_key_counter(seed) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """TF's GenerateKey: the seed pair becomes a counter, scrambled once with a fixed key."""
    s = [int(v) & 0xFFFFFFFFFFFFFFFF for v in np.asarray(seed).reshape(-1).astype(np.int64)]
    if len(s) != 2:
        raise invalid(f"seed must have shape [2], not {shape_str(np.asarray(seed).shape)}")
    counter = (s[0] & 0xFFFFFFFF, s[0] >> 32, s[1] & 0xFFFFFFFF, s[1] >> 32)
    mix = [int(v) for v in philox((0x3EC8F720, 0x02461E29), counter, 1)[0]]
    return (mix[0], mix[1]), (0, 0, mix[2], mix[3])


def _key_counter(key, counter, alg):
    if int(np.asarray(alg)) not in (PHILOX, 3):  # 3: auto-select, Philox on CPU
        raise invalid(f"Unsupported algorithm id: {int(np.asarray(alg))}")
    k = int(np.asarray(key).reshape(-1)[0].astype(np.uint64))
    c = [int(v) for v in np.asarray(counter).reshape(-1).astype(np.uint64)[:2]]
    return (k & 0xFFFFFFFF, k >> 32), (c[0] & 0xFFFFFFFF, c[0] >> 32, c[1] & 0xFFFFFFFF, c[1] >> 32)


def _words(key, counter, count: int, per_block: int) -> np.ndarray:
    """(groups, 4) uint32 words for ``count`` outputs, ``per_block`` outputs per Philox block."""
    groups = -(-count // per_block)
    return philox(key, counter, groups)


def _uniform_bits(words: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """TF's Uint32ToFloat family: random mantissa bits under exponent 0, minus one."""
    if dtype == np.float64:
        hi = words[:, 0::2].astype(np.uint64) & np.uint64(0xFFFFF)
        bits = (hi << np.uint64(32)) | words[:, 1::2].astype(np.uint64) | np.uint64(1023 << 52)
        return bits.view(np.float64) - 1.0
    if dtype == np.float16:
        bits = (words & np.uint32(0x3FF)).astype(np.uint16) | np.uint16(15 << 10)
        return bits.view(np.float16) - np.float16(1)
    if dtype == dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16):
        bits = (words & np.uint32(0x7F)).astype(np.uint16) | np.uint16(127 << 7)
        return (bits.view(dtype).astype(np.float32) - np.float32(1)).astype(dtype)
    bits = (words & np.uint32(0x7FFFFF)) | np.uint32(127 << 23)
    return bits.view(np.float32) - np.float32(1)


def _uniform(shape, key, counter, dtype: np.dtype) -> np.ndarray:
    dims = _shape(shape)
    count = int(np.prod(dims, dtype=np.int64))
    per_block = 2 if dtype == np.float64 else 4
    values = _uniform_bits(_words(key, counter, count, per_block), dtype).reshape(-1)[:count]
    return out(values.reshape(dims), dtype)


def _normal(shape, key, counter, dtype: np.dtype) -> np.ndarray:
    dims = _shape(shape)
    count = int(np.prod(dims, dtype=np.int64))
    per_block = 2 if dtype == np.float64 else 4
    words = _words(key, counter, count, per_block)
    if dtype == np.float64:
        u = _uniform_bits(words, np.dtype(np.float64))  # (groups, 2)
        u1, v = np.maximum(u[:, 0], 1e-7), 2 * np.pi * u[:, 1]
        radius = np.sqrt(-2 * np.log(u1))
        values = np.stack([np.sin(v) * radius, np.cos(v) * radius], axis=1)
    else:
        u = _uniform_bits(words, np.dtype(np.float32))  # (groups, 4): pairs (0, 1) and (2, 3)
        u1 = np.maximum(u[:, 0::2], np.float32(1e-7))
        v = np.float32(2 * np.pi) * u[:, 1::2]
        radius = np.sqrt(np.float32(-2) * np.log(u1))
        values = np.stack([np.sin(v) * radius, np.cos(v) * radius], axis=2).reshape(-1, 4)
    return out(values.reshape(-1)[:count].reshape(dims), dtype)


def _uniform_int(shape, key, counter, minval, maxval) -> np.ndarray:
    dims = _shape(shape)
    lo, hi = int(np.asarray(minval)), int(np.asarray(maxval))
    if lo >= hi:
        raise invalid(f"Need minval < maxval, got {lo} >= {hi}")
    dtype = np.asarray(minval).dtype
    count = int(np.prod(dims, dtype=np.int64))
    span = hi - lo
    if dtype == np.int64:
        words = _words(key, counter, count, 2)
        bits = words[:, 0::2].astype(np.uint64) | (words[:, 1::2].astype(np.uint64) << np.uint64(32))
        values = (bits % np.uint64(span)).reshape(-1)[:count]
    else:
        values = (_words(key, counter, count, 4) % np.uint32(span)).reshape(-1)[:count]
    return out((values.astype(np.int64) + lo).reshape(dims), dtype)


@kernel("StatelessRandomGetKeyCounter", const_inputs=(0,))
def stateless_random_get_key_counter(seed):
    key, counter = _seed_key_counter(seed)
    return (
        np.asarray([key[0] | key[1] << 32], np.uint64),
        np.asarray([counter[0] | counter[1] << 32, counter[2] | counter[3] << 32], np.uint64),
    )


@kernel("StatelessRandomGetKeyCounterAlg", const_inputs=(0,))
def stateless_random_get_key_counter_alg(seed):
    return (*stateless_random_get_key_counter(seed), np.asarray(PHILOX, np.int32))


@kernel("StatelessRandomGetAlg")
def stateless_random_get_alg():
    return np.asarray(PHILOX, np.int32)


@kernel("StatelessRandomUniformV2", const_inputs=(0,))
def stateless_random_uniform_v2(shape, key, counter, alg, *, dtype=dtypes.DT_FLOAT):
    return _uniform(shape, *_key_counter(key, counter, alg), dtypes.as_numpy_dtype(dtype))


@kernel("StatelessRandomNormalV2", const_inputs=(0,))
def stateless_random_normal_v2(shape, key, counter, alg, *, dtype=dtypes.DT_FLOAT):
    return _normal(shape, *_key_counter(key, counter, alg), dtypes.as_numpy_dtype(dtype))


@kernel("StatelessRandomUniformIntV2", const_inputs=(0,))
def stateless_random_uniform_int_v2(shape, key, counter, alg, minval, maxval):
    return _uniform_int(shape, *_key_counter(key, counter, alg), minval, maxval)


@kernel("StatelessRandomUniform", const_inputs=(0,))
def stateless_random_uniform(shape, seed, *, dtype=dtypes.DT_FLOAT):
    return _uniform(shape, *_seed_key_counter(seed), dtypes.as_numpy_dtype(dtype))


@kernel("StatelessRandomNormal", const_inputs=(0,))
def stateless_random_normal(shape, seed, *, dtype=dtypes.DT_FLOAT):
    return _normal(shape, *_seed_key_counter(seed), dtypes.as_numpy_dtype(dtype))


@kernel("StatelessRandomUniformInt", const_inputs=(0,))
def stateless_random_uniform_int(shape, seed, minval, maxval):
    return _uniform_int(shape, *_seed_key_counter(seed), minval, maxval)


@kernel("StatelessRandomUniformFullIntV2", const_inputs=(0,))
def stateless_random_uniform_full_int_v2(shape, key, counter, alg, *, dtype=dtypes.DT_UINT64):
    dims = _shape(shape)
    np_dtype = dtypes.as_numpy_dtype(dtype)
    count = int(np.prod(dims, dtype=np.int64))
    k, c = _key_counter(key, counter, alg)
    if np_dtype.itemsize == 8:
        words = _words(k, c, count, 2)
        bits = words[:, 0::2].astype(np.uint64) | (words[:, 1::2].astype(np.uint64) << np.uint64(32))
    else:
        bits = _words(k, c, count, 4)
    return bits.reshape(-1)[:count].view(np_dtype).reshape(dims)


_TRUNCATE = 2.0
_RESERVED_SAMPLES = 256  # samples TF reserves per output of a variable-sample law


def _truncated_normal(shape, key, counter, dtype: np.dtype) -> np.ndarray:
    """TF's TruncatedNormalDistribution: Box-Muller pairs from consecutive words of each group's
    reserved stream (per_group * 256 / 4 Philox blocks apart), keeping values below 2 in magnitude until the group
    is full (4 values; 2 for double, whose pairs take 4 words)."""
    dims = _shape(shape)
    count = int(np.prod(dims, dtype=np.int64))
    per_group = 2 if dtype == np.float64 else 4
    groups = -(-count // per_group)
    if groups == 0:
        return np.zeros(dims, dtype)
    blocks = 4
    while True:  # rarely more than one pass: a group needs > 16 words with probability ~1e-6
        words = np.stack(
            [
                philox(key, _add_counter(counter, g * (per_group * _RESERVED_SAMPLES // 4)), blocks).reshape(
                    -1
                )
                for g in range(groups)
            ]
        )
        if dtype == np.float64:
            u = _uniform_bits(words, np.dtype(np.float64))
            u1, v = np.maximum(u[:, 0::2], 1e-7), 2 * np.pi * u[:, 1::2]
            radius = np.sqrt(-2 * np.log(u1))
        else:
            u = _uniform_bits(words, np.dtype(np.float32))
            u1 = np.maximum(u[:, 0::2], np.float32(1e-7))
            v = np.float32(2 * np.pi) * u[:, 1::2]
            radius = np.sqrt(np.float32(-2) * np.log(u1))
        normals = np.stack([np.sin(v) * radius, np.cos(v) * radius], axis=2).reshape(groups, -1)
        keep = np.abs(normals) < _TRUNCATE
        if np.all(keep.sum(axis=1) >= per_group):
            break
        blocks *= 2
    rank = np.cumsum(keep, axis=1)
    values = np.stack(
        [
            normals[np.arange(groups), np.argmax(keep & (rank == slot + 1), axis=1)]
            for slot in range(per_group)
        ],
        axis=1,
    )
    return out(values.reshape(-1)[:count].reshape(dims), dtype)


def _add_counter(counter, n: int):
    low = (counter[0] | counter[1] << 32) + n
    high = (counter[2] | counter[3] << 32) + (low >> 64)
    low &= 0xFFFFFFFFFFFFFFFF
    high &= 0xFFFFFFFFFFFFFFFF
    return (low & 0xFFFFFFFF, low >> 32, high & 0xFFFFFFFF, high >> 32)


@kernel("StatelessTruncatedNormalV2", const_inputs=(0,))
def stateless_truncated_normal_v2(shape, key, counter, alg, *, dtype=dtypes.DT_FLOAT):
    return _truncated_normal(shape, *_key_counter(key, counter, alg), dtypes.as_numpy_dtype(dtype))


@kernel("StatelessTruncatedNormal", const_inputs=(0,))
def stateless_truncated_normal(shape, seed, *, dtype=dtypes.DT_FLOAT):
    return _truncated_normal(shape, *_seed_key_counter(seed), dtypes.as_numpy_dtype(dtype))


# --------------------------------------------------------------------------- multinomial


def _multinomial(logits, num_samples, key, counter, output_dtype) -> np.ndarray:
    """TF's MultinomialFunctor: an unnormalised CDF over the finite logits in double, searched
    with one uniform double (two consecutive words) per sample, rows drawing one after another
    from a single word stream."""
    n = int(np.asarray(num_samples))
    if logits.ndim != 2:
        raise invalid(f"logits should be a matrix, got shape {shape_str(logits.shape)}")
    if n < 0:
        raise invalid(f"num_samples should be nonnegative, got {n}")
    batch, classes = logits.shape
    if classes == 0 and n > 0:
        raise invalid("num_classes should be positive, got 0")
    dtype = dtypes.as_numpy_dtype(output_dtype)
    if batch == 0 or n == 0:
        return np.zeros((batch, n), dtype)
    x = logits.astype(np.float64)
    finite = np.isfinite(x)
    top = np.max(np.where(finite, x, -np.inf), axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, np.finfo(logits.dtype).min if logits.dtype.kind == "f" else 0.0)
    with np.errstate(all="ignore"):
        weights = np.where(finite, np.exp(x - top), 0.0)
    cdf = np.cumsum(weights, axis=1)
    words = philox(key, counter, -(-batch * n * 2 // 4)).reshape(-1)[: batch * n * 2]
    uniform = _uniform_bits(words.reshape(-1, 2), np.dtype(np.float64)).reshape(batch, n)
    targets = uniform * cdf[:, -1:]
    samples = np.stack([np.searchsorted(cdf[b], targets[b], side="right") for b in range(batch)])
    return out(samples, dtype)


@kernel("StatelessMultinomial", const_inputs=(1,))
def stateless_multinomial(logits, num_samples, seed, *, output_dtype=dtypes.DT_INT64):
    return _multinomial(logits, num_samples, *_seed_key_counter(seed), output_dtype)


@kernel("Multinomial", stateful=True, const_inputs=(1,))
def multinomial(logits, num_samples, *, seed=0, seed2=0, output_dtype=dtypes.DT_INT64):
    entropy = _generator(seed, seed2).integers(0, 2**32, size=6, dtype=np.uint64)
    key = (int(entropy[0]), int(entropy[1]))
    counter = tuple(int(v) for v in entropy[2:6])
    return _multinomial(logits, num_samples, key, counter, output_dtype)
