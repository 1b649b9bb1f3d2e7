"""What the converters know of shape-valued tensors, so that shapes need not be computed per run.

Graphs compute shapes from other tensors' shapes: feature columns write ``reshape(x,
[tf.shape(x)[0], -1])``, Keras' ``Dense`` on a 3-D input ``reshape(x, [prod(shape(x)[:2]),
prod(shape(x)[2:])])`` and back, ``tf.zeros([tf.shape(x)[0], units])``. Converted as written,
each such shape is a chain of small ONNX nodes (Shape, Cast, Slice or Gather, Squeeze, Unsqueeze,
ReduceProd, Concat, Cast) run on every request. Instead the converters of ``Shape``,
``StridedSlice``, ``GatherV2``, ``Pack``, ``ConcatV2`` and ``Prod`` record what each entry of a
shape value is (``Builder.dim_lists``; a scalar's in ``Builder.dims``): a number, or the product
of dimensions ``start:end`` of an ONNX value, written ``(value, start, end)``. Readers of shapes
then ask here for the cheapest form:

- ``reshape_form``: a Reshape of ``x`` by its own dimensions, as ONNX ``Flatten`` or as a constant
  shape whose 0s copy ``x``'s dimensions (``allowzero=0``);
- ``as_int64``: any other shape, rebuilt from ``Shape(value, start, end)`` slices, products and
  constants (two or three nodes).

The chain the graph wrote is converted too, but nothing reads it then: ``convert_subgraph``
prunes it. Shapes here are of ONNX values inside one converted model, so they hold for every run.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from runtime.onnx.converter import Builder

Entry = "tuple[str, int, int] | int"


def record_shape(b: Builder, out: str, x: str) -> None:
    """``out`` is ``Shape(x)``."""
    rank = b.rank(x)
    if rank is not None:
        x = _earliest(b, x)
        b.dim_lists[out] = tuple((x, axis, axis + 1) for axis in range(rank))


def record_same_shape(b: Builder, out: str, x: str) -> None:
    """``out`` has ``x``'s shape (an identity ``Transpose``, as Keras' tensordot writes one)."""
    b.same_shape[out] = _earliest(b, x)


def _earliest(b: Builder, x: str) -> str:
    while x in b.same_shape:
        x = b.same_shape[x]
    return x


def record_pick(b: Builder, out: str, shape: str, indices, scalar: bool) -> None:
    """``out`` is ``shape[indices]`` (constant indices; ``scalar``: one index, shrunk)."""
    entries = b.dim_lists.get(shape)
    if entries is None:
        return
    picked = []
    for index in np.asarray(indices).reshape(-1).tolist():
        if not -len(entries) <= index < len(entries):
            return
        picked.append(entries[index])
    if scalar and len(picked) == 1:
        if isinstance(picked[0], tuple):
            b.dims[out] = picked[0]
    elif not scalar:
        b.dim_lists[out] = tuple(picked)


def record_pack(b: Builder, out: str, scalars: list[str]) -> None:
    """``out`` is the 1-D ``Pack`` of scalars: known dimensions or numbers."""
    entries = [b.dims.get(x) or _number(b, x) for x in scalars]
    if None not in entries:
        b.dim_lists[out] = tuple(entries)


def record_concat(b: Builder, out: str, vectors: list[str]) -> None:
    """``out`` is the ``ConcatV2`` of 1-D shape values or constants along axis 0."""
    entries: list = []
    for x in vectors:
        known = b.dim_lists.get(x)
        if known is None:
            const = b.values[x].const
            if const is None or const.ndim != 1 or const.dtype.kind not in "iu":
                return
            known = tuple(int(v) for v in const)
        entries.extend(known)
    b.dim_lists[out] = tuple(entries)


def record_product(b: Builder, out: str, shape: str) -> None:
    """``out`` is the product of all of ``shape``'s entries: consecutive dimensions of one value."""
    entries = b.dim_lists.get(shape)
    if not entries or not all(isinstance(e, tuple) and e[0] == entries[0][0] for e in entries):
        return
    if all(a[2] == b_[1] for a, b_ in zip(entries, entries[1:])):
        b.dims[out] = (entries[0][0], entries[0][1], entries[-1][2])


def reshape_form(b: Builder, x: str, shape: str) -> tuple[str, object] | None:
    """("flatten", axis) or ("shape", constant list) for ``Reshape(x, shape)``, or None."""
    entries = b.dim_lists.get(shape)
    if entries is None or not any(isinstance(e, tuple) for e in entries):
        return None
    rank, x = b.rank(x), _earliest(b, x)
    if rank is not None and len(entries) == 2 and all(isinstance(e, tuple) and e[0] == x for e in entries):
        (_, s0, e0), (_, s1, e1) = entries
        if s0 == 0 and e0 == s1 and e1 == rank:
            return "flatten", s1
    own = [0 if e == (x, j, j + 1) else e for j, e in enumerate(entries)]
    if any(isinstance(e, tuple) for e in own) or own.count(-1) > 1 or 0 in entries:
        return None
    return "shape", own


def as_int64(b: Builder, name: str) -> str:
    """A shape-valued input as int64, rebuilt from what is known of it (module docstring)."""
    entries = b.dim_lists.get(name)
    if entries is None or not any(isinstance(e, tuple) for e in entries):
        return b.cast(name, TensorProto.INT64)
    parts, run = [], []  # run: consecutive single dimensions of one value, or numbers
    for entry in [*entries, None]:
        if run and (entry is None or not _continues(run[-1], entry)):
            parts.append(_materialize(b, run))
            run = []
        if entry is not None:
            run.append(entry)
    return parts[0] if len(parts) == 1 else b.op("Concat", parts, axis=0, rank=1)


def _continues(last, entry) -> bool:
    if isinstance(last, int) or isinstance(entry, int):
        return isinstance(last, int) and isinstance(entry, int)
    single = last[2] - last[1] == 1 and entry[2] - entry[1] == 1
    return single and entry[0] == last[0] and entry[1] == last[2]


def _materialize(b: Builder, run: list) -> str:
    if isinstance(run[0], int):
        return b.int64s(run, "dims")
    value, start, end = run[0][0], run[0][1], run[-1][2]
    dims = b.op("Shape", [value], start=start, end=end, rank=1, elem_type=TensorProto.INT64)
    if len(run) == 1 and end - start > 1:  # one entry, the product of several dimensions
        return b.op("ReduceProd", [dims], keepdims=1, rank=1)
    return dims


def _number(b: Builder, name: str) -> int | None:
    const = b.values[name].const
    return int(const) if const is not None and const.ndim == 0 and const.dtype.kind in "iu" else None
