"""onnxruntime delegation: clusters of TF ops converted to ONNX and run by onnxruntime.

Importing this package registers the ``_OrtCluster`` kernel; the converters (``converters.py``:
``math_ops``, ``array_ops``, ``nn_ops``, ``list_ops``, ``logging_ops``, ``control_flow_ops`` with
``rnn_ops``' fused loops, ``cond_ops``) register when first asked for (``CONVERTERS``,
``convert_subgraph``, the partitioner's names here, or a rewrite or conversion that needs them). ``delegate(session, options, roots)`` rewrites a loaded Session's graph
once (``loader.load_saved_model(..., delegation=...)`` calls it, importing this package by
name); the
returned ``DelegationReport`` says what runs where. Only this package imports onnx and
onnxruntime.

May import: everything else in ``runtime`` (it rewrites graphs and runs clusters through the
execution engine); nothing in ``runtime`` imports it statically.
"""

import importlib

from runtime.onnx.cluster import ClusterRunner, runner_of
from runtime.onnx.cluster_cache import ClusterCache
from runtime.onnx.delegate import delegate
from runtime.onnx.options import DelegationOptions, gpu_available
from runtime.onnx.report import DelegationReport

# Converting and partitioning import the converters, and with them onnx: on demand, so that a
# start from the cluster cache (which neither converts nor partitions) never imports them.
_ON_DEMAND = {
    "CONVERTERS": "runtime.onnx.converters",
    "OPSET": "runtime.onnx.converters",
    "NotConvertible": "runtime.onnx.converters",
    "convert_subgraph": "runtime.onnx.converters",
    "converter": "runtime.onnx.converters",
    "Cluster": "runtime.onnx.partition",
    "fuse": "runtime.onnx.partition",
    "propose_clusters": "runtime.onnx.partition",
    "reason": "runtime.onnx.partition",
    "supported": "runtime.onnx.partition",
}


def __getattr__(name: str):
    if name not in _ON_DEMAND:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    importlib.import_module("runtime.onnx.converters")  # (partition asks the registered converters)
    return getattr(importlib.import_module(_ON_DEMAND[name]), name)


__all__ = [
    "CONVERTERS",
    "OPSET",
    "Cluster",
    "ClusterCache",
    "ClusterRunner",
    "DelegationOptions",
    "DelegationReport",
    "NotConvertible",
    "convert_subgraph",
    "converter",
    "delegate",
    "fuse",
    "gpu_available",
    "propose_clusters",
    "reason",
    "runner_of",
    "supported",
]
