"""Predict and GetModelMetadata end to end: ``model_server`` as a process, driven with our stubs.

TF Serving's own integration scenarios (tensorflow_model_server_test.py: VerifyPredictRequest,
GetModelMetadata) on the TF1 and TF2 half_plus_two exports, every error of the request path with
its code and text, messages over grpc's 4 MiB default, bad requests interleaved with good ones,
and every model of the oracle corpus with outputs matching TensorFlow's within the manifest's
tolerance. Nothing is skipped: a missing export or oracle cache fails and says how to build it.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2, types_pb2
from apis.tensorflow.core.protobuf import saved_model_pb2
from apis.tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_service_pb2_grpc
from serving.inference import tensor_codec
from tests.oracle import corpus
from tests.oracle.catalog import discover

REPO = Path(__file__).resolve().parents[2]
BIG = [("grpc.max_send_message_length", 2**31 - 1), ("grpc.max_receive_message_length", 2**31 - 1)]


def model_versions(name: str) -> Path:
    """``models/<name>``, failing (not skipping) when its export is missing."""
    base = REPO / "models" / name
    if not any(p.is_dir() and p.name.isdigit() for p in base.iterdir()):
        pytest.fail(f"models/{name} has no version directory: run `python -m tests.oracle models`")
    return base


def start_serving(model_server, *flags: str, timeout: float = 120.0):
    """``model_server(*flags)``, ready; fails at once with the load error when a model fails to
    load (the server would otherwise retry and never turn SERVING)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    server = model_server(*flags, wait=False)
    health = health_pb2_grpc.HealthStub(server.channel())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            pytest.fail(f"model_server exited with {server.proc.returncode}:\n{server.output()}")
        failed = [
            line for line in server.output().splitlines() if "Loading servable" in line and "failed" in line
        ]
        if failed:
            pytest.fail("\n".join(failed))
        try:
            if (
                health.Check(health_pb2.HealthCheckRequest(), timeout=1).status
                == health_pb2.HealthCheckResponse.SERVING
            ):
                return server
        except grpc.RpcError:
            pass
        time.sleep(0.1)
    pytest.fail(f"model_server not ready after {timeout}s:\n{server.output()}")


def serve(model_server, tmp_path: Path, name: str, source: Path, model_name: str | None = None, tags="serve"):
    base = tmp_path / f"{model_name or name}_base"
    for version in (p for p in source.iterdir() if p.is_dir() and p.name.isdigit()):
        shutil.copytree(version, base / version.name)
    return start_serving(
        model_server,
        f"--model_name={model_name or name}",
        f"--model_base_path={base}",
        f"--saved_model_tags={tags}",
    )


def stub_for(server, big: bool = False):
    channel = server.new_channel(options=BIG) if big else server.channel()
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict_request(model="default", signature="", output_filter=(), **inputs) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    request.output_filter.extend(output_filter)
    for alias, value in inputs.items():
        if isinstance(value, tensor_pb2.TensorProto):
            request.inputs[alias].CopyFrom(value)
        else:
            tensor_codec.encode_content_into(request.inputs[alias], np.asarray(value))
    return request


def x_like_tf_serving_tests(value=2.0, dims=(1, 1)) -> tensor_pb2.TensorProto:
    """VerifyPredictRequest's input: float_val [2.0] (TF Serving gives it shape [1]; our
    half_plus_two's x is [-1, 1], so [1, 1] unless a test asks for TF Serving's own shape)."""
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value])
    for d in dims:
        proto.tensor_shape.dim.add().size = d
    return proto


def rpc_error(call, request, timeout=30):
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=timeout)
    return info.value.code(), info.value.details()


def verify_model_spec(spec, name, signature, version):
    assert (spec.name, spec.signature_name, spec.version.value) == (name, signature, version)


# --------------------------------------------------------------------------------------------
# TF1 half_plus_two


def test_predict_half_plus_two_tf1_like_tf_serving(model_server, tmp_path):
    server = serve(model_server, tmp_path, "half_plus_two", model_versions("half_plus_two"), "default")
    stub = stub_for(server)
    for output_filter in (["y"], []):
        result = stub.Predict(
            predict_request(x=x_like_tf_serving_tests(), output_filter=output_filter), timeout=30
        )
        assert list(result.outputs) == ["y"]
        assert result.outputs["y"].dtype == types_pb2.DT_FLOAT
        assert list(result.outputs["y"].float_val) == [3.0], "outputs use float_val, as TF Serving's"
        assert not result.outputs["y"].tensor_content
        verify_model_spec(result.model_spec, "default", "serving_default", 123)
    # explicit version, batch input in tensor_content
    request = predict_request(x=np.float32([[1.0], [2.0], [5.0]]))
    request.model_spec.version.value = 123
    result = stub.Predict(request, timeout=30)
    assert [d.size for d in result.outputs["y"].tensor_shape.dim] == [3, 1]
    assert list(result.outputs["y"].float_val) == [2.5, 3.0, 4.5]
    # a predict call on a regression signature (TF Serving allows it)
    result = stub.Predict(predict_request(signature="regress_x_to_y", inputs=_examples([2.0])), timeout=30)
    assert list(result.outputs["outputs"].float_val) == [3.0]
    assert server.stop() == 0


def _examples(xs):
    from apis.tensorflow.core.example import example_pb2

    serialized = []
    for x in xs:
        example = example_pb2.Example()
        example.features.feature["x"].float_list.value.append(x)
        serialized.append(example.SerializeToString())
    return np.array(serialized, object)


def test_feed_shape_is_not_checked_against_the_graph_as_in_tf_serving(model_server, tmp_path):
    server = serve(model_server, tmp_path, "half_plus_two", model_versions("half_plus_two"), "default")
    result = stub_for(server).Predict(predict_request(x=x_like_tf_serving_tests(dims=[1])), timeout=30)
    assert list(result.outputs["y"].float_val) == [3.0]
    assert [d.size for d in result.outputs["y"].tensor_shape.dim] == [1]


def predict_errors():
    wrong_dtype = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT32, int_val=[2])
    huge = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0])
    huge.tensor_shape.dim.add().size = 1 << 30
    huge.tensor_shape.dim.add().size = 1 << 30
    specific = predict_request(x=x_like_tf_serving_tests())
    specific.model_spec.version.value = 7
    no_spec = predict_request(x=x_like_tf_serving_tests())
    no_spec.ClearField("model_spec")
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    return {
        "unknown model": (
            predict_request("nope", x=x_like_tf_serving_tests()),
            grpc.StatusCode.NOT_FOUND,
            "Servable not found for request: Latest(nope)",
        ),
        "unknown version": (
            specific,
            grpc.StatusCode.NOT_FOUND,
            "Servable not found for request: Specific(default, 7)",
        ),
        "missing model spec": (no_spec, invalid, "Missing ModelSpec"),
        "missing signature": (
            predict_request(signature="nope", x=x_like_tf_serving_tests()),
            grpc.StatusCode.FAILED_PRECONDITION,
            'Serving signature key "nope" not found.',
        ),
        "extra input": (
            predict_request(x=x_like_tf_serving_tests(), z=x_like_tf_serving_tests()),
            invalid,
            "input size does not match signature: 2!=1 len({x,z}) != len({x}). Sent extra: {z}. "
            "Missing but required: {}.",
        ),
        "no input": (
            predict_request(),
            invalid,
            "input size does not match signature: 0!=1 len({}) != len({x}). Sent extra: {}. "
            "Missing but required: {x}.",
        ),
        "wrong input name": (
            predict_request(X=x_like_tf_serving_tests()),
            invalid,
            "Signature input alias: x(feed name: x:0) not found in request and no default value provided. "
            "Inputs expected to be in the request {X}, or default input alias set: ",
        ),
        "wrong dtype": (
            predict_request(x=wrong_dtype),
            invalid,
            "Expects arg[0] to be float but int32 is provided",
        ),
        "unknown output filter": (
            predict_request(x=x_like_tf_serving_tests(), output_filter=["z"]),
            invalid,
            "output tensor alias not found in signature: z Outputs expected to be in the set {y}.",
        ),
        "duplicate output filter": (
            predict_request(x=x_like_tf_serving_tests(), output_filter=["y", "y"]),
            invalid,
            "duplicate output tensor alias: y",
        ),
        "huge claimed shape without data": (predict_request(x=huge), invalid, "tensor parsing error: x"),
    }


def test_predict_errors_have_tf_serving_codes_and_texts(model_server, tmp_path):
    server = serve(model_server, tmp_path, "half_plus_two", model_versions("half_plus_two"), "default")
    stub = stub_for(server)
    failures = []
    for what, (request, code, text) in predict_errors().items():
        start = time.monotonic()
        got = rpc_error(stub.Predict, request)
        if got != (code, text):
            failures.append(f"{what}: got {got}, want {(code, text)}")
        assert time.monotonic() - start < 5, what
    assert not failures, "\n".join(failures)
    # still serving after all of them
    assert list(
        stub.Predict(predict_request(x=x_like_tf_serving_tests()), timeout=30).outputs["y"].float_val
    ) == [3.0]
    assert server.stop() == 0


def test_bad_requests_never_harm_concurrent_good_ones(model_server, tmp_path):
    server = serve(model_server, tmp_path, "half_plus_two", model_versions("half_plus_two"), "default")
    stub = stub_for(server)
    bad = [request for request, _, _ in predict_errors().values()]
    problems: list[str] = []

    def client(index: int) -> None:
        for i in range(40):
            if (i + index) % 2:
                try:
                    stub.Predict(bad[(i + index) % len(bad)], timeout=30)
                    problems.append("a bad request succeeded")
                except grpc.RpcError as e:
                    if e.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE):
                        problems.append(f"{e.code()}: {e.details()}")
            else:
                value = float(index * 100 + i)
                result = stub.Predict(predict_request(x=np.float32([[value]])), timeout=30)
                if list(result.outputs["y"].float_val) != [0.5 * value + 2]:
                    problems.append(f"wrong answer for {value}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems, problems[:5]
    assert server.stop() == 0


def test_bytes_that_are_no_request_are_refused_and_the_server_goes_on(model_server, tmp_path):
    """Undecodable request bytes on every PredictionService method: INTERNAL (gRPC's answer to
    a message it cannot parse, as TF Serving's C++ server gives), and the next request works."""
    server = serve(model_server, tmp_path, "half_plus_two", model_versions("half_plus_two"), "default")
    channel = server.channel()
    good = predict_request(x=np.float32([[4.0]])).SerializeToString()
    garbage = {
        "bad tag": b"\xff\xff\xff\xff",
        "truncated": good[:-1],
        "length past the end": b"\x0a\x7f\x0a\x01a",
    }
    for method in ("Predict", "Classify", "Regress", "MultiInference", "GetModelMetadata"):
        call = channel.unary_unary(
            f"/tensorflow.serving.PredictionService/{method}",
            request_serializer=None,
            response_deserializer=None,
        )
        for what, data in garbage.items():
            with pytest.raises(grpc.RpcError) as info:
                call(data, timeout=30)
            assert info.value.code() == grpc.StatusCode.INTERNAL, (method, what, info.value.details())
    result = stub_for(server).Predict(predict_pb2.PredictRequest.FromString(good), timeout=30)
    assert list(result.outputs["y"].float_val) == [4.0]
    assert server.stop() == 0


def test_messages_over_grpc_default_limit(model_server, tmp_path):
    server = serve(model_server, tmp_path, "half_plus_two", model_versions("half_plus_two"), "default")
    stub = stub_for(server, big=True)
    x = np.arange(3_000_000, dtype=np.float32).reshape(-1, 1)  # 12 MB in, 12 MB (float_val) out
    result = stub.Predict(predict_request(x=x), timeout=120)
    np.testing.assert_array_equal(tensor_codec.decode(result.outputs["y"]), 0.5 * x + 2)
    assert server.stop() == 0


def test_get_model_metadata_is_the_meta_graphs_signature_map(model_server, tmp_path):
    source = model_versions("half_plus_two")
    server = serve(model_server, tmp_path, "half_plus_two", source, "default")
    stub = stub_for(server)
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "default"
    result = stub.GetModelMetadata(request, timeout=30)
    assert (result.model_spec.name, result.model_spec.version.value) == ("default", 123)
    assert list(result.metadata) == ["signature_def"]
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    assert result.metadata["signature_def"].Unpack(signature_def_map)
    saved_model = saved_model_pb2.SavedModel.FromString((source / "00000123" / "saved_model.pb").read_bytes())
    serve_graph = next(m for m in saved_model.meta_graphs if list(m.meta_info_def.tags) == ["serve"])
    assert dict(signature_def_map.signature_def) == dict(serve_graph.signature_def)
    request.metadata_field[:] = ["signature_def", "bogus"]
    assert rpc_error(stub.GetModelMetadata, request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Metadata field bogus is not supported",
    )
    request.ClearField("metadata_field")
    assert rpc_error(stub.GetModelMetadata, request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "GetModelMetadataRequest must specify at least one metadata_field",
    )
    assert server.stop() == 0


# --------------------------------------------------------------------------------------------
# TF2 half_plus_two


def test_predict_and_metadata_half_plus_two_tf2(model_server, tmp_path):
    server = serve(
        model_server, tmp_path, "half_plus_two_tf2", model_versions("half_plus_two_tf2"), "default"
    )
    stub = stub_for(server)
    result = stub.Predict(predict_request(x=np.float32([1.0, 2.0, 5.0])), timeout=30)
    assert list(result.outputs["y"].float_val) == [2.5, 3.0, 4.5]
    verify_model_spec(result.model_spec, "default", "serving_default", 1)
    result = stub.Predict(predict_request(signature="x2_to_y3", x2=np.float32([2.0])), timeout=30)
    assert list(result.outputs["y3"].float_val) == [4.0]
    assert rpc_error(stub.Predict, predict_request(x=np.int32([1]))) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Expects arg[0] to be float but int32 is provided",
    )
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "default"
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    stub.GetModelMetadata(request, timeout=30).metadata["signature_def"].Unpack(signature_def_map)
    assert {"serving_default", "x2_to_y3"} <= set(signature_def_map.signature_def)
    assert server.stop() == 0


# --------------------------------------------------------------------------------------------
# the oracle corpus


def read_tensor(path: Path) -> tensor_pb2.TensorProto:
    return tensor_pb2.TensorProto.FromString(path.read_bytes())


# The manifest's tolerance, but never below what a 16-bit float can tell apart (one ulp): the
# same floor tests/runtime/test_op_records.py applies.
MIN_TOLERANCE = {"float16": (2e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


def assert_matches_tf(ours: tensor_pb2.TensorProto, theirs: tensor_pb2.TensorProto, rtol, atol, what):
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != TF's {theirs.dtype}"
    got, want = tensor_codec.decode(ours), tensor_codec.decode(theirs)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != TF's {want.shape}"
    floor_rtol, floor_atol = MIN_TOLERANCE.get(str(want.dtype), (0.0, 0.0))
    rtol, atol = max(rtol, floor_rtol), max(atol, floor_atol)
    if want.dtype.kind in "fc" or str(want.dtype) == "bfloat16":
        np.testing.assert_allclose(
            got.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
            want.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
            err_msg=what,
        )
    else:
        assert got.tolist() == want.tolist(), what


def serve_export(model_server, tmp_path: Path, name: str, export_dir: Path, tags: list[str], *flags: str):
    base = tmp_path / f"{name}_{'_'.join(tags)}"
    shutil.copytree(export_dir, base / "1", symlinks=True)
    return start_serving(
        model_server,
        f"--model_name={name}",
        f"--model_base_path={base}",
        f"--saved_model_tags={','.join(tags)}",
        *flags,
    )


# The zoo's convolutional networks run the server's one path as MobileNetV2 does (float images in,
# probabilities out), each checked against TF at the Session by tests/runtime/onnx/test_corpus.py:
# served here are MobileNetV2 and the models whose inputs differ (ids, strings), in every flavour.
ZOO_SERVED = ("zoo_mobilenet_v2_", "zoo_bert_encoder_", "zoo_text_classifier_")
CORPUS = [e.name for e in discover() if e.family != "zoo" or e.name.startswith(ZOO_SERVED)]


@pytest.mark.parametrize("name", CORPUS)
def test_predict_matches_tensorflow_on_oracle_corpus(model_server, tmp_path, name):
    check_corpus_model(model_server, tmp_path, name)


DELEGATED = ["keras_mlp", "keras_cnn_bn", "keras_transformer_block", "keras_lstm", "est_dnn_classifier"]


@pytest.mark.parametrize("name", DELEGATED)
def test_predict_with_and_without_onnx_delegation_matches_tensorflow(model_server, tmp_path, name):
    """--onnx_delegation (our extension, on by default): clusters run in onnxruntime; with
    --onnx_delegation=false every op runs on the numpy kernels. Both answer as TF does."""
    delegated = check_corpus_model(model_server, tmp_path, name)
    assert all("onnxruntime delegation:" in server.output() for server in delegated)
    native = check_corpus_model(model_server, tmp_path / "native", name, "--onnx_delegation=false")
    assert not any("onnxruntime delegation:" in server.output() for server in native)


def test_a_restart_reads_the_cluster_cache(model_server, tmp_path):
    """--onnx_cluster_cache_dir (our extension): the first start converts, validates and keeps;
    the second reads the delegated graph and converted clusters back and answers as TF does."""
    cache = tmp_path / "cluster_cache"
    (first,) = check_corpus_model(
        model_server, tmp_path / "a", "keras_cnn_bn", f"--onnx_cluster_cache_dir={cache}"
    )
    assert "read from the cluster cache" not in first.output()
    assert {p.suffix for p in cache.iterdir()} == {".onnx", ".json", ".plan"}
    (second,) = check_corpus_model(
        model_server, tmp_path / "b", "keras_cnn_bn", f"--onnx_cluster_cache_dir={cache}"
    )
    assert "read from the cluster cache" in second.output()


def check_corpus_model(model_server, tmp_path, name, *flags):
    """Serves every tag set of a corpus model and checks every case against TF's outputs."""
    data = corpus.load_manifest(name)
    root, export_dir = data["dir"], data["export_path"]
    by_tags: dict[tuple[str, ...], list[dict]] = {}
    for case in data["cases"]:
        by_tags.setdefault(tuple(case["tags"]), []).append(case)
    assert by_tags, f"{name} has no cases"
    servers = []
    for tags, cases in by_tags.items():
        server = serve_export(model_server, tmp_path, name, export_dir, list(tags), *flags)
        servers.append(server)
        stub = stub_for(server, big=True)
        for index, case in enumerate(cases):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = name
            request.model_spec.signature_name = case["signature"]
            for alias, file in case["inputs"].items():
                request.inputs[alias].CopyFrom(read_tensor(root / file))
            result = stub.Predict(request, timeout=120)
            assert sorted(result.outputs) == sorted(case["outputs"]), f"{name} case {index}"
            for alias, file in case["outputs"].items():
                assert_matches_tf(
                    result.outputs[alias],
                    read_tensor(root / file),
                    case["rtol"],
                    case["atol"],
                    f"{name} {tags} case {index} {case['signature']}:{alias}",
                )
            verify_model_spec(result.model_spec, name, case["signature"], 1)
        assert server.stop() == 0
    return servers


def test_signature_needing_a_refused_op_is_unimplemented_and_others_serve(model_server, tmp_path):
    """A signature that needs PyFunc is reported at load and refused per request (UNIMPLEMENTED);
    the model's other signatures keep serving."""
    (entry,) = [e for e in discover() if e.name == "sigcheck_plain"]
    manifest = corpus.check_current(entry)
    server = serve_export(model_server, tmp_path, "mixed", manifest["dir"] / "fixtures" / "mixed", ["serve"])
    stub = stub_for(server)
    request = predict_request(model="mixed", signature="py_function", x=x_like_tf_serving_tests())
    assert rpc_error(stub.Predict, request) == (
        grpc.StatusCode.UNIMPLEMENTED,
        "Signature 'py_function' cannot run here. Op types not supported: EagerPyFunc (x1)",
    )
    good = predict_request(model="mixed", x=x_like_tf_serving_tests(dims=[2]))
    assert len(stub.Predict(good, timeout=30).outputs["y"].float_val) == 2
