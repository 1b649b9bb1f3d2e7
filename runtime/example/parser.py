"""Batch parsing of serialized ``tf.train.Example`` protos, as TF's ``example_proto_fast_parsing.cc``.

The wire format is decoded by the generated ``Example`` class (upb, in C); this module does what TF's
fast parser does on top of it: per configured feature, type checks, shape checks, defaults, padding
of variable-length dense features, and the SparseTensor and RaggedTensor layouts. Error texts are
TF's, word for word. Large batches are first offered to ``runtime/example/fast_path.py``, which
parses canonically encoded ones column-wise and hands every other batch back to this general path;
what to parse is a ``Config`` of ``runtime/example/specs.py``.

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
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from apis.tensorflow.core.example import example_pb2
from runtime import dtypes, errors
from runtime.example import fast_path as example_fast_path
from runtime.example.specs import KIND_OF, NUMPY, Config, DenseSpec, RaggedSpec, SparseSpec, split_numpy

_TYPE_OF_KIND = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}
# The batch fast path costs about as much as the general path's parse of 480 (Example, feature)
# pairs before it parses anything (20 features: batches from 24 Examples on take it).
_FAST_CELLS = 480
# Up to this many sparse values, indices are laid out in Python lists, beyond in numpy (measured:
# the list costs about 0.2 us a value, numpy about 5 us in all).
_FEW_VALUES = 16


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
    features = len(config.dense) + len(config.sparse) + len(config.ragged)
    if not scalar and len(serialized) * features >= _FAST_CELLS:
        parsed = example_fast_path.parse_fast(serialized, config)
        if parsed is not None:
            return parsed
    from_string = example_pb2.Example.FromString
    try:  # map.get is native; items() is Python-level
        getters = [from_string(data).features.feature.get for data in serialized]
    except (DecodeError, TypeError):
        for data in serialized:
            _parse(data)  # raises TF's error for the first that does not parse
        raise
    return parse_features(getters, names, config, scalar)


def parse_features(getters: list, names: list, config: Config, scalar: bool = False) -> tuple:
    """``parse_examples`` over already decoded feature maps, one ``map.get`` per example."""
    rows = _rows_by_column(getters, config)
    if rows is None:
        rows = _rows_by_example(getters, names, config, scalar)
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


def _rows_by_column(getters: list, config: Config) -> list | None:
    """Each spec's list per example, read key by key in C-level passes; None unless every example
    has every key, non-empty, of its kind (and exact length for fixed-length dense): reading a
    Feature's list of another kind gives an empty list, so that one check is the type check too."""
    batch = len(getters)
    rows = [[[None] * batch for _ in specs] for specs in (config.dense, config.sparse, config.ragged)]
    for key, family, index, read, exact in config.readers:
        try:  # an example without the key gives None, which has no list
            values = list(map(read, [get(key) for get in getters]))
        except AttributeError:
            return None
        counts = list(map(len, values))
        if 0 in counts or (exact is not None and counts.count(exact) != len(counts)):
            return None
        rows[family][index] = values
    return rows


def _rows_by_example(getters: list, names: list, config: Config, scalar: bool) -> list:
    """Each spec's list (or None) per example, example by example, with TF's checks and errors."""
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
    return rows


_WORD = {dtypes.DT_FLOAT: "float", dtypes.DT_INT64: "int64", dtypes.DT_STRING: "bytes"}


def _where(key: str, names, i: int, scalar: bool) -> str:
    """TF's prefix naming the feature: the example's name and index in a batch, else just the key."""
    return f"Key: {key}.  " if scalar else f"Name: {_name(names, i)}, Key: {key}, Index: {i}.  "


def _dense_values(spec: DenseSpec, kind, feature, names, i: int, scalar: bool):
    """The feature's values, checked against the spec; None when absent (an empty Feature counts
    as absent for fixed-length features, as in TF)."""
    if kind is None:
        return None if not spec.variable_length else ()
    if kind != KIND_OF[spec.dtype]:
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
    if kind != KIND_OF[spec.dtype]:
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
    return np.array(flat, dtype=NUMPY[dtype])


def _dense_output(spec: DenseSpec, rows: list, names, scalar: bool) -> np.ndarray:
    if spec.variable_length:
        return _padded_output(spec, rows, scalar)
    if spec.stride == 1:
        default = spec.default.reshape(-1).tolist()[0] if spec.default.size else None
        try:  # absent rows (None) take the default, or fail (TypeError) with TF's error below
            firsts = (
                [default if row is None else row[0] for row in rows]
                if default is not None
                else [row[0] for row in rows]
            )
        except TypeError:
            pass
        else:
            return _array(firsts, spec.dtype).reshape(
                tuple(spec.shape) if scalar else (len(rows), *spec.shape)
            )
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
            flat += row[:]
    out = _array(flat, spec.dtype)
    shape = tuple(spec.shape) if scalar else (len(rows), *spec.shape)
    return out.reshape(shape)


def _padded_output(spec: DenseSpec, rows: list, scalar: bool) -> np.ndarray:
    stride = spec.stride
    lengths = [0 if row is None else len(row) // stride for row in rows]
    longest = max(lengths, default=0)
    inner = tuple(spec.shape[1:])
    numpy_dtype = NUMPY[spec.dtype]
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


def _flatten(rows: list) -> tuple[list, list]:
    """Every row's values in one list (``row[:]``: a protobuf repeated field copies out in one C
    call, several times faster than iterating it), and the rows' lengths."""
    try:
        lengths = list(map(len, rows))
    except TypeError:  # an absent row (None)
        lengths = None
    if lengths is not None and lengths.count(1) == len(rows):  # one value per row: the common case
        return [row[0] for row in rows], lengths
    flat: list = []
    lengths = []
    for row in rows:
        if row:
            flat += row[:]
            lengths.append(len(row))
        else:
            lengths.append(0)
    return flat, lengths


def _sparse_output(spec: SparseSpec, rows: list, scalar: bool) -> tuple:
    flat, lengths = _flatten(rows)
    total = len(flat)
    longest = max(lengths, default=0)
    values = _array(flat, spec.dtype)
    if scalar:
        return np.arange(total, dtype=np.int64).reshape(total, 1), values, np.array([longest], np.int64)
    if total <= _FEW_VALUES:  # (row, position) pairs in a Python list: numpy's fixed costs dominate
        pairs: list = []
        for i, count in enumerate(lengths):
            pairs += (i, 0) if count == 1 else [x for j in range(count) for x in (i, j)]
        indices = np.array(pairs, dtype=np.int64).reshape(total, 2)
    elif longest == 1 and total == len(rows):  # one value per row: rows 0.., positions 0
        indices = np.zeros((total, 2), dtype=np.int64)
        indices[:, 0] = np.arange(total, dtype=np.int64)
    else:  # rows sorted: a value's position is its index less its row's first index
        indices = np.empty((total, 2), dtype=np.int64)
        indices[:, 0] = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
        np.subtract(
            np.arange(total, dtype=np.int64), np.searchsorted(indices[:, 0], indices[:, 0]), out=indices[:, 1]
        )
    return indices, values, np.array([len(rows), longest], np.int64)


def _ragged_output(spec: RaggedSpec, rows: list, scalar: bool) -> tuple:
    flat, lengths = _flatten(rows)
    if scalar:  # one example: the values are the whole (1-D) ragged tensor, with no row splits
        return _array(flat, spec.dtype), np.zeros(0, dtype=split_numpy(spec.split_dtype))
    splits = np.zeros(len(rows) + 1, dtype=split_numpy(spec.split_dtype))
    np.cumsum(lengths, out=splits[1:], dtype=splits.dtype)
    return _array(flat, spec.dtype), splits


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
        expected = KIND_OF[spec.dtype]
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
    out = np.empty((len(per_example), longest * spec.stride), dtype=NUMPY[spec.dtype])
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
    split = split_numpy(spec.split_dtype)
    flat, inner, outer = [], [0], [0]
    for steps in per_example:
        for step in steps or ():
            flat.extend(step)
            inner.append(len(flat))
        outer.append(len(inner) - 1)
    # One SequenceExample: TF returns a scalar it never writes (its value is whatever memory held).
    outer_splits = np.zeros((), dtype=split) if scalar else np.array(outer, dtype=split)
    return _array(flat, spec.dtype), outer_splits, np.array(inner, dtype=split)
