"""The wire-format readers of the Example fast path (``runtime/example/fast_path.py``).

Each reads one layer of a batch of canonically encoded ``tf.train.Example`` protos for every
Example at once, with numpy over the batch's bytes concatenated: ``_entries`` walks the map entries,
``_lists`` reads each entry's list header, ``_floats``/``_int64s``/``_bytes`` gather the values of
one kind. They never interpret keys or specs (that is the fast path's ``Plan``); anything outside
the canonical encoding raises ``_Irregular``, so that the batch takes the general path.

Thread-safety: pure functions of their arguments; safe to call from any thread.
"""

from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError

from runtime import wire

_PADDING = bytes(2048)  # past the batch: room for any read past an end (see ``_walk``)


class _Irregular(Exception):
    """The batch is not in the fast path's canonical encoding (or is invalid): parse it generally."""


def _require(condition: np.ndarray) -> None:
    if not _ALL(condition, axis=None):
        raise _Irregular


_ALL = np.logical_and.reduce  # ndarray.all, without its Python-level wrapper


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, size) of the varints of up to 3 bytes at ``pos`` (lengths below 2 MiB)."""
    found = wire.short_varints(buf, pos)
    if found is None:
        raise _Irregular
    return found


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the ranges [start, start + length), concatenated."""
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def _entries(serialized: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(buffer, example index, start, end) of the data of every map entry of every Example;
    ``buffer`` is the batch concatenated, zero-padded so that reads past any end stay inside."""
    try:
        joined = b"".join(serialized)
    except TypeError:
        raise _Irregular from None
    batch = len(serialized)
    buf = np.frombuffer(joined + _PADDING, dtype=np.uint8)
    sizes = np.fromiter(map(len, serialized), np.int64, batch)
    stop = np.cumsum(sizes)
    example = np.flatnonzero(sizes)
    # Each non-empty Example is exactly one ``features`` field: tag, length, payload.
    pos = (stop - sizes)[example]
    _require(buf[pos] == 0x0A)
    payload, header = _varints(buf, pos + 1)
    pos += 1 + header
    stop = stop[example]
    _require(pos + payload == stop)
    filled = payload > 0
    if not filled.all():
        example, pos, stop = example[filled], pos[filled], stop[filled]
    # The map entries, each a tag, a length and data, must tile the payload: walk all Examples in
    # step, one entry each per step.
    walked = _walk(buf, pos, stop)
    if walked is None:
        walked = _walk_exact(buf, pos, stop)
    counts, tag, data, end = walked
    _require(buf[tag] == 0x0A)
    return buf, np.repeat(example, counts), data, end


def _walk(buf: np.ndarray, pos: np.ndarray, stop: np.ndarray) -> tuple | None:
    """``_walk_exact`` for entries under 128 bytes (one-byte lengths), else None: a table of steps
    whose entries at the Examples' ends are 0, so that finished Examples wait there."""
    step = np.add(buf[1:], 2, dtype=np.int32)
    step[stop] = 0
    seen = [pos]
    while True:
        for _ in range(4):
            pos = pos + step[pos]
            seen.append(pos)
        if (pos == stop).all():
            break
        if not (pos <= stop).all():  # past its end (or a longer length): 4 steps stay in the padding
            return None
    tags = np.stack(seen[:-1], axis=1)  # (examples, steps): each Example's entries in order
    inside = tags < stop[:, None]
    tag = tags[inside]
    if buf[tag + 1].max(initial=0) >= 128:
        return None
    data = tag + 2
    return inside.sum(axis=1), tag, data, data + buf[tag + 1]


def _walk_exact(buf: np.ndarray, pos: np.ndarray, stop: np.ndarray) -> tuple:
    """(entries per Example, tag, data start, data end of each entry), Example by Example."""
    found = []
    examples = len(pos)
    index = np.arange(examples)
    while len(pos):
        length, header = _varints(buf, pos + 1)
        data = pos + 1 + header
        found.append((index, pos, data, data + length))
        pos = data + length
        more = pos < stop
        if not more.all():
            _require(pos[~more] == stop[~more])
            index, pos, stop = index[more], pos[more], stop[more]
    if not found:
        return (np.zeros(0, np.int64),) * 4
    index, tag, data, end = (np.concatenate(column) for column in zip(*found))
    order = np.argsort(index, kind="stable")
    return np.bincount(index, minlength=examples), tag[order], data[order], end[order]


def _lists(buf: np.ndarray, value: np.ndarray, end: np.ndarray) -> tuple:
    """Per entry from its value field on: kind (0 none, 1 bytes, 2 float, 3 int64) and the list's
    payload [start, end) -- for numeric kinds the packed values' bytes."""
    _require(buf[value] == 0x12)
    size, header = _varints(buf, value + 1)
    feature = value + 1 + header
    _require(feature + size == end)
    kind = np.zeros(len(value), dtype=np.int64)
    start = end.copy()
    has = np.flatnonzero(size)
    feature, end = feature[has], end[has]
    tag = buf[feature]
    _require((tag == 0x0A) | (tag == 0x12) | (tag == 0x1A))
    kinds = tag >> 3
    size, header = _varints(buf, feature + 1)
    listed = feature + 1 + header
    _require(listed + size == end)
    packed = np.flatnonzero((kinds > 1) & (size > 0))
    at, end = listed[packed], end[packed]
    _require(buf[at] == 0x0A)
    size, header = _varints(buf, at + 1)
    listed[packed] = at + 1 + header
    _require(listed[packed] + size == end)
    kind[has] = kinds
    start[has] = listed
    return kind, start


def _floats(buf, start, end) -> tuple[np.ndarray, np.ndarray]:
    sizes = end - start
    _require(sizes % 4 == 0)
    return buf[_ranges(start, sizes)].view("<f4"), sizes // 4


def _int64s(buf, start, end) -> tuple[np.ndarray, np.ndarray]:
    sizes = end - start
    data = buf[_ranges(start, sizes)]
    if len(data) == 0:
        return np.zeros(0, np.int64), sizes
    last = np.cumsum(sizes) - 1
    _require(data[last[sizes > 0]] < 0x80)  # each list ends with a varint's last byte
    decoded = wire.packed_varints(data)
    if decoded is None:
        raise _Irregular
    values, final = decoded
    seen = np.concatenate(([0], np.cumsum(final)))
    return values.view(np.int64), seen[last + 1] - seen[last + 1 - sizes]


def _bytes(buf, start, end) -> tuple[np.ndarray, np.ndarray]:
    walked = _walk_strings(buf, start, end)
    if walked is None:
        return _bytes_by_upb(buf, start, end)
    counts, data, lengths = walked
    return _strings(buf, data, lengths), counts


def _walk_strings(buf, start, end, most: int = 8) -> tuple | None:
    """(strings per list, start and length of each string) for lists of at most ``most`` strings
    each under 128 bytes, walked in step; None for any other lists."""
    index = np.flatnonzero(end > start)
    pos, stop = start[index], end[index]
    found = []
    while len(pos):
        if len(found) == most:
            return None
        length = buf[pos + 1]
        found.append((index, pos, length))
        pos = pos + 2 + length
        more = pos < stop
        if not more.all():
            if not (pos[~more] == stop[~more]).all():
                return None
            index, pos, stop = index[more], pos[more], stop[more]
    if not found:
        return np.zeros(len(start), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    index, tag, length = (np.concatenate(column) for column in zip(*found))
    if length.max() >= 128 or not (buf[tag] == 0x0A).all():
        return None
    order = np.argsort(index, kind="stable")
    return np.bincount(index, minlength=len(start)), tag[order] + 2, length[order].astype(np.int64)


def _strings(buf: np.ndarray, data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The strings at [data, data + length) as an object array of bytes."""
    out = np.empty(len(data), dtype=object)
    width = int(lengths.max(initial=0))
    # Short strings in one numpy bytes array, converted at once; numpy drops trailing NULs.
    if width <= 32 and not (buf[data + lengths - 1] == 0)[lengths > 0].any():
        width = max(width, 1)
        columns = np.arange(width)
        window = buf[data[:, None] + columns]
        window[columns >= lengths[:, None]] = 0
        out[:] = window.view(f"S{width}").reshape(-1).astype(object)
        return out
    raw = buf.tobytes()
    out[:] = [raw[a:b] for a, b in zip(data.tolist(), (data + lengths).tolist())]
    return out


def _bytes_by_upb(buf, start, end) -> tuple[np.ndarray, np.ndarray]:
    """Any lists of strings: split by upb, concatenated; counted by where each string ends."""
    from apis.tensorflow.core.example import feature_pb2

    sizes = end - start
    try:
        values = feature_pb2.BytesList.FromString(buf[_ranges(start, sizes)].tobytes()).value
    except DecodeError:
        raise _Irregular from None
    flat = np.empty(len(values), dtype=object)
    flat[:] = values
    lengths = np.fromiter(map(len, flat), np.int64, len(flat))
    return flat, _tiled(np.cumsum(1 + wire.varint_sizes(lengths) + lengths), end - start)


def _tiled(item_ends: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Items per range, given where each item ends in the ranges' concatenation; every non-empty
    range must end where an item does (no item straddles two ranges) and the totals must agree."""
    bounds = np.cumsum(sizes)
    total = int(bounds[-1]) if len(bounds) else 0
    if total != (int(item_ends[-1]) if len(item_ends) else 0):
        raise _Irregular
    filled = bounds[sizes > 0]
    at = np.minimum(np.searchsorted(item_ends, filled), max(len(item_ends) - 1, 0))
    _require(item_ends[at] == filled)
    return np.searchsorted(item_ends, bounds, side="right") - np.searchsorted(
        item_ends, bounds - sizes, side="right"
    )
