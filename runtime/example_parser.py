"""Batch parsing of serialized ``tf.train.Example`` protos, as TF's ``example_proto_fast_parsing.cc``.

The wire format is decoded by the generated ``Example`` class (upb, in C); this module does what TF's
fast parser does on top of it: per configured feature, type checks, shape checks, defaults, padding
of variable-length dense features, and the SparseTensor and RaggedTensor layouts. Error texts are
TF's, word for word.

Semantics worth knowing:

- A feature whose ``Feature`` message has no kind set (TF's ``DT_INVALID`` example type) has no
  values: empty for sparse, ragged and variable-length dense features, absent (default or
  "required" error) for fixed-length dense features.
- A dense feature is *variable length* when the first dim of its shape is unknown (the
  ``FixedLenSequenceFeature`` case): rows are padded to the batch's longest with the default value.
- Duplicate keys in the feature map resolve as protobuf maps do (the last one wins).

Thread-safety: pure functions over immutable configs; safe to call from any thread.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from apis.tensorflow.core.example import example_pb2
from runtime import dtypes, errors

_KIND_OF = {dtypes.DT_FLOAT: "float_list", dtypes.DT_INT64: "int64_list", dtypes.DT_STRING: "bytes_list"}
_TYPE_OF_KIND = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}
_NUMPY = {dtypes.DT_FLOAT: np.float32, dtypes.DT_INT64: np.int64, dtypes.DT_STRING: object}
_FAST_BATCH = 2  # smaller batches parse as fast generally


@dataclass(frozen=True)
class DenseSpec:
    key: str
    dtype: int
    shape: tuple  # the per-example shape; shape[0] is None for a variable-length feature
    default: np.ndarray  # empty: the feature is required (fixed length) or pads with zeros

    @functools.cached_property
    def variable_length(self) -> bool:
        return bool(self.shape) and self.shape[0] is None

    @functools.cached_property
    def stride(self) -> int:
        """Values per row: the whole shape (fixed length) or one step of it (variable length)."""
        dims = self.shape[1:] if self.variable_length else self.shape
        return int(np.prod(dims, dtype=np.int64)) if dims else 1


@dataclass(frozen=True)
class SparseSpec:
    key: str
    dtype: int


@dataclass(frozen=True)
class RaggedSpec:
    key: str
    dtype: int
    split_dtype: int


@dataclass(frozen=True)
class Config:
    """What to parse; immutable, so a kernel may build it once and parse many batches with it."""

    dense: tuple[DenseSpec, ...] = ()
    sparse: tuple[SparseSpec, ...] = ()
    ragged: tuple[RaggedSpec, ...] = ()

    @functools.cached_property
    def readers(self) -> list[tuple]:
        """(key, family, index, reader, exact count) per matched key; see ``_slots``. Reading the
        expected list of a Feature whose oneof holds another kind yields an empty list, so a
        non-empty read of the expected kind (of the exact size, for fixed-length dense) settles the
        type and size checks in one C call; anything else takes the checking path."""
        return [
            (key, family, index, operator.attrgetter(f"{kind}.value"), exact)
            for key, (family, index, kind, exact) in _slots(self).items()
        ]

    @functools.cached_property
    def fast_plan(self) -> _Plan | None:
        """The batch fast path's key lookup; None when some spec keeps every batch on the general path."""
        return _plan(self)


def _type_name(dtype: int) -> str:
    return dtypes.name(dtype)


def _shape_text(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _name(names, i: int) -> str:
    if len(names):
        n = names[i]
        return n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n)
    return "<unknown>"


def _error(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


def _parse(serialized: bytes) -> example_pb2.Example:
    try:
        return example_pb2.Example.FromString(serialized)
    except (DecodeError, TypeError):
        shown = serialized.decode("utf-8", "replace") if isinstance(serialized, bytes) else serialized
        raise _error(f"Could not parse example input, value: '{shown}'") from None


def _slots(config: Config) -> dict[str, tuple]:
    """key -> (family, index, expected kind, exact value count or None for any), families 0 dense,
    1 sparse, 2 ragged. A key configured twice is matched by none of its configurations (TF's
    feature map rejects the duplicate): its dense outputs take their defaults and its sparse and
    ragged outputs stay empty."""
    slots: dict[str, tuple] = {}
    duplicates = set()
    for family, specs in enumerate((config.dense, config.sparse, config.ragged)):
        for index, spec in enumerate(specs):
            if spec.key in slots:
                duplicates.add(spec.key)
            exact = None  # any count: sparse, ragged and variable-length dense of stride 1
            if family == 0 and (not spec.variable_length or spec.stride != 1):
                exact = -1 if spec.variable_length else spec.stride  # -1: checked on the slow path
            slots[spec.key] = (family, index, _KIND_OF[spec.dtype], exact)
    for key in duplicates:
        del slots[key]
    return slots


def parse_examples(serialized: list, names: list, config: Config, scalar: bool = False) -> tuple:
    """Parse a batch; returns (sparse_indices, sparse_values, sparse_shapes, dense_values,
    ragged_values, ragged_row_splits), each a list in config order.

    ``scalar``: the input was one Example (rank 0): outputs lose the batch dimension.
    """
    if not scalar and len(serialized) >= _FAST_BATCH:
        parsed = _parse_fast(serialized, config)
        if parsed is not None:
            return parsed
    from_string = example_pb2.Example.FromString
    getters = []
    for data in serialized:
        try:
            getters.append(from_string(data).features.feature.get)  # native; items() is Python-level
        except (DecodeError, TypeError):
            _parse(data)  # raises TF's error
    return parse_features(getters, names, config, scalar)


def parse_features(getters: list, names: list, config: Config, scalar: bool = False) -> tuple:
    """``parse_examples`` over already decoded feature maps, one ``map.get`` per example."""
    batch = len(getters)
    families = (config.dense, config.sparse, config.ragged)
    rows = [[[None] * batch for _ in specs] for specs in families]
    slots = [(key, rows[f][i], read, n, f, i) for key, f, i, read, n in config.readers]
    for i, get in enumerate(getters):
        for key, target, read, exact, family, index in slots:
            feature = get(key)
            if feature is None:
                continue
            values = read(feature)
            count = len(values)
            if count and (exact is None or count == exact):
                target[i] = values
                continue
            kind = feature.WhichOneof("kind")
            spec = families[family][index]
            if family == 0:
                rows[0][index][i] = _dense_values(spec, kind, feature, names, i, scalar)
            else:
                rows[family][index][i] = _list_values(spec, kind, feature, names, i, scalar)
    dense_rows, sparse_rows, ragged_rows = rows
    dense = [_dense_output(spec, rows, names, scalar) for spec, rows in zip(config.dense, dense_rows)]
    sparse = [_sparse_output(spec, rows, scalar) for spec, rows in zip(config.sparse, sparse_rows)]
    ragged = [_ragged_output(spec, rows, scalar) for spec, rows in zip(config.ragged, ragged_rows)]
    return (
        [s[0] for s in sparse],
        [s[1] for s in sparse],
        [s[2] for s in sparse],
        dense,
        [r[0] for r in ragged],
        [r[1] for r in ragged],
    )


_WORD = {dtypes.DT_FLOAT: "float", dtypes.DT_INT64: "int64", dtypes.DT_STRING: "bytes"}


def _where(key: str, names, i: int, scalar: bool) -> str:
    """TF's prefix naming the feature: the example's name and index in a batch, else just the key."""
    return f"Key: {key}.  " if scalar else f"Name: {_name(names, i)}, Key: {key}, Index: {i}.  "


def _dense_values(spec: DenseSpec, kind, feature, names, i: int, scalar: bool):
    """The feature's values, checked against the spec; None when absent (an empty Feature counts
    as absent for fixed-length features, as in TF)."""
    if kind is None:
        return None if not spec.variable_length else ()
    if kind != _KIND_OF[spec.dtype]:
        raise _error(
            f"{_where(spec.key, names, i, scalar)}Data types don't match. Data type: "
            f"{_TYPE_OF_KIND[kind]} but expected type: {_type_name(spec.dtype)}"
        )
    values = getattr(feature, kind).value
    stride = spec.stride
    if spec.variable_length:
        if len(values) % stride:
            raise _error(
                f"{_where(spec.key, names, i, scalar)}Number of {_type_name(spec.dtype)} values is not a "
                f"multiple of stride length. Saw {len(values)} values but output shape is: "
                f"{_shape_text(spec.shape)}"
            )
    elif len(values) != stride:
        where = _where(spec.key, names, i, scalar)
        if scalar:
            raise _error(f"{where}Can't parse serialized Example: Some {kind} slice was not parsed.")
        if len(values) > stride and spec.dtype == dtypes.DT_STRING:
            raise _error(f"{where}Can't parse serialized Example.")
        raise _error(
            f"{where}Number of {_WORD[spec.dtype]} values != expected.  Values size: {len(values)} but "
            f"output shape: {_shape_text(spec.shape)}"
        )
    return values


def _list_values(spec, kind, feature, names, i: int, scalar: bool):
    if kind is None:
        return ()
    if kind != _KIND_OF[spec.dtype]:
        raise _error(
            f"{_where(spec.key, names, i, scalar)}Data types don't match. Expected type: "
            f"{_type_name(spec.dtype)}, Actual type: {_TYPE_OF_KIND[kind]}"
        )
    return getattr(feature, kind).value


def _array(flat: list, dtype: int) -> np.ndarray:
    if dtype == dtypes.DT_STRING:
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out
    return np.array(flat, dtype=_NUMPY[dtype])


def _dense_output(spec: DenseSpec, rows: list, names, scalar: bool) -> np.ndarray:
    if spec.variable_length:
        return _padded_output(spec, rows, scalar)
    if spec.stride == 1 and all(row is not None for row in rows):
        out = _array([row[0] for row in rows], spec.dtype)
        return out.reshape(tuple(spec.shape) if scalar else (len(rows), *spec.shape))
    flat: list = []
    default = None
    for i, row in enumerate(rows):
        if row is None:
            if default is None:
                if spec.default.size == 0:
                    prefix = "" if scalar else f"Name: {_name(names, i)}, "
                    raise _error(
                        f"{prefix}Feature: {spec.key} (data type: {_type_name(spec.dtype)}) is required "
                        "but could not be found."
                    )
                default = spec.default.reshape(-1).tolist()
            flat.extend(default)
        else:
            flat.extend(row)
    out = _array(flat, spec.dtype)
    shape = tuple(spec.shape) if scalar else (len(rows), *spec.shape)
    return out.reshape(shape)


def _padded_output(spec: DenseSpec, rows: list, scalar: bool) -> np.ndarray:
    stride = spec.stride
    lengths = [0 if row is None else len(row) // stride for row in rows]
    longest = max(lengths, default=0)
    inner = tuple(spec.shape[1:])
    numpy_dtype = _NUMPY[spec.dtype]
    out = np.empty((len(rows), longest * stride), dtype=numpy_dtype)
    if spec.default.size:
        out[...] = spec.default.reshape(-1)[0]
    else:
        out[...] = b"" if spec.dtype == dtypes.DT_STRING else 0
    for i, row in enumerate(rows):
        if row:
            out[i, : len(row)] = _array(list(row), spec.dtype)
    shape = (longest, *inner) if scalar else (len(rows), longest, *inner)
    return out.reshape(shape)


def _flatten(rows: list) -> tuple[list, np.ndarray]:
    flat: list = []
    lengths = np.zeros(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        if row:
            flat.extend(row)
            lengths[i] = len(row)
    return flat, lengths


def _sparse_output(spec: SparseSpec, rows: list, scalar: bool) -> tuple:
    flat, lengths = _flatten(rows)
    total = len(flat)
    starts = np.cumsum(lengths) - lengths
    positions = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    longest = int(lengths.max()) if len(rows) else 0
    if scalar:
        return positions.reshape(total, 1), _array(flat, spec.dtype), np.array([longest], np.int64)
    indices = np.empty((total, 2), dtype=np.int64)
    indices[:, 0] = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    indices[:, 1] = positions
    return indices, _array(flat, spec.dtype), np.array([len(rows), longest], np.int64)


def _ragged_output(spec: RaggedSpec, rows: list, scalar: bool) -> tuple:
    flat, lengths = _flatten(rows)
    if scalar:  # one example: the values are the whole (1-D) ragged tensor, with no row splits
        return _array(flat, spec.dtype), np.zeros(0, dtype=_split_numpy(spec.split_dtype))
    splits = np.zeros(len(rows) + 1, dtype=_split_numpy(spec.split_dtype))
    np.cumsum(lengths, out=splits[1:], dtype=splits.dtype)
    return _array(flat, spec.dtype), splits


def _split_numpy(dtype: int):
    return np.int32 if dtype == dtypes.DT_INT32 else np.int64


# --------------------------------------------------------------------------------- batch fast path
#
# Per-feature work in Python costs more than TF's whole parse, so batches of canonically encoded
# Examples (what every protobuf serializer writes: one ``features`` field, map entries of key then
# value, one list per Feature, numeric lists packed) are parsed column-wise instead. upb splits the
# whole batch, concatenated, into map entries in one call (an Example's ``features`` field merges
# by concatenation, so the entries come out in order), numpy reads keys and list headers for all
# entries at once and gathers the values of each kind in one pass. Anything else -- other
# encodings, malformed bytes, every error -- returns None and the batch takes the general path
# above, which owns TF's semantics and error texts; the fast path only ever agrees with it.


@dataclass(frozen=True)
class _Plan:
    """Key lookup for the fast path: configured keys sorted as numpy bytes, with their slots."""

    keys: np.ndarray  # sorted, dtype S<width>
    lengths: np.ndarray  # byte length of each key
    slots: np.ndarray  # slot of each key: its position in dense + sparse + ragged order
    width: int
    specs: tuple  # (family, spec) per slot


def _plan(config: Config) -> _Plan | None:
    specs = [
        (f, spec) for f, group in enumerate((config.dense, config.sparse, config.ragged)) for spec in group
    ]
    if any(spec.dtype not in _KIND_OF or (f == 0 and spec.stride < 1) for f, spec in specs):
        return None
    first_slot = (0, len(config.dense), len(config.dense) + len(config.sparse))
    slot_of = {}
    for key, (family, index, _, _) in _slots(config).items():
        try:
            slot_of[key.encode("utf-8")] = first_slot[family] + index
        except UnicodeEncodeError:  # never an Example's key: those are UTF-8
            continue
    # numpy bytes ignore trailing NULs: keys equal but for those cannot be told apart here.
    if len({key.rstrip(b"\0") for key in slot_of}) != len(slot_of) or any(len(k) > 127 for k in slot_of):
        return None
    order = sorted(slot_of)
    width = max(map(len, order), default=0) or 1
    return _Plan(
        keys=np.array(order or [b""], dtype=f"S{width}"),
        lengths=np.array([len(k) for k in order] or [-1], dtype=np.int64),
        slots=np.array([slot_of[k] for k in order] or [-1], dtype=np.int64),
        width=width,
        specs=tuple(specs),
    )


@functools.cache
def _features_view():
    """``Example`` with its map entries left as bytes: message ExampleView { FeaturesView features = 1; },
    FeaturesView { repeated bytes feature = 1; } (a map is a repeated entry message on the wire)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="example_view.proto", package="example_view")
    T = descriptor_pb2.FieldDescriptorProto
    file.message_type.add(name="FeaturesView").field.add(
        name="feature", number=1, type=T.TYPE_BYTES, label=T.LABEL_REPEATED
    )
    file.message_type.add(name="ExampleView").field.add(
        name="features",
        number=1,
        type=T.TYPE_MESSAGE,
        label=T.LABEL_OPTIONAL,
        type_name=".example_view.FeaturesView",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("example_view.ExampleView"))


class _Irregular(Exception):
    """The batch is not in the fast path's canonical encoding (or is invalid): parse it generally."""


def _require(condition) -> None:
    if not np.all(condition):
        raise _Irregular


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
    return 1 + (value >= 1 << 7) + (value >= 1 << 14) + (value >= 1 << 21) + (value >= 1 << 28)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the ranges [start, start + length), concatenated."""
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def _entries(serialized: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(buffer, example index, start, end) of every map entry of every Example, in order; ``buffer``
    is the batch concatenated, zero-padded so that reads past any end (a key's length at most) stay inside."""
    try:
        joined = b"".join(serialized)
        entries = _features_view().FromString(joined).features.feature
    except (DecodeError, TypeError):
        raise _Irregular from None
    batch = len(serialized)
    buf = np.frombuffer(joined + bytes(256), dtype=np.uint8)
    sizes = np.fromiter(map(len, serialized), np.int64, batch)
    starts = np.cumsum(sizes) - sizes
    # Each non-empty Example is exactly one ``features`` field: tag, length, payload.
    present = sizes > 0
    _require(buf[starts[present]] == 0x0A)
    payload, header = _varints(buf, starts[present] + 1)
    _require(1 + header + payload == sizes[present])
    payload_sizes = np.zeros(batch, dtype=np.int64)
    payload_sizes[present] = payload
    payload_starts = starts.copy()
    payload_starts[present] += 1 + header
    lengths = np.fromiter(map(len, entries), np.int64, len(entries))
    # The entries, each tag (one byte), length and data, must tile each Example's payload.
    encoded = 1 + _varint_size(lengths) + lengths
    counts = _tiled(np.cumsum(encoded), payload_sizes)
    example = np.repeat(np.arange(batch), counts)
    offsets = np.cumsum(encoded) - encoded  # in the payloads' concatenation
    data = (
        offsets + (payload_starts - (np.cumsum(payload_sizes) - payload_sizes))[example] + encoded - lengths
    )
    return buf, example, data, data + lengths


def _match(buf: np.ndarray, data: np.ndarray, plan: _Plan) -> np.ndarray:
    """Slot of each entry's key (-1: not configured); the key field must come first."""
    _require(buf[data] == 0x0A)
    lengths = buf[data + 1].astype(np.int64)
    _require(lengths < 128)
    columns = np.arange(plan.width)
    window = buf[(data + 2)[:, None] + columns]
    window[columns >= lengths[:, None]] = 0
    keys = window.view(plan.keys.dtype).reshape(-1)
    at = np.minimum(np.searchsorted(plan.keys, keys), len(plan.keys) - 1)
    found = (plan.keys[at] == keys) & (plan.lengths[at] == lengths)
    slots = np.where(found, plan.slots[at], -1)
    unmatched = np.flatnonzero(~found)
    if len(unmatched):  # proto3 map keys must be UTF-8: ASCII passes, anything else goes generally
        _require(buf[_ranges(data[unmatched] + 2, lengths[unmatched])] < 0x80)
    return slots, data + 2 + lengths


def _lists(buf: np.ndarray, value: np.ndarray, end: np.ndarray) -> tuple:
    """Per entry from its value field on: kind (0 none, 1 bytes, 2 float, 3 int64) and the list's
    payload [start, end) -- for numeric kinds the packed values' bytes."""
    _require(buf[value] == 0x12)
    size, header = _varints(buf, value + 1)
    feature = value + 1 + header
    _require(feature + size == end)
    kind = np.zeros(len(value), dtype=np.int64)
    start = end.copy()
    has = np.flatnonzero(size > 0)
    tag = buf[feature[has]].astype(np.int64)
    _require((tag == 0x0A) | (tag == 0x12) | (tag == 0x1A))
    kind[has] = tag >> 3
    size, header = _varints(buf, feature[has] + 1)
    start[has] = feature[has] + 1 + header
    _require(start[has] + size == end[has])
    packed = has[(kind[has] > 1) & (size > 0)]
    _require(buf[start[packed]] == 0x0A)
    size, header = _varints(buf, start[packed] + 1)
    start[packed] += 1 + header
    _require(start[packed] + size == end[packed])
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
    _require(total == (int(item_ends[-1]) if len(item_ends) else 0))
    filled = bounds[sizes > 0]
    at = np.minimum(np.searchsorted(item_ends, filled), max(len(item_ends) - 1, 0))
    _require(item_ends[at] == filled)
    return np.searchsorted(item_ends, bounds, side="right") - np.searchsorted(
        item_ends, bounds - sizes, side="right"
    )


def _parse_fast(serialized: list, config: Config) -> tuple | None:
    """``parse_examples`` of a batch (not a scalar) in the canonical encoding; None otherwise."""
    plan = config.fast_plan
    if plan is None:
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
            columns[code], count[mine] = decode(buf, start[mine], end[mine])
            first[mine] = np.cumsum(count[mine]) - count[mine]
        return _outputs(len(serialized), plan, example, slots, kind, count, first, columns)
    except _Irregular:
        return None


_CODE = {dtypes.DT_STRING: 1, dtypes.DT_FLOAT: 2, dtypes.DT_INT64: 3}


def _outputs(batch, plan, example, slots, kind, count, first, columns) -> tuple:
    matched = np.flatnonzero(slots >= 0)
    cells = slots[matched] * batch + example[matched]
    entry_of = np.full(len(plan.specs) * batch, -1, dtype=np.int64)
    entry_of[cells] = matched
    _require(entry_of[cells] == matched)  # a key twice in one Example: the last wins, generally
    groups = ([], [], [])
    for slot, (family, spec) in enumerate(plan.specs):
        entries = entry_of[slot * batch : (slot + 1) * batch]
        code = _CODE[spec.dtype]
        kinds = kind[entries]
        _require((kinds == 0) | (kinds == code))  # the general path words the type error
        counts, firsts, flat = count[entries], first[entries], columns[code]
        if family == 0:
            groups[0].append(_fast_dense(spec, batch, kinds == code, counts, firsts, flat))
        elif family == 1:
            groups[1].append(_fast_sparse(spec, batch, counts, firsts, flat))
        else:
            groups[2].append(_fast_ragged(spec, batch, counts, firsts, flat))
    sparse, ragged = groups[1], groups[2]
    return (
        [s[0] for s in sparse],
        [s[1] for s in sparse],
        [s[2] for s in sparse],
        groups[0],
        [r[0] for r in ragged],
        [r[1] for r in ragged],
    )


def _fast_dense(spec: DenseSpec, batch: int, present, counts, firsts, flat) -> np.ndarray:
    stride = spec.stride
    if spec.variable_length:
        _require(counts % stride == 0)
        width = int(counts.max()) if batch else 0
        out = np.empty((batch, width), dtype=_NUMPY[spec.dtype])
        if spec.default.size:
            out[...] = spec.default.reshape(-1)[0]
        else:
            out[...] = b"" if spec.dtype == dtypes.DT_STRING else 0
        out.reshape(-1)[_ranges(np.arange(batch) * width, counts)] = flat[_ranges(firsts, counts)]
        return out.reshape(batch, width // stride, *spec.shape[1:])
    _require(counts[present] == stride)
    at = firsts[:, None] + np.arange(stride) if stride > 1 else firsts
    if present.all():
        out = flat[at]
    else:
        _require(spec.default.size)  # required: the general path words the error
        out = np.empty((batch, stride) if stride > 1 else batch, dtype=_NUMPY[spec.dtype])
        out[present] = flat[at[present]]
        out[~present] = spec.default.reshape(-1) if stride > 1 else spec.default.reshape(-1)[0]
    return out.reshape(batch, *spec.shape)


def _fast_sparse(spec: SparseSpec, batch: int, counts, firsts, flat) -> tuple:
    total = int(counts.sum())
    indices = np.empty((total, 2), dtype=np.int64)
    indices[:, 0] = np.repeat(np.arange(batch, dtype=np.int64), counts)
    indices[:, 1] = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    longest = int(counts.max()) if batch else 0
    return indices, flat[_ranges(firsts, counts)], np.array([batch, longest], np.int64)


def _fast_ragged(spec: RaggedSpec, batch: int, counts, firsts, flat) -> tuple:
    splits = np.zeros(batch + 1, dtype=_split_numpy(spec.split_dtype))
    np.cumsum(counts, out=splits[1:], dtype=splits.dtype)
    return flat[_ranges(firsts, counts)], splits


# --------------------------------------------------------------------------------- SequenceExample


@dataclass(frozen=True)
class FeatureListDenseSpec:
    key: str
    dtype: int
    shape: tuple  # per step
    missing_assumed_empty: bool

    @functools.cached_property
    def stride(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass(frozen=True)
class SequenceConfig:
    dense: tuple[FeatureListDenseSpec, ...] = ()
    sparse: tuple[SparseSpec, ...] = ()
    ragged: tuple[RaggedSpec, ...] = ()


def _parse_sequence(serialized: bytes) -> example_pb2.SequenceExample:
    try:
        return example_pb2.SequenceExample.FromString(serialized)
    except (DecodeError, TypeError):
        shown = serialized.decode("utf-8", "replace") if isinstance(serialized, bytes) else serialized
        raise _error(f"Could not parse example input, value: '{shown}'") from None


def parse_sequence_examples(
    serialized: list, names: list, context: Config, lists: SequenceConfig, scalar: bool = False
) -> tuple:
    """Parse a batch of ``SequenceExample``; returns the context's six output groups (as
    ``parse_examples``) followed by the feature lists' sparse indices, values, shapes, dense values,
    dense lengths, ragged values, outer splits and inner splits (each a list in config order)."""
    for spec in lists.ragged:
        if any(s.key == spec.key for s in lists.sparse):
            raise _error(f"Sequence feature {spec.key} cannot be both ragged and sparse")
    parsed = [_parse_sequence(data) for data in serialized]
    context_out = parse_features([p.context.feature.get for p in parsed], names, context, scalar)
    lists_of = [p.feature_lists.feature_list.get for p in parsed]
    dense = [_feature_list_dense(spec, lists_of, names, scalar) for spec in lists.dense]
    sparse = [_feature_list_sparse(spec, lists_of, names, scalar) for spec in lists.sparse]
    ragged = [_feature_list_ragged(spec, lists_of, names, scalar) for spec in lists.ragged]
    return (
        *context_out,
        [s[0] for s in sparse],
        [s[1] for s in sparse],
        [s[2] for s in sparse],
        [d[0] for d in dense],
        [d[1] for d in dense],
        [r[0] for r in ragged],
        [r[1] for r in ragged],
        [r[2] for r in ragged],
    )


def _steps(spec, lists_of: list, names, scalar: bool) -> list[list]:
    """Per example, per step, the step's values (type-checked); None for a missing feature list."""
    out = []
    for i, get in enumerate(lists_of):
        feature_list = get(spec.key)
        if feature_list is None:
            out.append(None)
            continue
        steps = []
        expected = _KIND_OF[spec.dtype]
        for t, feature in enumerate(feature_list.feature):
            kind = feature.WhichOneof("kind")
            if kind is None:
                steps.append(())
                continue
            if kind != expected:
                prefix = "" if scalar else f"Name: {_name(names, i)}, "
                raise _error(
                    f"{prefix}Feature list: {spec.key}, Index: {t}.  Data types don't match. Expected type: "
                    f"{_type_name(spec.dtype)}"
                )
            steps.append(getattr(feature, kind).value)
        out.append(steps)
    return out


def _feature_list_dense(spec: FeatureListDenseSpec, lists_of: list, names, scalar: bool) -> tuple:
    per_example = _steps(spec, lists_of, names, scalar)
    for i, steps in enumerate(per_example):
        if steps is None and not spec.missing_assumed_empty:
            prefix = "" if scalar else f"Name: {_name(names, i)}, "
            raise _error(
                f"{prefix}Feature list '{spec.key}' is required but could not be found.  Did you mean to "
                "include it in feature_list_dense_missing_assumed_empty or feature_list_dense_defaults?"
            )
        for t, step in enumerate(steps or ()):
            if len(step) != spec.stride:
                where = (
                    f"Key: {spec.key}.  "
                    if scalar
                    else f"Name: {_name(names, i)}, Key: {spec.key}, Index: {t}.  "
                )
                raise _error(
                    f"{where}Number of values != expected.  values size: {len(step)} but output shape: "
                    f"{_shape_text(spec.shape)}"
                )
    lengths = np.array([len(s) if s else 0 for s in per_example], dtype=np.int64)
    longest = int(lengths.max()) if len(lengths) else 0
    out = np.empty((len(per_example), longest * spec.stride), dtype=_NUMPY[spec.dtype])
    out[...] = b"" if spec.dtype == dtypes.DT_STRING else 0
    for i, steps in enumerate(per_example):
        if steps:
            flat = [v for step in steps for v in step]
            out[i, : len(flat)] = _array(flat, spec.dtype)
    shape = (longest, *spec.shape) if scalar else (len(per_example), longest, *spec.shape)
    return out.reshape(shape), (lengths.reshape(()) if scalar else lengths)


def _feature_list_sparse(spec: SparseSpec, lists_of: list, names, scalar: bool) -> tuple:
    per_example = _steps(spec, lists_of, names, scalar)
    indices, flat = [], []
    max_steps = max_values = 0
    for i, steps in enumerate(per_example):
        for t, step in enumerate(steps or ()):
            for j, value in enumerate(step):
                indices.append((i, t, j) if not scalar else (t, j))
                flat.append(value)
            max_values = max(max_values, len(step))
        max_steps = max(max_steps, len(steps or ()))
    rank = 2 if scalar else 3
    shape = [max_steps, max_values] if scalar else [len(per_example), max_steps, max_values]
    return (
        np.array(indices, dtype=np.int64).reshape(-1, rank),
        _array(flat, spec.dtype),
        np.array(shape, dtype=np.int64),
    )


def _feature_list_ragged(spec: RaggedSpec, lists_of: list, names, scalar: bool) -> tuple:
    per_example = _steps(spec, lists_of, names, scalar)
    split = _split_numpy(spec.split_dtype)
    flat, inner, outer = [], [0], [0]
    for steps in per_example:
        for step in steps or ():
            flat.extend(step)
            inner.append(len(flat))
        outer.append(len(inner) - 1)
    # One SequenceExample: TF returns a scalar it never writes (its value is whatever memory held).
    outer_splits = np.zeros((), dtype=split) if scalar else np.array(outer, dtype=split)
    return _array(flat, spec.dtype), outer_splits, np.array(inner, dtype=split)
