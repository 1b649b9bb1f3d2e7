"""Parsing ops: ``tf.train.Example`` batches (the Classify/Regress hot path), raw bytes and numbers.

The Example wire parsing and TF's per-feature semantics live in ``runtime/example_parser.py``; the
kernels here only turn each op's inputs and attrs into its ``Config`` and lay out its outputs.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes, errors
from runtime.example_parser import Config, DenseSpec, RaggedSpec, SparseSpec, parse_examples
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
    config = Config(
        dense=_dense_specs(_strings(dense_keys), list(dense_defaults), list(Tdense), list(dense_shapes)),
        sparse=tuple(SparseSpec(k, t) for k, t in zip(_strings(sparse_keys), sparse_types)),
        ragged=tuple(
            RaggedSpec(k, t, s)
            for k, t, s in zip(_strings(ragged_keys), ragged_value_types, ragged_split_types)
        ),
    )
    return tuple(x for group in parse_examples(batch, names, config, scalar) for x in group)


@kernel("ParseExample")
def parse_example(
    serialized, names, sparse_keys, dense_keys, dense_defaults, *, Nsparse=0, Ndense=0, sparse_types,
    Tdense=(), dense_shapes
):  # fmt: skip
    batch, names, scalar = _batch(serialized, names)
    if scalar:
        raise errors.InvalidArgumentError(None, None, "Expected serialized to be a vector, got shape: []")
    config = Config(
        dense=_dense_specs(
            [_strings(k)[0] for k in dense_keys], list(dense_defaults), list(Tdense), list(dense_shapes)
        ),
        sparse=tuple(SparseSpec(_strings(k)[0], t) for k, t in zip(sparse_keys, sparse_types)),
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
