"""Protocol buffers of TensorFlow and TF Serving, without TensorFlow.

What lives here:

- Our own `.proto` files, laid out under TF's own paths with the repository root as the
  import root: `apis/tensorflow/core/{framework,protobuf,example}/`,
  `apis/xla/tsl/protobuf/` (where TF 2.21 keeps error codes and RPC options),
  `apis/tensorflow_serving/{apis,config,servables/tensorflow}/`. Their wire facts
  (packages, message, enum and field names and numbers, types, labels, oneofs, maps,
  explicit packing, services and method paths such as
  `/tensorflow.serving.PredictionService/Predict`) are exactly TensorFlow 2.21's and
  TF Serving 2.21's; the comments are ours.
- The modules generated from them (`*_pb2.py`, `*_pb2.pyi`, `*_pb2_grpc.py` for files with
  services, and subpackage `__init__.py` files). They are committed and never edited by
  hand. They import each other as `apis.tensorflow...`, so they never shadow a real
  `tensorflow` package. They register TF's full names (`tensorflow.TensorProto`, ...) in
  protobuf's default pool, so do not import them in a process that also imports
  TensorFlow's or tensorflow-serving-api's generated modules.

Regenerate after editing a `.proto` (needs grpcio-tools, pinned to the version that made
the committed files)::

    python -m apis.generate

`tests/apis/test_generated_current.py` fails when the committed modules are stale;
`tests/apis/test_wire_identity.py` checks descriptors and bytes against TensorFlow's own
modules in the oracle venvs.

Importing this package imports nothing else: neither TensorFlow nor grpc.
"""
