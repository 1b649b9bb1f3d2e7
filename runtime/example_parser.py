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
    dense: tuple[DenseSpec, ...] = ()
    sparse: tuple[SparseSpec, ...] = ()
    ragged: tuple[RaggedSpec, ...] = ()


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
    batch = len(serialized)
    by_key = _slots(config)
    families = (config.dense, config.sparse, config.ragged)
    rows = [[[None] * batch for _ in specs] for specs in families]
    from_string = example_pb2.Example.FromString
    # Reading the expected list of a Feature whose oneof holds another kind yields an empty list, so
    # a non-empty read of the expected kind (of the exact size, for fixed-length dense) settles
    # type and size checks in one C call; anything else takes the checking path.
    slots = [
        (key, rows[f][i], operator.attrgetter(f"{kind}.value"), n, f, i)
        for key, (f, i, kind, n) in by_key.items()
    ]
    for i, data in enumerate(serialized):
        try:
            get = from_string(data).features.feature.get  # native; items() would be Python-level
        except (DecodeError, TypeError):
            _parse(data)  # raises TF's error
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
