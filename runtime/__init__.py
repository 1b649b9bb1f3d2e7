"""A ``tf.Session``-style runtime over GraphDefs, without TensorFlow.

``runtime.Graph`` and ``runtime.Session`` keep TF's semantics and errors. Subpackages by concern,
each importing only those below it (pyproject.toml's import-linter contracts check the order):

- ``onnx/``: clusters that map to ONNX run in onnxruntime;
- ``execution/``: the Session, its plans, the interpreter loop, library functions;
- ``graph/`` (the graph model) beside ``kernels/`` (numpy kernels, one module per TF op family);
- ``example/`` (tf.Example parsing) beside ``checkpoint/`` (TensorBundle checkpoints).

At the top, what every layer speaks, loader and serving too: ``errors`` (``tf.errors``),
``dtypes``, ``tensor_util`` (the TensorProto <-> numpy codec) and ``wire`` (protobuf varints and
keys). ``runtime.session`` re-exports the Session where users import it.
"""

from __future__ import annotations

import importlib

from runtime import errors

# Imported on first use, so that ``import runtime`` (and runtime.errors, runtime.dtypes) stays cheap.
_LAZY = {
    "Graph": "runtime.graph.graph",
    "Session": "runtime.execution.session",
    "DeviceSpec": "runtime.graph.device",
    "get_default_graph": "runtime.graph.graph",
    "get_default_session": "runtime.execution.session",
}

__all__ = ["DeviceSpec", "Graph", "Session", "errors", "get_default_graph", "get_default_session"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
