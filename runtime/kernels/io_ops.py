"""Checkpoint ops: ``RestoreV2`` over TensorBundle files and the string ops TF's Saver builds around it.

A SavedModel restores its variables by running the saver's ``restore_op_name`` with the variables
prefix fed to ``filename_tensor_name``; that graph is ``RestoreV2`` followed by ``Assign`` /
``AssignVariableOp``. ``ReadFile`` is how TF1 init ops read their assets. Writing checkpoints
(``SaveV2``, ``MergeV2Checkpoints``), writing files (``WriteFile``) and the V1 checkpoint format
(``Restore``, ``RestoreSlice``) are never needed to serve, so they fail with UnimplementedError.
"""

from __future__ import annotations

import math

import numpy as np

from runtime import dtypes as tf_dtypes
from runtime import errors
from runtime.checkpoint.tensor_bundle import BundleReader, parse_shape_and_slice
from runtime.kernels.registry import kernel


def _text(value) -> str:
    item = np.asarray(value, dtype=object).reshape(-1)
    if item.size != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Expected a scalar string, got shape {np.shape(value)}"
        )
    item = item[0]
    return item.decode("utf-8", "surrogateescape") if isinstance(item, bytes) else str(item)


def _texts(value) -> list[str]:
    flat = np.asarray(value, dtype=object).reshape(-1)
    return [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for v in flat]


@kernel("RestoreV2", stateful=True)
def restore_v2(prefix, tensor_names, shape_and_slices, *, dtypes):
    """One tensor per name, read from the bundle at ``prefix`` (a slice where shape_and_slices says so)."""
    names = _texts(tensor_names)
    specs = _texts(shape_and_slices)
    if len(names) != len(specs) or len(names) != len(dtypes):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Input tensor_names and shape_and_slices should have the same number of elements as dtypes: "
            f"{len(names)} vs. {len(specs)} vs. {len(dtypes)}",
        )
    reader = BundleReader(_text(prefix))
    out = []
    for name, spec, dtype in zip(names, specs, dtypes):
        stored = reader.entry(name).dtype
        if tf_dtypes.base_dtype(dtype) != stored:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"tensor_name = {name}; expected dtype {tf_dtypes.name(dtype)} does not equal original dtype "
                f"{tf_dtypes.name(stored)}",
            )
        parsed = parse_shape_and_slice(spec)
        # Restored variables outlive this read: own them rather than keep views of the mapped
        # shard, so a shard overwritten in place on disk can never fault (SIGBUS) a serving process.
        if parsed is None:
            out.append(reader.get_tensor(name, owned=True))
        else:
            out.append(np.array(reader.get_slice(name, *parsed), copy=True))
    return tuple(out)


def _unimplemented(op: str, why: str):
    def fail(*args, **attrs):
        raise errors.UnimplementedError(None, op, f"{op} is not supported: {why}")

    fail.__name__ = op.lower()
    return fail


for _op, _why in (
    ("SaveV2", "this runtime never writes checkpoints"),
    ("Save", "this runtime never writes checkpoints"),
    ("SaveSlices", "this runtime never writes checkpoints"),
    ("MergeV2Checkpoints", "this runtime never writes checkpoints"),
    ("Restore", "V1 (TensorSliceReader) checkpoints are not supported; re-export with the V2 saver"),
    ("RestoreSlice", "V1 (TensorSliceReader) checkpoints are not supported; re-export with the V2 saver"),
):
    kernel(_op, stateful=True)(_unimplemented(_op, _why))


@kernel("ShardedFilename")
def sharded_filename(basename, shard, num_shards):
    """``<basename>-<shard:05d>-of-<num_shards:05d>``."""
    text = f"{_text(basename)}-{int(np.asarray(shard)):05d}-of-{int(np.asarray(num_shards)):05d}"
    return np.array(text.encode("utf-8", "surrogateescape"), dtype=object)


@kernel("ShardedFilespec")
def sharded_filespec(basename, num_shards):
    text = f"{_text(basename)}-?????-of-{int(np.asarray(num_shards)):05d}"
    return np.array(text.encode("utf-8", "surrogateescape"), dtype=object)


@kernel("StringJoin")
def string_join(inputs, *, separator=b""):
    """Element-wise join of string tensors; scalars broadcast against the others' common shape."""
    arrays = [np.asarray(x, dtype=object) for x in inputs]
    sep = separator.encode() if isinstance(separator, str) else bytes(separator)
    shapes = {a.shape for a in arrays if a.ndim}
    if len(shapes) > 1:
        raise errors.InvalidArgumentError(None, None, f"Input shapes do not match: {sorted(shapes)}")
    shape = shapes.pop() if shapes else ()
    size = math.prod(shape)
    # Columns as lists (a scalar repeated): joined row by row in C, no numpy item access per string.
    columns = [
        [_as_bytes(v) for v in a.reshape(-1).tolist()] if a.ndim else [_as_bytes(a.item())] * size
        for a in arrays
    ]
    out = np.empty(size, dtype=object)
    out[:] = [sep.join(row) for row in zip(*columns)] if columns else [b""] * size
    return out.reshape(shape)


def _as_bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


@kernel("ReadFile", stateful=True)
def read_file(filename):
    """The bytes of a file: how TF1 init ops read assets (their paths are fed from ``assets/``)."""
    path = _text(filename)
    try:
        with open(path, "rb") as f:
            return np.array(f.read(), dtype=object)
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{path}; {e.strerror or e}") from None


kernel("WriteFile", stateful=True)(_unimplemented("WriteFile", "this runtime never writes files"))
