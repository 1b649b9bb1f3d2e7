"""The graph model: ``Graph``, ``Operation`` and ``Tensor`` over a GraphDef, as ``tf.Graph`` has them.

Owns what a graph *is*, never how it runs: importing and checking GraphDefs (``graph.py``,
``graph_check.py``, ``node_check.py``), op definitions without OpDefs (``op_def.py`` over the
generated ``op_signatures.py`` and ``op_attrs.py``), attr decoding (``attrs.py``), device names
(``device.py``) and library functions instantiated as graphs of their own (``function_def.py``).

May import: ``runtime.errors``, ``runtime.dtypes``, ``runtime.tensor_util`` and ``apis``. Never the
kernels (the model knows no numpy kernel), the execution engine or onnx: they build on it.
"""
