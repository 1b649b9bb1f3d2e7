"""Dump TensorFlow's own FileDescriptorProtos (run inside an oracle venv).

Usage (from tests/apis): python -m oracle_scripts.dump_descriptors OUT.binpb

Writes a FileDescriptorSet holding every file that the TF and TF Serving
modules below register, plus everything they import, so the caller can compare
our descriptors with TF's without importing both module sets in one process.
TF Serving modules are skipped when `tensorflow-serving-api` is not installed
(the TF 2.15 venv ships TensorFlow only).
"""

import importlib
import sys

from google.protobuf import descriptor_pb2

TF_MODULES = (
    "tensorflow.core.example.example_pb2",
    "tensorflow.core.framework.graph_debug_info_pb2",
    "tensorflow.core.framework.tensor_slice_pb2",
    "tensorflow.core.protobuf.config_pb2",
    "tensorflow.core.protobuf.error_codes_pb2",
    "tensorflow.core.protobuf.fingerprint_pb2",
    "tensorflow.core.protobuf.meta_graph_pb2",
    "tensorflow.core.protobuf.saved_model_pb2",
    "tensorflow.core.protobuf.tensor_bundle_pb2",
)
SERVING_MODULES = tuple(
    f"tensorflow_serving.{name}_pb2"
    for name in (
        "apis.classification",
        "apis.get_model_metadata",
        "apis.get_model_status",
        "apis.inference",
        "apis.input",
        "apis.logging",
        "apis.model",
        "apis.model_management",
        "apis.model_service",
        "apis.predict",
        "apis.prediction_log",
        "apis.prediction_service",
        "apis.regression",
        "apis.session_service",
        "apis.status",
        "config.file_system_storage_path_source",
        "config.log_collector_config",
        "config.logging_config",
        "config.model_server_config",
        "config.platform_config",
    )
)


def _closure(files):
    seen = {}
    stack = list(files)
    while stack:
        fd = stack.pop()
        if fd.name not in seen:
            seen[fd.name] = fd
            stack.extend(fd.dependencies)
    return [seen[name] for name in sorted(seen)]


def main(out_path: str) -> None:
    names = list(TF_MODULES)
    try:
        importlib.import_module("tensorflow_serving")
        names += SERVING_MODULES
    except ImportError:
        pass
    roots = [importlib.import_module(name).DESCRIPTOR for name in names]
    fds = descriptor_pb2.FileDescriptorSet()
    for fd in _closure(roots):
        # serialized_pb is what protoc emitted, so explicit json_name options survive.
        fds.file.add().ParseFromString(fd.serialized_pb)
    with open(out_path, "wb") as f:
        f.write(fds.SerializeToString(deterministic=True))


if __name__ == "__main__":
    main(sys.argv[1])
