"""Parsing ops: ``tf.train.Example`` batches (the Classify/Regress hot path), raw bytes and numbers.

The Example wire parsing and TF's per-feature semantics live in ``runtime/example_parser.py`` (its
batch fast path in ``runtime/example_fast_path.py``, the specs in ``runtime/example_specs.py``); the
kernels here only turn each op's inputs and attrs into its ``Config`` and lay out its outputs.
"""

from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError

from apis.tensorflow.core.framework import tensor_pb2
from runtime import dtypes, errors, tensor_util
from runtime.example_parser import (
    FeatureListDenseSpec,
    SequenceConfig,
    parse_examples,
    parse_sequence_examples,
)
from runtime.example_specs import Config, DenseSpec, RaggedSpec, SparseSpec
from runtime.kernels.registry import kernel


def _strings(value) -> list[str]:
    flat = np.asarray(value, dtype=object).reshape(-1).tolist()
    return [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for v in flat]


def _dense_specs(keys: list[str], defaults: list, types: list[int], shapes: list) -> tuple[DenseSpec, ...]:
    if not (len(keys) == len(defaults) == len(types) == len(shapes)):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"len(dense_keys) != len(dense_defaults): {len(keys)} vs. {len(defaults)}",
        )
    specs = []
    for key, default, dtype, shape in zip(keys, defaults, types, shapes):
        shape = tuple(shape or ())
        spec = DenseSpec(key, dtype, shape, np.asarray(default))
        if spec.variable_length and spec.default.size != 1:
            d = len(specs)
            dims = "[" + ",".join(str(n) for n in spec.default.shape) + "]"
            shape_text = "[" + ",".join("?" if n is None else str(n) for n in shape) + "]"
            raise errors.InvalidArgumentError(
                None,
                None,
                f"dense_shape[{d}] is a variable length shape: {shape_text}, therefore def_value[{d}] must "
                f"contain a single element (the padding element).  But its shape is: {dims}",
            )
        if not spec.variable_length and spec.default.size not in (0, spec.stride):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"dense_defaults[{len(specs)}].shape() == {list(spec.default.shape)} != "
                f"dense_shapes[{len(specs)}] == {list(shape)}",
            )
        specs.append(spec)
    return tuple(specs)


def _batch(serialized, names) -> tuple[list, list, bool]:
    serialized = np.asarray(serialized, dtype=object)
    if serialized.ndim > 1:
        raise errors.InvalidArgumentError(
            None, None, f"Expected serialized to be a scalar or vector, got shape: {list(serialized.shape)}"
        )
    names = np.asarray(names, dtype=object).reshape(-1).tolist()
    if names and len(names) != serialized.size:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected len(names) == len(serialized), but got: {len(names)} vs. {serialized.size}",
        )
    return serialized.reshape(-1).tolist(), names, serialized.ndim == 0


@kernel("ParseExampleV2")
def parse_example_v2(
    serialized,
    names,
    sparse_keys,
    dense_keys,
    ragged_keys,
    dense_defaults,
    *,
    Tdense=(),
    num_sparse,
    sparse_types,
    ragged_value_types,
    ragged_split_types,
    dense_shapes,
):
    """Outputs: sparse indices, values, shapes (num_sparse each), dense values, ragged values, splits."""
    batch, names, scalar = _batch(serialized, names)
    dense_defaults = list(dense_defaults)
    key = (  # keys as their raw bytes: decoded only when the Config is built
        "ParseExampleV2",
        tuple(np.asarray(sparse_keys, dtype=object).reshape(-1).tolist()),
        tuple(np.asarray(dense_keys, dtype=object).reshape(-1).tolist()),
        tuple(np.asarray(ragged_keys, dtype=object).reshape(-1).tolist()),
        tuple(Tdense),
        tuple(sparse_types),
        tuple(ragged_value_types),
        tuple(ragged_split_types),
        tuple(tuple(s) if s is not None else None for s in dense_shapes),
        tuple(_content(d) for d in dense_defaults),
    )
    config = _cached_config(
        key,
        lambda: Config(
            dense=_dense_specs(_strings(dense_keys), dense_defaults, list(Tdense), list(dense_shapes)),
            sparse=tuple(SparseSpec(k, t) for k, t in zip(_strings(sparse_keys), sparse_types)),
            ragged=tuple(
                RaggedSpec(k, t, s)
                for k, t, s in zip(_strings(ragged_keys), ragged_value_types, ragged_split_types)
            ),
        ),
    )
    return tuple(x for group in parse_examples(batch, names, config, scalar) for x in group)


# Configs by their inputs' contents and attrs: a served graph parses with the same keys and defaults
# on every request, and building a Config costs as much as parsing one Example.
_CONFIGS: dict[tuple, Config] = {}
_MAX_CONFIGS = 64


def _cached_config(key: tuple, build) -> Config:
    config = _CONFIGS.get(key)
    if config is None:
        config = build()
        if len(_CONFIGS) >= _MAX_CONFIGS:
            _CONFIGS.clear()
        _CONFIGS[key] = config
    return config


def _content(value) -> tuple:
    array = np.asarray(value)
    data = tuple(array.reshape(-1).tolist()) if array.dtype == object else array.tobytes()
    return array.dtype.str, array.shape, data


@kernel("ParseExample")
def parse_example(
    serialized, names, sparse_keys, dense_keys, dense_defaults, *, Nsparse=0, Ndense=0, sparse_types,
    Tdense=(), dense_shapes
):  # fmt: skip
    batch, names, scalar = _batch(serialized, names)
    if scalar:
        raise errors.InvalidArgumentError(None, None, "Expected serialized to be a vector, got shape: []")
    dense = tuple(_strings(k)[0] for k in dense_keys)
    sparse = tuple(_strings(k)[0] for k in sparse_keys)
    key = (
        "ParseExample",
        dense,
        sparse,
        tuple(Tdense),
        tuple(sparse_types),
        tuple(tuple(s) if s is not None else None for s in dense_shapes),
        tuple(_content(d) for d in dense_defaults),
    )
    config = _cached_config(
        key,
        lambda: Config(
            dense=_dense_specs(list(dense), list(dense_defaults), list(Tdense), list(dense_shapes)),
            sparse=tuple(SparseSpec(k, t) for k, t in zip(sparse, sparse_types)),
        ),
    )
    groups = parse_examples(batch, names, config, False)
    return tuple(x for group in groups[:4] for x in group)


@kernel("ParseSingleExample")
def parse_single_example(
    serialized, dense_defaults, *, num_sparse=0, sparse_keys=(), dense_keys=(), sparse_types=(), Tdense=(),
    dense_shapes=()
):  # fmt: skip
    value = np.asarray(serialized, dtype=object)
    if value.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"Expected serialized to be a scalar, got shape: {list(value.shape)}"
        )
    config = Config(
        dense=_dense_specs(list(dense_keys), list(dense_defaults), list(Tdense), list(dense_shapes)),
        sparse=tuple(SparseSpec(k, t) for k, t in zip(sparse_keys, sparse_types)),
    )
    groups = parse_examples([value.item()], [], config, True)
    return tuple(x for group in groups[:4] for x in group)


@kernel("ParseSequenceExampleV2")
def parse_sequence_example_v2(
    serialized, debug_name, context_sparse_keys, context_dense_keys, context_ragged_keys,
    feature_list_sparse_keys, feature_list_dense_keys, feature_list_ragged_keys,
    feature_list_dense_missing_assumed_empty, context_dense_defaults, *, Ncontext_sparse=0, Tcontext_dense=(),
    context_sparse_types=(), context_ragged_value_types=(), context_ragged_split_types=(),
    context_dense_shapes=(), Nfeature_list_sparse=0, Nfeature_list_dense=0, feature_list_dense_types=(),
    feature_list_sparse_types=(), feature_list_ragged_value_types=(), feature_list_ragged_split_types=(),
    feature_list_dense_shapes=()
):  # fmt: skip
    """Context as ParseExampleV2; feature lists as sparse, padded dense (+ lengths) and ragged."""
    batch, names, scalar = _batch(serialized, debug_name)
    context = Config(
        dense=_dense_specs(
            _strings(context_dense_keys), list(context_dense_defaults), list(Tcontext_dense),
            list(context_dense_shapes),
        ),
        sparse=tuple(SparseSpec(k, t) for k, t in zip(_strings(context_sparse_keys), context_sparse_types)),
        ragged=tuple(
            RaggedSpec(k, t, s)
            for k, t, s in zip(_strings(context_ragged_keys), context_ragged_value_types, context_ragged_split_types)
        ),
    )  # fmt: skip
    assumed_empty = set(_strings(feature_list_dense_missing_assumed_empty))
    if np.asarray(feature_list_dense_missing_assumed_empty).dtype == np.bool_:
        flags = np.asarray(feature_list_dense_missing_assumed_empty).reshape(-1).tolist()
        keys = _strings(feature_list_dense_keys)
        assumed_empty = {k for k, flag in zip(keys, flags) if flag}
    lists = SequenceConfig(
        dense=tuple(
            FeatureListDenseSpec(k, t, tuple(s or ()), k in assumed_empty)
            for k, t, s in zip(
                _strings(feature_list_dense_keys), feature_list_dense_types, feature_list_dense_shapes
            )
        ),
        sparse=tuple(
            SparseSpec(k, t) for k, t in zip(_strings(feature_list_sparse_keys), feature_list_sparse_types)
        ),
        ragged=tuple(
            RaggedSpec(k, t, s)
            for k, t, s in zip(
                _strings(feature_list_ragged_keys),
                feature_list_ragged_value_types,
                feature_list_ragged_split_types,
            )
        ),
    )
    groups = parse_sequence_examples(batch, names, context, lists, scalar)
    return tuple(x for group in groups for x in group)


def _sequence_configs(
    context_sparse_keys, context_sparse_types, context_dense_keys, context_dense_defaults, Tcontext_dense,
    context_dense_shapes, feature_list_sparse_keys, feature_list_sparse_types, feature_list_dense_keys,
    feature_list_dense_types, feature_list_dense_shapes, assumed_empty
) -> tuple[Config, SequenceConfig]:  # fmt: skip
    context = Config(
        dense=_dense_specs(
            list(context_dense_keys),
            list(context_dense_defaults),
            list(Tcontext_dense),
            list(context_dense_shapes),
        ),
        sparse=tuple(SparseSpec(k, t) for k, t in zip(context_sparse_keys, context_sparse_types)),
    )
    lists = SequenceConfig(
        dense=tuple(
            FeatureListDenseSpec(k, t, tuple(s or ()), k in assumed_empty)
            for k, t, s in zip(feature_list_dense_keys, feature_list_dense_types, feature_list_dense_shapes)
        ),
        sparse=tuple(SparseSpec(k, t) for k, t in zip(feature_list_sparse_keys, feature_list_sparse_types)),
    )
    return context, lists


@kernel("ParseSequenceExample")
def parse_sequence_example(
    serialized, debug_name, context_dense_defaults, *, feature_list_dense_missing_assumed_empty=(),
    context_sparse_keys=(), context_dense_keys=(), feature_list_sparse_keys=(), feature_list_dense_keys=(),
    context_sparse_types=(), Tcontext_dense=(), feature_list_dense_types=(), context_dense_shapes=(),
    feature_list_sparse_types=(), feature_list_dense_shapes=()
):  # fmt: skip
    """The V1 op: keys are attrs; no ragged outputs."""
    batch, names, scalar = _batch(serialized, debug_name)
    context, lists = _sequence_configs(
        context_sparse_keys, context_sparse_types, context_dense_keys, context_dense_defaults, Tcontext_dense,
        context_dense_shapes, feature_list_sparse_keys, feature_list_sparse_types, feature_list_dense_keys,
        feature_list_dense_types, feature_list_dense_shapes, set(feature_list_dense_missing_assumed_empty),
    )  # fmt: skip
    groups = parse_sequence_examples(batch, names, context, lists, scalar)
    return tuple(x for group in (*groups[:4], *groups[6:11]) for x in group)


@kernel("ParseSingleSequenceExample")
def parse_single_sequence_example(
    serialized, feature_list_dense_missing_assumed_empty, context_sparse_keys, context_dense_keys,
    feature_list_sparse_keys, feature_list_dense_keys, context_dense_defaults, debug_name, *,
    context_sparse_types=(), Tcontext_dense=(), feature_list_dense_types=(), context_dense_shapes=(),
    feature_list_sparse_types=(), feature_list_dense_shapes=()
):  # fmt: skip
    """One SequenceExample, keys as scalar-string list inputs; no lengths, no ragged outputs."""
    value = np.asarray(serialized, dtype=object)
    if value.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"Expected serialized to be a scalar, got shape: {list(value.shape)}"
        )
    keys = [[_strings(k)[0] for k in group] for group in (
        context_sparse_keys, context_dense_keys, feature_list_sparse_keys, feature_list_dense_keys
    )]  # fmt: skip
    context, lists = _sequence_configs(
        keys[0], context_sparse_types, keys[1], context_dense_defaults, Tcontext_dense, context_dense_shapes,
        keys[2], feature_list_sparse_types, keys[3], feature_list_dense_types, feature_list_dense_shapes,
        set(_strings(feature_list_dense_missing_assumed_empty)),
    )  # fmt: skip
    groups = parse_sequence_examples([value.item()], [], context, lists, True)
    return tuple(x for group in (*groups[:4], *groups[6:10]) for x in group)


_DECODE_RAW = {
    dtypes.DT_HALF: "<f2",
    dtypes.DT_FLOAT: "<f4",
    dtypes.DT_DOUBLE: "<f8",
    dtypes.DT_INT8: "i1",
    dtypes.DT_UINT8: "u1",
    dtypes.DT_INT16: "<i2",
    dtypes.DT_UINT16: "<u2",
    dtypes.DT_INT32: "<i4",
    dtypes.DT_UINT32: "<u4",
    dtypes.DT_INT64: "<i8",
    dtypes.DT_UINT64: "<u8",
    dtypes.DT_BOOL: "?",
    dtypes.DT_COMPLEX64: "<c8",
    dtypes.DT_COMPLEX128: "<c16",
    dtypes.DT_BFLOAT16: "<u2",
}


@kernel("DecodeRaw")
def decode_raw(bytes_, *, out_type, little_endian=True):
    """Each string reinterpreted as a vector of ``out_type``; all must have the same length."""
    flat = np.asarray(bytes_, dtype=object).reshape(-1).tolist()
    code = _DECODE_RAW[out_type]
    item = np.dtype(code).itemsize
    lengths = {len(b) for b in flat}
    width = lengths.pop() if len(lengths) == 1 else 0
    if len(lengths) > 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"DecodeRaw requires input strings to all be the same size, but element {_first_other(flat)} "
            f"has size {len(flat[0])} != {len(flat[_first_other(flat)])}",
        )
    if width % item:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Input to DecodeRaw has length {width} that is not a multiple of {item}, the size of "
            f"{dtypes.name(out_type)}",
        )
    order = "<" if little_endian else ">"
    numpy_code = code if code[0] not in "<" else order + code[1:]
    shape = np.shape(bytes_) + (width // item,)
    out = np.frombuffer(b"".join(flat), dtype=numpy_code).reshape(shape)
    if out_type == dtypes.DT_BFLOAT16:
        return out.astype("<u2").view(dtypes.as_numpy_dtype(out_type))
    return out.astype(np.dtype(code).newbyteorder("="))


def _first_other(flat: list) -> int:
    return next(i for i, b in enumerate(flat) if len(b) != len(flat[0]))


@kernel("StringToNumber")
def string_to_number(string_tensor, *, out_type=dtypes.DT_FLOAT):
    strings = np.asarray(string_tensor, dtype=object)
    numpy_dtype = dtypes.as_numpy_dtype(out_type)
    out = np.empty(strings.shape, dtype=numpy_dtype)
    flat = out.reshape(-1)
    with np.errstate(over="ignore"):  # "1e40" as float is inf, as strtof makes it
        for i, raw in enumerate(strings.reshape(-1).tolist()):
            flat[i] = _to_number(raw, out_type, numpy_dtype)
    return out


def _to_number(raw: bytes, out_type: int, numpy_dtype):
    text = raw.decode("utf-8", "replace")
    fail = errors.InvalidArgumentError(
        None, None, f"StringToNumberOp could not correctly convert string: {text}"
    )
    stripped = text.strip()
    if out_type in (dtypes.DT_FLOAT, dtypes.DT_DOUBLE):
        lowered = stripped.lower()
        if lowered in ("inf", "+inf", "infinity", "+infinity", "-inf", "-infinity", "nan", "+nan", "-nan"):
            return float(lowered.replace("infinity", "inf"))
        try:
            if not stripped or "_" in stripped:
                raise ValueError
            if lowered.lstrip("+-").startswith("0x"):
                return float.fromhex(stripped)
            value = float(stripped)
        except ValueError:
            raise fail from None
        return value
    try:
        if not stripped or "_" in stripped or not stripped.lstrip("+-").isdigit():
            raise ValueError
        value = int(stripped)
    except ValueError:
        raise fail from None
    info = np.iinfo(numpy_dtype)
    if not info.min <= value <= info.max:
        raise fail
    return value


@kernel("ParseTensor")
def parse_tensor(serialized, *, out_type):
    """A serialized TensorProto back to its tensor; its dtype must be ``out_type``."""
    proto = tensor_pb2.TensorProto()
    try:
        proto.ParseFromString(np.asarray(serialized, dtype=object).item())
    except DecodeError:
        raise errors.InvalidArgumentError(
            None, None, "Could not parse `serialized` as TensorProto, base64: ..."
        ) from None
    if proto.dtype != out_type:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Type mismatch between parsed tensor ({dtypes.name(proto.dtype)}) and dtype "
            f"({dtypes.name(out_type)})",
        )
    return tensor_util.make_ndarray(proto)


# --------------------------------------------------------------------------------- CSV


@kernel("DecodeCSV")
def decode_csv(records, record_defaults, *, OUT_TYPE, field_delim=",", use_quote_delim=True, na_value="",
               select_cols=()):  # fmt: skip
    """One output per column: RFC 4180 fields (quotes optional), empty or ``na_value`` -> default."""
    rows = np.asarray(records, dtype=object)
    delim = field_delim.encode() if isinstance(field_delim, str) else field_delim
    na = na_value.encode() if isinstance(na_value, str) else na_value
    columns = [[] for _ in record_defaults]
    wanted = list(select_cols) or list(range(len(record_defaults)))
    for r, record in enumerate(rows.reshape(-1).tolist()):
        fields = _csv_fields(record, delim, use_quote_delim, r)
        if select_cols:
            if len(fields) <= wanted[-1]:
                raise errors.InvalidArgumentError(
                    None, None, f"Expect {len(wanted)} fields but have {len(fields)} in record {r}"
                )
            fields = [fields[c] for c in wanted]
        elif len(fields) != len(record_defaults):
            raise errors.InvalidArgumentError(
                None, None, f"Expect {len(record_defaults)} fields but have {len(fields)} in record {r}"
            )
        for f, (text, default, dtype) in enumerate(zip(fields, record_defaults, OUT_TYPE)):
            columns[f].append(_csv_value(text, np.asarray(default), dtype, na, f, r))
    out = []
    for values, dtype in zip(columns, OUT_TYPE):
        array = np.empty(len(values), dtype=dtypes.as_numpy_dtype(dtype))
        array[:] = values
        out.append(array.reshape(rows.shape))
    return tuple(out)


def _csv_fields(record: bytes, delim: bytes, quotes: bool, r: int) -> list[bytes]:
    fields, i, n = [], 0, len(record)
    while True:
        if quotes and i < n and record[i : i + 1] == b'"':
            value, i = bytearray(), i + 1
            while True:
                if i >= n:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Quoted field has to end with quote followed by delim or end of record {r}",
                    )
                if record[i : i + 1] == b'"':
                    if record[i + 1 : i + 2] == b'"':
                        value += b'"'
                        i += 2
                        continue
                    i += 1
                    break
                value += record[i : i + 1]
                i += 1
            if i < n and record[i : i + 1] != delim:
                raise errors.InvalidArgumentError(
                    None, None, f"Quote inside a string has to be escaped by another quote in record {r}"
                )
            fields.append(bytes(value))
        else:
            end = record.find(delim, i)
            end = n if end < 0 else end
            field = record[i:end]
            if quotes and b'"' in field:
                raise errors.InvalidArgumentError(
                    None, None, f"Unquoted fields cannot have quotes inside in record {r}"
                )
            fields.append(field)
            i = end
        if i >= n:
            return fields
        i += len(delim)
        if i >= n:
            fields.append(b"")
            return fields


def _csv_value(text: bytes, default: np.ndarray, dtype: int, na: bytes, f: int, r: int):
    if not text or text == na:
        if default.size == 0:
            raise errors.InvalidArgumentError(None, None, f"Field {f} is required but missing in record {r}!")
        return default.reshape(-1)[0]
    if dtype == dtypes.DT_STRING:
        return text
    name = dtypes.name(dtype)
    try:
        if dtype in (dtypes.DT_FLOAT, dtypes.DT_DOUBLE):
            return float(text)
        value = int(text)
        info = np.iinfo(dtypes.as_numpy_dtype(dtype))
        if not info.min <= value <= info.max:
            raise ValueError
        return value
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Field {f} in record {r} is not a valid {name}: {text.decode('utf-8', 'replace')}"
        ) from None
