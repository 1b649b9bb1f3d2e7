"""The column-wise fast path for batches of ``tf.train.Example`` protos.

Per-feature work in Python costs more than TF's whole parse, so batches of canonically encoded
Examples (what protobuf serializers write: one ``features`` field, map entries of key then value
with one-byte tags, one list per Feature, numeric lists packed) are parsed column-wise instead,
with numpy over the batch's bytes concatenated: the map entries of all Examples are walked in
step (one entry of every Example per step), keys are matched through a hash of their bytes, list
headers are read for all entries at once and each kind's values are gathered in one pass (the
packed bytes of a float list are its little-endian float32s; int64 varints are decoded where
each ends; strings are cut out of the buffer, long lists of them split by upb). The readers of
the wire format (entries, lists, values) live in ``runtime/example/wire_readers.py``; this module holds
what depends on the ``Config``: the key table of its ``Plan``, matching keys to slots and laying
out the outputs.

Falling back: anything else -- other encodings, malformed bytes, every error -- makes ``parse_fast``
return None and the batch takes the general path in ``runtime/example/parser.py``, which owns TF's
semantics and error texts: the fast path only ever agrees with it (tests/runtime/test_parsing_ops.py
checks both against each other and TF). A ``Config`` none of whose batches can go fast (a dtype
without a list kind, a dense feature of no values, a key of 128 bytes or more, keys whose hashes
collide at every table size tried) gets None from ``plan``, kept in ``Config.derived``.

Thread-safety: pure functions over immutable plans; safe to call from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime import dtypes
from runtime.example.specs import (
    KIND_OF,
    NUMPY,
    Config,
    DenseSpec,
    RaggedSpec,
    SparseSpec,
    feature_slots,
    split_numpy,
)
from runtime.example.wire_readers import (
    _bytes,
    _entries,
    _floats,
    _int64s,
    _Irregular,
    _lists,
    _ranges,
    _require,
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


def _plan_of(config: Config) -> Plan | None:
    """``plan(config)``, made on the Config's first batch and kept with it."""
    derived = config.derived
    if "fast_path" not in derived:
        derived["fast_path"] = plan(config)
    return derived["fast_path"]


def parse_fast(serialized: list, config: Config) -> tuple | None:
    """``parse_examples`` of a batch (not a scalar) in the canonical encoding; None otherwise."""
    plan = _plan_of(config)
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
