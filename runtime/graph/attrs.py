"""``AttrValue`` -> Python, decoded once per node when a plan is built.

| AttrValue    | Python                                                           |
|--------------|------------------------------------------------------------------|
| s            | str (utf-8; bytes when not valid utf-8)                          |
| i, f, b      | int, float, bool                                                 |
| type         | int ``DataType``                                                 |
| shape        | tuple (None for an unknown dim), or None for an unknown rank     |
| tensor       | numpy array (``tensor_util.make_ndarray``)                       |
| func         | ``FuncAttr(name, attrs)`` with attrs decoded                     |
| list         | list of decoded items                                            |
| placeholder  | ``AttrPlaceholder(name)``: substituted when a function is made   |

Decoded values are immutable or fresh per call; decoding never touches the NodeDef.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.tensorflow.core.framework import attr_value_pb2
from runtime import tensor_util


@dataclass(frozen=True)
class FuncAttr:
    """A decoded ``NameAttrList``: a function name and its (decoded) attrs."""

    name: str
    attrs: Mapping[str, object] = field(default_factory=dict)
    proto: attr_value_pb2.NameAttrList | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class AttrPlaceholder:
    """An attr of a function body naming one of the function's own attrs."""

    name: str


def _text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def decode_func(proto: attr_value_pb2.NameAttrList) -> FuncAttr:
    return FuncAttr(proto.name, decode_attrs(proto.attr), proto)


def _list(value: attr_value_pb2.AttrValue.ListValue) -> list:
    if value.s:
        return [_text(s) for s in value.s]
    if value.i:
        return list(value.i)
    if value.f:
        return list(value.f)
    if value.b:
        return list(value.b)
    if value.type:
        return list(value.type)
    if value.shape:
        return [tensor_util.shape_from_proto(s) for s in value.shape]
    if value.tensor:
        return [tensor_util.make_ndarray(t) for t in value.tensor]
    if value.func:
        return [decode_func(f) for f in value.func]
    return []


_DECODERS = {
    "s": _text,
    "i": int,
    "f": float,
    "b": bool,
    "type": int,
    "shape": tensor_util.shape_from_proto,
    "tensor": tensor_util.make_ndarray,
    "func": decode_func,
    "list": _list,
    "placeholder": AttrPlaceholder,
}


def decode(value: attr_value_pb2.AttrValue):
    """One AttrValue as Python (see the module's table); None when no value is set."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    return _DECODERS[kind](getattr(value, kind))


def decode_attrs(attrs: Mapping[str, attr_value_pb2.AttrValue]) -> dict[str, object]:
    """A NodeDef's (or NameAttrList's) attr map, decoded."""
    return {name: decode(value) for name, value in attrs.items()}
