"""savedmodel-client: TensorFlow Serving's Python API without TensorFlow.

- ``savedmodel_client.tensorflow_serving.apis``: TF Serving's generated modules (``predict_pb2``,
  ``prediction_service_pb2_grpc``, ...), and ``savedmodel_client.tensorflow.core``: TensorFlow's
  protos they use;
- ``make_tensor_proto`` / ``make_ndarray`` and the dtypes, with TensorFlow's semantics;
- ``Client``: TF Serving's calls over gRPC or REST with numpy arrays and dicts, ``ServingError``
  its one exception, ``make_example`` a tf.Example from a dict.

The high-level names are imported on first use, so that ``import savedmodel_client`` stays cheap
(no grpc) for code that only builds and reads tensors.
"""

# TensorFlow's names for tensors and their dtypes, so that `import savedmodel_client as tf` keeps
# `tf.make_tensor_proto(x, dtype=tf.float32)` and `tf.make_ndarray(t)` working (no grpc imported).
from savedmodel_client.dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool,
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    qint8,
    qint16,
    qint32,
    quint8,
    quint16,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
)
from savedmodel_client.tensor_util import make_ndarray, make_tensor_proto

__all__ = [
    "DType",
    "as_dtype",
    "bfloat16",
    "bool",
    "complex64",
    "complex128",
    "double",
    "float16",
    "float32",
    "float64",
    "half",
    "int8",
    "int16",
    "int32",
    "int64",
    "make_ndarray",
    "make_tensor_proto",
    "qint8",
    "qint16",
    "qint32",
    "quint8",
    "quint16",
    "string",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]

_LAZY = {
    "Client": "savedmodel_client.client",
    "TlsConfig": "savedmodel_client.client",
    "ServingError": "savedmodel_client.errors",
    "ModelSpec": "savedmodel_client.model_spec",
    "make_example": "savedmodel_client.examples",
}
__all__ += sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'savedmodel_client' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
