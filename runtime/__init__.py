"""A ``tf.Session``-style runtime over GraphDefs, without TensorFlow.

``runtime.Graph`` and ``runtime.Session`` keep TF's semantics and errors; kernels are numpy functions
registered per TF op (``runtime/kernels``); clusters that map to ONNX run in onnxruntime
(``runtime/onnx``). ``runtime.checkpoint`` reads TensorBundle checkpoints.
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
