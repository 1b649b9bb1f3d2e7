"""The protobuf wire format where the package reads or writes it by hand: varints and field keys.

A message is a sequence of fields, each a key ``number << 3 | wire type`` (a varint) and a value:
a varint (type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5). A varint
holds 7 bits per byte, least significant first, the high bit set on every byte but the last;
negative int32 and int64 values take ten bytes (two's complement over 64 bits).

Who writes bytes by hand does so because one parse of assembled bytes (upb: one memcpy for a
packed field) beats building the message field by field: the tensor codec (``runtime/tensor_util.py``),
the Predict fast path (``serving/inference/predict.py``); who reads them, because the data is not a message
of its own (TensorBundle and SSTable entries, ``runtime/checkpoint/``) or a whole batch is read at
once (``runtime/example/wire_readers.py``). The vectorized forms take numpy arrays of values.

Thread-safety: pure functions of their arguments.
"""

from __future__ import annotations

import numpy as np

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
_SMALL = [bytes((v,)) for v in range(0x80)]  # the one-byte varints, made once


class WireError(ValueError):
    """Bytes that are not a well-formed varint (truncated, or longer than allowed)."""


def varint(value: int) -> bytes:
    """A non-negative int as a varint."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_list(values: list[int]) -> list[bytes]:
    """``varint`` of each value (lengths of strings, mostly short)."""
    return [_SMALL[v] if v < 0x80 else varint(v) for v in values]


def key(number: int, wire_type: int) -> bytes:
    """A field's key: its number and wire type."""
    return varint(number << 3 | wire_type)


def read_varint(buf, pos: int, limit: int, max_bytes: int = 10) -> tuple[int, int]:
    """The varint at ``pos`` of ``buf`` (bytes-like, read up to ``limit``): (value, next position)."""
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= limit:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise WireError("varint too long")


def read_varints(buf, pos: int, count: int) -> tuple[list[int], int]:
    """``count`` varints back to back from ``pos`` (a string tensor's lengths): (values, next position)."""
    values, limit = [], len(buf)
    for _ in range(count):
        value, pos = read_varint(buf, pos, limit)
        values.append(value)
    return values, pos


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """The byte count of each value's varint (uint64 or non-negative int64 values)."""
    values = values.astype(np.uint64, copy=False)
    sizes = np.ones(values.shape, np.int64)
    if values.size == 0 or int(values.max()) < 0x80:
        return sizes
    for k in range(1, 10):
        sizes += (values >> np.uint64(7 * k)) != 0
    return sizes


def varints(values: np.ndarray) -> bytes:
    """The varints of uint64 values, concatenated (a packed field's payload), built with vector
    operations: signed values go in as their two's complement (``astype(np.int64).view(np.uint64)``)."""
    if values.size == 0:
        return b""
    if int(values.max()) < 0x80:
        return values.astype(np.uint8).tobytes()
    nbytes = varint_sizes(values)
    starts = np.cumsum(nbytes) - nbytes
    out = np.empty(int(nbytes.sum()), np.uint8)
    for k in range(10):
        idx = np.flatnonzero(nbytes > k)
        if not idx.size:
            break
        byte = ((values[idx] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        byte[nbytes[idx] > k + 1] |= 0x80
        out[starts[idx] + k] = byte
    return out.tobytes()


def short_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(value, size) of the varints at positions ``pos`` of the uint8 array ``buf``, each of up to
    3 bytes (values below 2 MiB: lengths); None where one is longer. ``buf`` must extend 2 bytes
    past every position."""
    b0 = buf[pos].astype(np.int64)
    if len(b0) == 0 or b0.max() < 128:
        return b0, np.ones_like(b0)
    b1 = buf[pos + 1].astype(np.int64)
    b2 = buf[pos + 2].astype(np.int64)
    size = np.where(b0 < 128, 1, np.where(b1 < 128, 2, 3))
    if not ((size < 3) | (b2 < 128)).all():
        return None
    value = (b0 & 127) | np.where(size > 1, (b1 & 127) << 7, 0) | np.where(size > 2, b2 << 14, 0)
    return value, size


def packed_varints(data: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The varints packed back to back in the uint8 array ``data`` (which ends with a varint's last
    byte) as uint64 values, and the mask of the bytes that end one; None where one is longer than
    10 bytes."""
    final = data < 0x80
    ends = np.flatnonzero(final)
    firsts = np.concatenate(([0], ends[:-1] + 1))
    if not (ends - firsts < 10).all():
        return None
    shift = (np.arange(len(data)) - np.repeat(firsts, ends - firsts + 1)) * 7
    parts = (data & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    values = np.add.reduceat(parts, firsts) if len(parts) else np.zeros(0, np.uint64)
    return values, final
