"""The column-wise fast path for batches of ``tf.train.Example`` protos.

Per-feature work in Python costs more than TF's whole parse, so batches of canonically encoded
Examples (what protobuf serializers write: one ``features`` field, map entries of key then value
with one-byte tags, one list per Feature, numeric lists packed) are parsed column-wise instead,
with numpy over the batch's bytes concatenated: the map entries of all Examples are walked in
step (one entry of every Example per step), keys are matched through a hash of their bytes, list
headers are read for all entries at once and each kind's values are gathered in one pass (the
packed bytes of a float list are its little-endian float32s; int64 varints are decoded where
each ends; strings are cut out of the buffer, long lists of them split by upb).

Falling back: anything else -- other encodings, malformed bytes, every error -- makes ``parse_fast``
return None and the batch takes the general path in ``runtime/example_parser.py``, which owns TF's
semantics and error texts: the fast path only ever agrees with it (tests/runtime/test_parsing_ops.py
checks both against each other and TF). A ``Config`` none of whose batches can go fast (a dtype
without a list kind, a dense feature of no values, a key of 128 bytes or more, keys whose hashes
collide at every table size tried) gets None from ``plan``, cached as ``Config.fast_plan``.

Thread-safety: pure functions over immutable plans; safe to call from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from runtime import dtypes
from runtime.example_specs import (
    KIND_OF,
    NUMPY,
    Config,
    DenseSpec,
    RaggedSpec,
    SparseSpec,
    feature_slots,
    split_numpy,
)

_CODE = {dtypes.DT_STRING: 1, dtypes.DT_FLOAT: 2, dtypes.DT_INT64: 3}  # Feature's kind field numbers
_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)


@dataclass(frozen=True)
class Plan:
    """What the fast path precomputes per Config: a hash table from a key's bytes (read as
    little-endian 8-byte chunks) to its slot, and each slot's spec; slots number the specs in
    dense, sparse, ragged order."""

    chunks: np.ndarray  # (keys + 1, n) uint64: each key's bytes, zero-padded; last row matches nothing
    lengths: np.ndarray  # (keys + 1,) each key's byte length; -1 in the last row
    slots: np.ndarray  # (keys + 1,) each key's slot; -1 in the last row
    masks: np.ndarray  # (n, 128) uint64: the bytes of chunk j a key of each length covers
    table: np.ndarray  # hash -> row of ``chunks``; the last row where no key hashes
    multipliers: np.ndarray  # (n + 1,) uint64: the length's, then each chunk's
    shift: np.uint64
    specs: tuple  # (family, spec) per slot
    codes: np.ndarray  # (slots,) the kind each slot expects
    fixed: tuple  # (kind, stride, slots) per group of fixed-length dense slots alike
    fixed_slots: np.ndarray  # all fixed-length dense slots
    fixed_strides: np.ndarray  # and their strides


def plan(config: Config) -> Plan | None:
    specs = [
        (f, spec) for f, group in enumerate((config.dense, config.sparse, config.ragged)) for spec in group
    ]
    if any(spec.dtype not in KIND_OF or (f == 0 and spec.stride < 1) for f, spec in specs):
        return None
    first_slot = (0, len(config.dense), len(config.dense) + len(config.sparse))
    slot_of = {}
    for key, (family, index, _, _) in feature_slots(config).items():
        try:
            slot_of[key.encode("utf-8")] = first_slot[family] + index
        except UnicodeEncodeError:  # never an Example's key: those are UTF-8
            continue
    keys = _key_table(list(slot_of))
    if keys is None:
        return None
    fixed_slots = [
        (_CODE[spec.dtype], spec.stride, slot)
        for slot, (f, spec) in enumerate(specs)
        if f == 0 and not spec.variable_length
    ]
    fixed: dict[tuple, list] = {}
    for code, stride, slot in fixed_slots:
        fixed.setdefault((code, stride), []).append(slot)
    return Plan(
        **keys,
        slots=np.array(list(slot_of.values()) + [-1], dtype=np.int64),
        specs=tuple(specs),
        codes=np.array([_CODE[spec.dtype] for _, spec in specs], dtype=np.int64),
        fixed=tuple((code, stride, np.array(s)) for (code, stride), s in fixed.items()),
        fixed_slots=np.array([s for _, _, s in fixed_slots], dtype=np.int64),
        fixed_strides=np.array([s for _, s, _ in fixed_slots], dtype=np.int64).reshape(-1, 1),
    )


def _key_table(keys: list[bytes]) -> dict | None:
    """``Plan``'s key fields for ``keys``; None for keys of 128 bytes or more (two-byte lengths)."""
    if any(len(k) > 127 for k in keys):
        return None
    n = max(1, -(-max(map(len, keys), default=1) // 8))
    chunks = np.zeros((len(keys) + 1, n), dtype=np.uint64)
    for row, key in enumerate(keys):
        padded = key.ljust(8 * n, b"\0")
        chunks[row] = [int.from_bytes(padded[8 * j : 8 * j + 8], "little") for j in range(n)]
    lengths = np.array([len(k) for k in keys] + [-1], dtype=np.int64)
    covered = np.clip(np.arange(128)[None, :] - 8 * np.arange(n)[:, None], 0, 8)
    masks = np.array([[(1 << (8 * int(c))) - 1 for c in row] for row in covered], dtype=np.uint64)
    multipliers = np.array([_MULTIPLIERS[j % 4] ^ j for j in range(n + 1)], dtype=np.uint64)
    smallest = max(4, (4 * len(keys)).bit_length())
    for bits in range(smallest, smallest + 8):  # widen the table until the keys do not collide
        shift = np.uint64(64 - bits)
        hashes = _hash(lengths[:-1], chunks[:-1].T, multipliers, shift)
        if len(set(hashes.tolist())) == len(keys):
            table = np.full(1 << bits, len(keys), dtype=np.int64)
            table[hashes] = np.arange(len(keys))
            return dict(chunks=chunks, lengths=lengths, masks=masks, table=table, multipliers=multipliers,
                        shift=shift)  # fmt: skip
    return None


def _hash(lengths: np.ndarray, chunks, multipliers: np.ndarray, shift: np.uint64) -> np.ndarray:
    h = lengths.astype(np.uint64) * multipliers[0]
    for j, chunk in enumerate(chunks):
        h ^= chunk * multipliers[j + 1]
        h ^= h >> np.uint64(29)
    return (h * multipliers[0]) >> shift


_PADDING = bytes(2048)  # past the batch: room for any read past an end (see ``_walk``)


class _Irregular(Exception):
    """The batch is not in the fast path's canonical encoding (or is invalid): parse it generally."""


def _require(condition: np.ndarray) -> None:
    if not _ALL(condition, axis=None):
        raise _Irregular


_ALL = np.logical_and.reduce  # ndarray.all, without its Python-level wrapper


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, size) of the varints of up to 3 bytes at ``pos`` (lengths below 2 MiB)."""
    b0 = buf[pos].astype(np.int64)
    if len(b0) == 0 or b0.max() < 128:
        return b0, np.ones_like(b0)
    b1 = buf[pos + 1].astype(np.int64)
    b2 = buf[pos + 2].astype(np.int64)
    size = np.where(b0 < 128, 1, np.where(b1 < 128, 2, 3))
    _require((size < 3) | (b2 < 128))
    value = (b0 & 127) | np.where(size > 1, (b1 & 127) << 7, 0) | np.where(size > 2, b2 << 14, 0)
    return value, size


def _varint_size(value: np.ndarray) -> np.ndarray:
    if len(value) == 0 or value.max() < 128:
        return 1
    return 1 + (value >= 1 << 7) + (value >= 1 << 14) + (value >= 1 << 21) + (value >= 1 << 28)


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


def _match(buf: np.ndarray, data: np.ndarray, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Slot of each entry's key (-1: not configured) and where its value field starts; the key
    field must come first."""
    _require(buf[data] == 0x0A)
    lengths = buf[data + 1].astype(np.int64)
    _require(lengths < 128)
    words = np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))  # unaligned
    start = data + 2
    chunks = [words[start + 8 * j] & plan.masks[j][lengths] for j in range(len(plan.masks))]
    row = plan.table[_hash(lengths, chunks, plan.multipliers, plan.shift)]
    found = plan.lengths[row] == lengths
    for j, chunk in enumerate(chunks):
        found &= plan.chunks[row, j] == chunk
    slots = np.where(found, plan.slots[row], -1)
    unmatched = np.flatnonzero(~found)
    if len(unmatched):  # proto3 map keys must be UTF-8: ASCII passes, anything else goes generally
        _require(buf[_ranges(start[unmatched], lengths[unmatched])] < 0x80)
    return slots, start + lengths


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
    final = data < 0x80
    ends = np.flatnonzero(final)
    firsts = np.concatenate(([0], ends[:-1] + 1))
    _require(ends - firsts < 10)
    shift = (np.arange(len(data)) - np.repeat(firsts, ends - firsts + 1)) * 7
    parts = (data & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    values = np.add.reduceat(parts, firsts) if len(parts) else np.zeros(0, np.uint64)
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
    return flat, _tiled(np.cumsum(1 + _varint_size(lengths) + lengths), end - start)


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


def parse_fast(serialized: list, config: Config) -> tuple | None:
    """``parse_examples`` of a batch (not a scalar) in the canonical encoding; None otherwise."""
    plan = config.fast_plan
    if plan is None or not serialized:
        return None
    try:
        buf, example, data, end = _entries(serialized)
        slots, value = _match(buf, data, plan)
        kind, start = _lists(buf, value, end)
        # Per entry, plus a last one standing for "no entry": count and first value in its column.
        kind = np.append(kind, 0)
        count = np.zeros(len(kind), np.int64)
        first = np.zeros(len(kind), np.int64)
        columns = {}
        for code, decode in ((1, _bytes), (2, _floats), (3, _int64s)):
            mine = np.flatnonzero(kind == code)
            columns[code], counts = decode(buf, start[mine], end[mine])
            count[mine] = counts
            first[mine] = np.cumsum(counts) - counts
        return _outputs(len(serialized), plan, example, slots, kind, count, first, columns)
    except (_Irregular, IndexError, ValueError):  # reads are bounded; should one not be, parse generally
        return None


def _outputs(batch, plan, example, slots, kind, count, first, columns) -> tuple:
    matched = np.flatnonzero(slots >= 0)
    cells = slots[matched] * batch + example[matched]
    entry_of = np.full(len(plan.specs) * batch, -1, dtype=np.int64)  # -1: the "no entry" entry
    entry_of[cells] = matched
    _require(entry_of[cells] == matched)  # a key twice in one Example: the last wins, generally
    kinds = kind[entry_of].reshape(-1, batch)
    present = kinds == plan.codes[:, None]
    _require(present | (kinds == 0))  # the general path words the type error
    counts = count[entry_of].reshape(-1, batch)
    firsts = first[entry_of].reshape(-1, batch)
    fixed = plan.fixed_slots
    _require(~present[fixed] | (counts[fixed] == plan.fixed_strides))  # else a size error
    outputs = [None] * len(plan.specs)
    complete = present.all(axis=1).tolist()
    for code, stride, group in plan.fixed:
        at = firsts[group] if stride == 1 else firsts[group][..., None] + np.arange(stride)
        values = _column(columns[code], stride)[at]
        for row, slot in enumerate(group.tolist()):
            spec = plan.specs[slot][1]
            if not complete[slot]:
                if not spec.default.size:
                    raise _Irregular  # required: the general path words the error
                missing = ~present[slot]
                values[row][missing] = spec.default.reshape(-1) if stride > 1 else spec.default.reshape(-1)[0]
            outputs[slot] = values[row].reshape(batch, *spec.shape)
    groups = ([], [], [])
    for slot, (family, spec) in enumerate(plan.specs):
        flat = columns[plan.codes[slot]]
        if family == 0:
            if outputs[slot] is None:
                outputs[slot] = _fast_padded(spec, batch, counts[slot], firsts[slot], flat)
            out = outputs[slot]
        elif family == 1:
            out = _fast_sparse(spec, batch, counts[slot], firsts[slot], flat)
        else:
            out = _fast_ragged(spec, batch, counts[slot], firsts[slot], flat)
        groups[family].append(out)
    sparse, ragged = groups[1], groups[2]
    return (
        [s[0] for s in sparse],
        [s[1] for s in sparse],
        [s[2] for s in sparse],
        groups[0],
        [r[0] for r in ragged],
        [r[1] for r in ragged],
    )


def _column(flat: np.ndarray, stride: int) -> np.ndarray:
    """A kind's values, at least ``stride`` of them, so that a row of "no entry" (first value 0)
    can index it too (before the default replaces it)."""
    if len(flat) >= stride:
        return flat
    return np.concatenate([flat, np.zeros(stride - len(flat), dtype=flat.dtype)])


def _fast_padded(spec: DenseSpec, batch: int, counts, firsts, flat) -> np.ndarray:
    """A variable-length dense feature: rows padded to the longest with the default."""
    stride = spec.stride
    _require(counts % stride == 0)
    width = int(counts.max()) if batch else 0
    out = np.empty((batch, width), dtype=NUMPY[spec.dtype])
    if spec.default.size:
        out[...] = spec.default.reshape(-1)[0]
    else:
        out[...] = b"" if spec.dtype == dtypes.DT_STRING else 0
    out.reshape(-1)[_ranges(np.arange(batch) * width, counts)] = flat[_ranges(firsts, counts)]
    return out.reshape(batch, width // stride, *spec.shape[1:])


def _fast_sparse(spec: SparseSpec, batch: int, counts, firsts, flat) -> tuple:
    ends = np.cumsum(counts)
    total = int(ends[-1])
    indices = np.empty((total, 2), dtype=np.int64)
    rows = np.repeat(np.arange(batch, dtype=np.int64), counts)
    indices[:, 0] = rows
    indices[:, 1] = np.arange(total, dtype=np.int64) - (ends - counts)[rows]
    values = flat[firsts[rows] + indices[:, 1]]
    return indices, values, np.array([batch, counts.max()], np.int64)


def _fast_ragged(spec: RaggedSpec, batch: int, counts, firsts, flat) -> tuple:
    splits = np.zeros(batch + 1, dtype=split_numpy(spec.split_dtype))
    np.cumsum(counts, out=splits[1:], dtype=splits.dtype)
    return flat[_ranges(firsts, counts)], splits
