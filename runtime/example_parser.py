"""Batch parsing of serialized ``tf.train.Example`` protos, as TF's ``example_proto_fast_parsing.cc``.

The wire format is decoded by the generated ``Example`` class (upb, in C); this module does what TF's
fast parser does on top of it: per configured feature, type checks, shape checks, defaults, padding
of variable-length dense features, and the SparseTensor and RaggedTensor layouts. Error texts are
TF's, word for word.

Semantics worth knowing:

- A feature whose ``Feature`` message has no kind set counts as present with no values (TF's
  ``DT_INVALID`` example type): empty for sparse, ragged and variable-length dense features, a
  size mismatch for fixed-length dense features.
- A dense feature is *variable length* when the first dim of its shape is unknown (the
  ``FixedLenSequenceFeature`` case): rows are padded to the batch's longest with the default value.
- Duplicate keys in the feature map resolve as protobuf maps do (the last one wins).

Thread-safety: pure functions over immutable configs; safe to call from any thread.
"""

from __future__ import annotations

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

    @property
    def variable_length(self) -> bool:
        return bool(self.shape) and self.shape[0] is None

    @property
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


def parse_examples(serialized: list, names: list, config: Config, scalar: bool = False) -> tuple:
    """Parse a batch; returns (sparse_indices, sparse_values, sparse_shapes, dense_values,
    ragged_values, ragged_row_splits), each a list in config order.

    ``scalar``: the input was one Example (rank 0): outputs lose the batch dimension.
    """
    batch = len(serialized)
    by_key: dict[str, list[tuple[int, int]]] = {}  # key -> [(family, index)]: 0 dense, 1 sparse, 2 ragged
    for family, specs in enumerate((config.dense, config.sparse, config.ragged)):
        for index, spec in enumerate(specs):
            by_key.setdefault(spec.key, []).append((family, index))
    families = (config.dense, config.sparse, config.ragged)
    rows = [[[None] * batch for _ in specs] for specs in families]
    for i, data in enumerate(serialized):
        for key, feature in _parse(data).features.feature.items():
            slots = by_key.get(key)
            if slots is None:
                continue
            kind = feature.WhichOneof("kind")
            for family, index in slots:
                spec = families[family][index]
                if family == 0:
                    rows[0][index][i] = _dense_values(spec, kind, feature, names, i)
                else:
                    rows[family][index][i] = _list_values(spec, kind, feature, names, i)
    dense_rows, sparse_rows, ragged_rows = rows
    dense = [_dense_output(spec, rows, names, scalar) for spec, rows in zip(config.dense, dense_rows)]
    sparse = [_sparse_output(spec, rows, scalar) for spec, rows in zip(config.sparse, sparse_rows)]
    ragged = [_ragged_output(spec, rows) for spec, rows in zip(config.ragged, ragged_rows)]
    return (
        [s[0] for s in sparse],
        [s[1] for s in sparse],
        [s[2] for s in sparse],
        dense,
        [r[0] for r in ragged],
        [r[1] for r in ragged],
    )


def _mismatch_dense(spec: DenseSpec, kind: str, names, i: int) -> errors.InvalidArgumentError:
    return _error(
        f"Name: {_name(names, i)}, Key: {spec.key}, Index: {i}.  Data types don't match. Data type: "
        f"{_TYPE_OF_KIND[kind]} but expected type: {_type_name(spec.dtype)}"
    )


def _dense_values(spec: DenseSpec, kind, feature, names, i: int):
    if kind is None:
        values = ()
    elif kind != _KIND_OF[spec.dtype]:
        raise _mismatch_dense(spec, kind, names, i)
    else:
        values = getattr(feature, kind).value
    stride = spec.stride
    if spec.variable_length:
        if len(values) % stride:
            raise _error(
                f"Name: {_name(names, i)}, Key: {spec.key}, Index: {i}.  Number of "
                f"{_type_name(spec.dtype)} values is not a multiple of stride length. Saw "
                f"{len(values)} values but output shape is: {_shape_text(spec.shape)}"
            )
    elif len(values) != stride:
        raise _error(
            f"Name: {_name(names, i)}, Key: {spec.key}, Index: {i}.  Number of "
            f"{_type_name(spec.dtype)} values != expected.  Values size: {len(values)} but output "
            f"shape: {_shape_text(spec.shape)}"
        )
    return values


def _list_values(spec, kind, feature, names, i: int):
    if kind is None:
        return ()
    if kind != _KIND_OF[spec.dtype]:
        raise _error(
            f"Name: {_name(names, i)}, Key: {spec.key}, Index: {i}.  Data types don't match. Expected "
            f"type: {_type_name(spec.dtype)}, Actual type: {_TYPE_OF_KIND[kind]}"
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
    flat: list = []
    default = None
    for i, row in enumerate(rows):
        if row is None:
            if default is None:
                if spec.default.size == 0:
                    raise _error(
                        f"Name: {_name(names, i)}, Feature: {spec.key} (data type: "
                        f"{_type_name(spec.dtype)}) is required but could not be found."
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


def _ragged_output(spec: RaggedSpec, rows: list) -> tuple:
    flat, lengths = _flatten(rows)
    splits = np.zeros(len(rows) + 1, dtype=_split_numpy(spec.split_dtype))
    np.cumsum(lengths, out=splits[1:], dtype=splits.dtype)
    return _array(flat, spec.dtype), splits


def _split_numpy(dtype: int):
    return np.int32 if dtype == dtypes.DT_INT32 else np.int64
