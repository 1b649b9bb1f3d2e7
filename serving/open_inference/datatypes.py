"""V2 datatypes against TF dtypes, and a V2 tensor's elements in each of the protocol's forms.

Every TF dtype that V2 names maps one to one (DT_STRING is BYTES); the rest (complex,
quantized, resource, variant) have no V2 datatype, and a tensor of one is INVALID_ARGUMENT.
The forms: raw bytes (gRPC ``raw_*_contents`` and HTTP's binary extension: elements row-major,
little-endian; a BYTES element is a 4-byte little-endian length and its bytes), the typed
``InferTensorContents`` field of a datatype, and JSON ``data`` (flat or nested, row-major).
Every read checks the element count against the shape before it allocates, so a request
claims no more memory than it sends.
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np

from apis.tensorflow.core.framework import types_pb2
from runtime import dtypes, errors

# V2 datatype -> TF dtype (numpy's is runtime.dtypes')
_TABLE: dict[str, int] = {
    "BOOL": dtypes.DT_BOOL,
    "UINT8": dtypes.DT_UINT8,
    "UINT16": dtypes.DT_UINT16,
    "UINT32": dtypes.DT_UINT32,
    "UINT64": dtypes.DT_UINT64,
    "INT8": dtypes.DT_INT8,
    "INT16": dtypes.DT_INT16,
    "INT32": dtypes.DT_INT32,
    "INT64": dtypes.DT_INT64,
    "FP16": dtypes.DT_HALF,
    "FP32": dtypes.DT_FLOAT,
    "FP64": dtypes.DT_DOUBLE,
    "BF16": dtypes.DT_BFLOAT16,
    "BYTES": dtypes.DT_STRING,
}
_BY_TF = {tf: name for name, tf in _TABLE.items()}

# V2 datatype -> its InferTensorContents field (FP16 and BF16: raw only)
CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
_MAX_DIMS = 64


def tf_dtype(datatype: str) -> int:
    """The TF dtype of a V2 datatype; INVALID_ARGUMENT for a name V2 does not have."""
    dtype = _TABLE.get(datatype)
    if dtype is None:
        raise errors.InvalidArgumentError(None, None, f"invalid datatype '{datatype}'")
    return dtype


def numpy_dtype(datatype: str) -> np.dtype:
    return dtypes.as_numpy_dtype(tf_dtype(datatype))


def datatype_of(dtype: int) -> str:
    """The V2 datatype of a TF dtype; INVALID_ARGUMENT for one V2 has none for."""
    name = _BY_TF.get(dtypes.base_dtype(dtype))
    if name is None:
        raise errors.InvalidArgumentError(
            None, None, f"{_tf_name(dtype)} has no Open Inference Protocol datatype"
        )
    return name


def metadata_datatype(dtype: int) -> str:
    """``datatype_of`` for metadata, which never fails: TF's own name where V2 has none."""
    return _BY_TF.get(dtypes.base_dtype(dtype)) or _tf_name(dtype)


def _tf_name(dtype: int) -> str:
    """TF's enum name (DT_COMPLEX64), what a SignatureDef says."""
    try:
        return types_pb2.DataType.Name(dtype)
    except ValueError:
        return f"DataType {dtype}"


def element_count(shape, name: str) -> int:
    """The element count of a request's shape; INVALID_ARGUMENT for a negative dim, too many."""
    shape = tuple(shape)
    if len(shape) > _MAX_DIMS or any(type(d) is not int or d < 0 for d in shape):
        raise errors.InvalidArgumentError(None, None, f"input '{name}' has an invalid shape {list(shape)}")
    return math.prod(shape)


# ---------------------------------------------------------------------------------------------
# raw bytes


def from_raw(data: bytes, datatype: str, shape, name: str) -> np.ndarray:
    """A tensor from its raw bytes (read-only, a view where it can be)."""
    n = element_count(shape, name)
    np_dtype = numpy_dtype(datatype)
    if datatype == "BYTES":
        return _strings_from_raw(data, n, name).reshape(shape)
    expected = n * np_dtype.itemsize
    if len(data) != expected:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"input '{name}' of datatype {datatype} and shape {list(shape)} needs {expected} bytes, "
            f"got {len(data)}",
        )
    return (
        np.frombuffer(data, np_dtype.newbyteorder("<") if np_dtype.itemsize > 1 else np_dtype)
        .astype(np_dtype, copy=False)
        .reshape(shape)
    )


def raw_content(data: bytes, datatype: str, shape: tuple, name: str) -> bytes | None:
    """``data`` itself where it is the ``tensor_content`` of the tensor it claims to be (a numeric
    datatype, on a little-endian host, of the size the shape says: checked as ``from_raw``
    checks it); None for BYTES and big-endian hosts, which ``from_raw`` reads."""
    if datatype == "BYTES" or not RAW_IS_CONTENT:
        return None
    expected = None
    if all(type(d) is int for d in shape):  # (a cache keyed by True or 1.0 would take them for 1)
        try:
            expected = raw_size(datatype, shape)
        except errors.InvalidArgumentError:  # not kept: raised again below, with the input's name
            pass
    if len(data) != expected:
        from_raw(data, datatype, shape, name)  # raises what is wrong
    return data


@functools.lru_cache(maxsize=1024)  # (datatype, shape) pairs: a few per model and batch size
def raw_size(datatype: str, shape: tuple) -> int:
    """The bytes of a numeric tensor's raw data (shape: ints; INVALID_ARGUMENT for a bad one)."""
    return element_count(shape, "") * numpy_dtype(datatype).itemsize


RAW_IS_CONTENT = sys.byteorder == "little"  # raw data (little-endian) is a tensor_content as it is


def _strings_from_raw(data: bytes, n: int, name: str) -> np.ndarray:
    if 4 * n > len(data):  # each element costs at least its length: nothing is made for a claim
        raise errors.InvalidArgumentError(
            None, None, f"input '{name}': BYTES data holds fewer than {n} elements"
        )
    out = np.empty(n, object)
    view = memoryview(data)
    at, end = 0, len(data)
    for i in range(n):
        if at + 4 > end:
            raise errors.InvalidArgumentError(
                None, None, f"input '{name}': BYTES data holds fewer than {n} elements"
            )
        length = int.from_bytes(view[at : at + 4], "little")
        at += 4
        if at + length > end:
            raise errors.InvalidArgumentError(
                None, None, f"input '{name}': BYTES element {i} runs past the data"
            )
        out[i] = bytes(view[at : at + length])
        at += length
    if at != end:
        raise errors.InvalidArgumentError(
            None, None, f"input '{name}': BYTES data holds more than {n} elements"
        )
    return out


def to_raw(array: np.ndarray, datatype: str) -> bytes:
    """A tensor's raw bytes (BYTES elements are bytes, as ``PredictOutputs.arrays`` gives them)."""
    if datatype == "BYTES":
        return b"".join(len(item).to_bytes(4, "little") + item for item in array.reshape(-1).tolist())
    little = _LITTLE_DTYPES.get(datatype)
    if little is None:
        np_dtype = numpy_dtype(datatype)  # an unknown name raises here
        little = np_dtype.newbyteorder("<") if np_dtype.itemsize > 1 else np_dtype
    return np.ascontiguousarray(array, little).tobytes()


# numeric datatype -> its little-endian numpy dtype (what raw contents hold)
_LITTLE_DTYPES = {
    name: (d.newbyteorder("<") if d.itemsize > 1 else d)
    for name, d in ((name, dtypes.as_numpy_dtype(tf)) for name, tf in _TABLE.items() if name != "BYTES")
}


# ---------------------------------------------------------------------------------------------
# InferTensorContents


def from_contents(contents, datatype: str, shape, name: str) -> np.ndarray:
    """A tensor from its typed ``InferTensorContents`` field."""
    n = element_count(shape, name)
    field = CONTENTS_FIELD.get(datatype)
    if field is None:
        numpy_dtype(datatype)  # an unknown name
        raise errors.InvalidArgumentError(
            None, None, f"input '{name}': {datatype} data must be sent in raw_input_contents"
        )
    values = getattr(contents, field)
    if len(values) != n:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"input '{name}' of shape {list(shape)} needs {n} elements in {field}, got {len(values)}",
        )
    if datatype == "BYTES":
        out = np.empty(n, object)
        out[:] = list(values)
        return out.reshape(shape)
    np_dtype = numpy_dtype(datatype)
    wide = np.array(values, dtype=_WIDE.get(datatype, np_dtype))
    if wide.dtype != np_dtype:
        info = np.iinfo(np_dtype)
        if n and (wide.min() < info.min or wide.max() > info.max):
            raise errors.InvalidArgumentError(
                None, None, f"input '{name}': a value is out of range for {datatype}"
            )
        wide = wide.astype(np_dtype)
    return wide.reshape(shape)


_WIDE = {"INT8": np.int64, "INT16": np.int64, "UINT8": np.uint64, "UINT16": np.uint64}


def fill_contents(contents, array: np.ndarray, datatype: str) -> None:
    """``array``'s elements into ``contents``' field for ``datatype`` (not FP16, BF16)."""
    getattr(contents, CONTENTS_FIELD[datatype]).extend(array.reshape(-1).tolist())


# ---------------------------------------------------------------------------------------------
# JSON


def from_json(data, datatype: str, shape, name: str) -> np.ndarray:
    """A tensor from JSON ``data``: flat or nested lists, row-major; BYTES elements are strings
    (UTF-8). Booleans only for BOOL, numbers for the rest."""
    n = element_count(shape, name)
    np_dtype = numpy_dtype(datatype)
    flat = _flatten(data, n, name)
    if len(flat) != n:
        raise errors.InvalidArgumentError(
            None, None, f"input '{name}' of shape {list(shape)} needs {n} elements, got {len(flat)}"
        )
    if datatype == "BYTES":
        out = np.empty(n, object)
        try:
            out[:] = [v.encode() if type(v) is str else _not_a(v, "string", name) for v in flat]
        except UnicodeEncodeError:
            raise errors.InvalidArgumentError(None, None, f"input '{name}': a string is not UTF-8") from None
        return out.reshape(shape)
    if datatype == "BOOL":
        if any(type(v) is not bool for v in flat):
            raise errors.InvalidArgumentError(None, None, f"input '{name}': BOOL data must be true or false")
        return np.array(flat, np.bool_).reshape(shape)
    if any(type(v) not in (int, float) for v in flat):
        raise errors.InvalidArgumentError(None, None, f"input '{name}': {datatype} data must be numbers")
    try:
        if np_dtype.kind in "iu":
            if any(type(v) is float for v in flat):
                raise errors.InvalidArgumentError(
                    None, None, f"input '{name}': {datatype} data must be integers"
                )
            wide = np.array(flat, np.int64 if np_dtype.kind == "i" else np.uint64)
            if n and (wide.min() < np.iinfo(np_dtype).min or wide.max() > np.iinfo(np_dtype).max):
                raise OverflowError
            return wide.astype(np_dtype).reshape(shape)
        with np.errstate(over="ignore"):  # a number past the type's range is its infinity, as in C
            return np.array(flat, np_dtype).reshape(shape)
    except OverflowError:
        raise errors.InvalidArgumentError(
            None, None, f"input '{name}': a value is out of range for {datatype}"
        ) from None


def _not_a(value, kind: str, name: str):
    raise errors.InvalidArgumentError(None, None, f"input '{name}': BYTES data must be {kind}s")


def _flatten(data, n: int, name: str) -> list:
    """The leaves of nested lists, row-major; stops once past ``n`` (nothing is built beyond)."""
    if type(data) is not list:
        raise errors.InvalidArgumentError(None, None, f"input '{name}': 'data' must be an array")
    if all(type(v) is not list for v in data):
        return data
    out: list = []
    stack = [iter(data)]
    while stack:
        for value in stack[-1]:
            if type(value) is list:
                if len(stack) > _MAX_DIMS:
                    raise errors.InvalidArgumentError(
                        None, None, f"input '{name}': 'data' is nested too deep"
                    )
                stack.append(iter(value))
                break
            out.append(value)
            if len(out) > n:
                return out
        else:
            stack.pop()
    return out


def to_json(array: np.ndarray, datatype: str) -> list:
    """A tensor's elements as JSON's flat ``data`` (BYTES as UTF-8 text, undecodable bytes
    replaced)."""
    flat = array.reshape(-1)
    if datatype == "BYTES":
        return [v.decode("utf-8", "replace") for v in flat.tolist()]
    if datatype in ("FP16", "BF16"):
        flat = flat.astype(np.float32)
    return flat.tolist()
