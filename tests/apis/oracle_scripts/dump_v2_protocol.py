"""Dump KServe's published Open Inference Protocol proto and messages built with it (run in
the v2clients venv).

Usage (from tests/apis): python -m oracle_scripts.dump_v2_protocol DESCRIPTORS.binpb MESSAGES.json

Writes the FileDescriptorSet of ``kserve.protocol.grpc.grpc_predict_v2_pb2`` (what KServe ships
as ``grpc_predict_v2.proto``), and a JSON object of message name -> hex of a message of that
type with every field set (serialized deterministically: map entries by key), for the caller to parse and re-serialize with our module.
"""

import json
import sys

from google.protobuf import descriptor_pb2
from kserve.protocol.grpc import grpc_predict_v2_pb2 as v2


def messages() -> dict:
    request = v2.ModelInferRequest(model_name="m", model_version="3", id="req-1")
    request.parameters["signature_name"].string_param = "serving_default"
    request.parameters["priority"].int64_param = -7
    request.parameters["binary_data_output"].bool_param = True
    tensor = request.inputs.add(name="x", datatype="FP32", shape=[2, -1, 0])
    tensor.parameters["binary_data_size"].int64_param = 8
    contents = tensor.contents
    contents.bool_contents.extend([True, False])
    contents.int_contents.extend([-1, 2**31 - 1])
    contents.int64_contents.extend([-(2**63), 5])
    contents.uint_contents.extend([0, 2**32 - 1])
    contents.uint64_contents.extend([2**64 - 1])
    contents.fp32_contents.extend([0.5, -1e30])
    contents.fp64_contents.extend([1e300])
    contents.bytes_contents.extend([b"", b"\x00\xff"])
    request.outputs.add(name="y").parameters["binary_data"].bool_param = False
    request.raw_input_contents.extend([b"\x01\x02", b""])
    response = v2.ModelInferResponse(model_name="m", model_version="3", id="req-1")
    response.parameters["x"].string_param = "y"
    output = response.outputs.add(name="y", datatype="BYTES", shape=[1])
    output.contents.bytes_contents.append(b"abc")
    output.parameters["binary_data_size"].int64_param = 3
    response.raw_output_contents.append(b"\x03\x00\x00\x00abc")
    metadata = v2.ModelMetadataResponse(name="m", versions=["1", "2"], platform="tensorflow_savedmodel")
    metadata.inputs.add(name="x", datatype="FP32", shape=[-1, 3])
    metadata.outputs.add(name="y", datatype="INT64", shape=[])
    built = {
        "ModelInferRequest": request,
        "ModelInferResponse": response,
        "ModelMetadataResponse": metadata,
        "ModelMetadataRequest": v2.ModelMetadataRequest(name="m", version="2"),
        "ModelReadyRequest": v2.ModelReadyRequest(name="m", version="2"),
        "ModelReadyResponse": v2.ModelReadyResponse(ready=True),
        "ServerMetadataResponse": v2.ServerMetadataResponse(name="s", version="1", extensions=["a", "b"]),
        "ServerLiveResponse": v2.ServerLiveResponse(live=True),
        "ServerReadyResponse": v2.ServerReadyResponse(ready=True),
    }
    return {name: message.SerializeToString(deterministic=True).hex() for name, message in built.items()}


def main() -> None:
    descriptors, out = sys.argv[1], sys.argv[2]
    files = descriptor_pb2.FileDescriptorSet()
    v2.DESCRIPTOR.CopyToProto(files.file.add())
    with open(descriptors, "wb") as f:
        f.write(files.SerializeToString())
    with open(out, "w") as f:
        json.dump(messages(), f)


if __name__ == "__main__":
    main()
