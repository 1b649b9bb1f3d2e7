"""Every converter, registered: importing this imports each converter module (``math_ops``,
``array_ops``, ``nn_ops``, ``list_ops``, ``logging_ops``, ``control_flow_ops`` with ``rnn_ops``'
fused loops, ``cond_ops``), whose ``@converter`` fills ``converter.CONVERTERS``.

What converts or asks what converts (the graph rewrites, a cluster's first compile) imports this
module, on demand: the converters import onnx, which a start from the cluster cache never needs.
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
from runtime.onnx.converter import (
    CONVERTERS,
    OPSET,
    NotConvertible,
    convert_cluster,
    convert_subgraph,
    converter,
)

__all__ = ["CONVERTERS", "OPSET", "NotConvertible", "convert_cluster", "convert_subgraph", "converter"]
