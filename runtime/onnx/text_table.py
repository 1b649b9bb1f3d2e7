"""Strings from a constant table, gathered in onnxruntime without strings in onnxruntime.

TF1 exports label their predictions with ``GatherV2(table, ArgMax(scores))``. onnxruntime holds
strings as text and hands them to Python as ``str``, one object per element, which the cluster
would then encode back to TF's bytes. Instead, the model gathers the *positions* of the table
(``Gather(arange(n), indices)``, whose CPU kernel checks the end of the range as TF's does) and
outputs them; the cluster takes the table's bytes at those positions (references to the table's
own objects, no copy). The model carries each table in its metadata
(``text_tables``), keyed by the output it stands for.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # a cluster read from the cache uses the session's side only, without onnx
    import onnx

_KEY = "text_table:"  # + the output's index: a metadata entry of the converted model


def gather_positions(b, table: np.ndarray, indices: str, axis: int) -> str:
    """The int64 positions ``GatherV2(table, indices, axis)`` reads (guarded as its indices)."""
    from onnx import TensorProto  # (converting: onnx is imported already)

    axis %= table.ndim
    size = int(table.shape[axis])
    b.guard_in_range(indices, size, gathered=True)
    positions = b.op(
        "Gather",
        [b.int64s(np.arange(size)), indices],
        axis=0,
        elem_type=TensorProto.INT64,
        rank=b.rank(indices),
    )
    b.text_tables[positions] = (table, axis)
    return positions


def record(model: onnx.ModelProto, outputs: dict[int, tuple[np.ndarray, int]]) -> None:
    """Writes each output's table (UTF-8 text, checked by the partitioner) into the metadata."""
    for index, (table, axis) in outputs.items():
        entry = model.metadata_props.add()
        entry.key = f"{_KEY}{index}"
        items = [item.decode("utf-8") for item in table.reshape(-1).tolist()]
        entry.value = json.dumps({"axis": axis, "shape": list(table.shape), "items": items})


def tables_of(model: onnx.ModelProto) -> dict[int, tuple[np.ndarray, int]]:
    """Output index -> (table of bytes, axis) of a converted model (``record``)."""
    found = {}
    for entry in model.metadata_props:
        if entry.key.startswith(_KEY):
            data = json.loads(entry.value)
            table = np.empty(len(data["items"]), object)
            table[:] = [item.encode("utf-8") for item in data["items"]]
            found[int(entry.key[len(_KEY) :])] = (table.reshape(data["shape"]), data["axis"])
    return found


def tables_of_session(session) -> dict[int, tuple[np.ndarray, int]]:
    """``tables_of`` from an onnxruntime session's model metadata (no ONNX proto at hand: a
    model read from the cluster cache)."""
    metadata = session.get_modelmeta().custom_metadata_map
    found = {}
    for key, value in metadata.items():
        if key.startswith(_KEY):
            data = json.loads(value)
            table = np.empty(len(data["items"]), object)
            table[:] = [item.encode("utf-8") for item in data["items"]]
            found[int(key[len(_KEY) :])] = (table.reshape(data["shape"]), data["axis"])
    return found


def take(table: np.ndarray, positions: np.ndarray, axis: int) -> np.ndarray:
    """The table's strings at ``positions`` along ``axis``, as TF's GatherV2 gives them."""
    result = table[positions] if axis == 0 else table.take(positions, axis=axis)  # (np.take: 4x slower)
    return result if type(result) is np.ndarray else np.array(result, object)  # (0-d positions)
