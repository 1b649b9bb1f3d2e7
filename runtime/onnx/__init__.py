"""onnxruntime delegation: clusters of TF ops converted to ONNX and run by onnxruntime.

Importing this package registers every converter (``math_ops``, ``array_ops``, ``nn_ops``,
``list_ops``, ``logging_ops``, ``control_flow_ops`` with ``rnn_ops``' fused loops, ``cond_ops``)
and the ``_OrtCluster`` kernel. ``delegate(session, options, roots)`` rewrites a loaded Session's graph
once (``Session.delegate`` and ``loader.load_saved_model(..., delegation=...)`` call it); the
returned ``DelegationReport`` says what runs where. Only this package imports onnx and
onnxruntime.

May import: everything else in ``runtime`` (it rewrites graphs and runs clusters through the
execution engine); nothing in ``runtime`` imports it statically.
"""

from runtime.onnx import (  # noqa: F401 - registers
    array_ops,
    cond_ops,
    control_flow_ops,
    list_ops,
    logging_ops,
    math_ops,
    nn_ops,
    rnn_ops,
)
from runtime.onnx.cluster import ClusterRunner, runner_of
from runtime.onnx.cluster_cache import ClusterCache
from runtime.onnx.converter import CONVERTERS, OPSET, NotConvertible, convert_subgraph, converter
from runtime.onnx.delegate import delegate
from runtime.onnx.options import DelegationOptions, gpu_available
from runtime.onnx.partition import Cluster, fuse, propose_clusters, reason, supported
from runtime.onnx.report import DelegationReport

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
