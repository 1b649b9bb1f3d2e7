"""A ``tf.Session``-style runtime over GraphDefs, without TensorFlow.

``runtime.Graph`` and ``runtime.Session`` keep TF's semantics and errors; kernels are numpy functions
registered per TF op (``runtime/kernels``); clusters that map to ONNX run in onnxruntime
(``runtime/onnx``). ``runtime.checkpoint`` reads TensorBundle checkpoints.
"""
