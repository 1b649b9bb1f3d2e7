"""Decoding ops, TF's parsing ops other than Examples: DecodeRaw, StringToNumber, ParseTensor and
DecodeCSV, each turning strings into numbers or tensors with TF's error texts.

Split out of ``parsing_ops.py`` to keep modules small; image codecs live in ``image_decode_ops.py``.
"""

from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError

from apis.tensorflow.core.framework import tensor_pb2
from runtime import dtypes, errors, tensor_util
from runtime.kernels.registry import kernel

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
