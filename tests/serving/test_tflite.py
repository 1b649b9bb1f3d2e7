"""TF Lite models (``--prefer_tflite_model``) through a real ServerCore: every TF Lite model the
oracle converted answers as TF Lite in TensorFlow answers and reports the SignatureDefs TF Serving
reports; the preference and the fallback; every error TF Serving's TfLiteSession gives, with its
code and text; concurrency on a pool of interpreters, the session's own batching, and
``--enable_batching`` around it; warmup; and the missing extra.

Models come from the oracle (``tests/oracle/builders/tflite_models.py``); a missing or stale one
fails with how to build it.
"""

from __future__ import annotations

import concurrent.futures
import gc
import json
import shutil
import time
import weakref
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from flatbuffers import flexbuffers

from apis.tensorflow.core.framework import tensor_pb2, types_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from apis.tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_log_pb2
from runtime import errors
from serving import server as server_module
from serving.inference import tensor_codec, tflite
from serving.inference.metadata import get_model_metadata
from serving.inference.predict import predict
from serving.inference.tflite import bundle as tflite_bundle
from serving.lifecycle import model_config
from serving.observability.tfrecord import encode_record
from serving.options import ServerOptions
from serving.server_core import ServerCore
from tests.oracle import catalog, corpus

MODELS = ("tflite_half_plus_two", "tflite_dense")


def tflite_manifest(model: str) -> tuple[Path, dict]:
    """(the model's cache directory, its tflite.json), asserting it is built and current."""
    (entry,) = [e for e in catalog.discover() if e.name == model]
    manifest = corpus.check_current(entry)
    return manifest["dir"], json.loads((manifest["dir"] / "tflite.json").read_text())["layouts"]


def layout_base(model: str, layout: str, dest: Path) -> Path:
    """A copy of one layout's base path under ``dest``."""
    root, layouts = tflite_manifest(model)
    shutil.copytree(root / layouts[layout]["base_path"], dest, ignore=shutil.ignore_patterns("cases"))
    return dest


def config_for(models: list[tuple[str, Path]]):
    config = model_config.ModelServerConfig()
    for name, base in models:
        config.model_config_list.config.add(name=name, base_path=str(base), model_platform="tensorflow")
    return config


def read_tensor(path: Path) -> np.ndarray:
    return tensor_codec.decode(tensor_pb2.TensorProto.FromString(path.read_bytes()))


def serve(tmp_path: Path, models: dict[str, Path], **flags) -> ServerCore:
    flags = {"port": 0, "file_system_poll_wait_seconds": 0, "num_tflite_pools": 2, **flags}
    options = ServerOptions(prefer_tflite_model=True, **flags)
    core = ServerCore(options)
    core.reload_config(config_for(list(models.items())))
    return core


@pytest.fixture
def cores():
    started = []
    yield started
    for core in started:
        core.stop()


def request(model: str, inputs: dict, signature: str = "") -> predict_pb2.PredictRequest:
    message = predict_pb2.PredictRequest()
    message.model_spec.name = model
    message.model_spec.signature_name = signature
    for alias, value in inputs.items():
        tensor_codec.encode_into(message.inputs[alias], np.asarray(value))
    return message


def predicted(core, model: str, inputs: dict, signature: str = "") -> dict:
    response = predict(core, request(model, inputs, signature))
    return {alias: tensor_codec.decode(tensor) for alias, tensor in response.outputs.items()}


def signature_defs(core, model: str) -> dict:
    message = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    message.model_spec.name = model
    response = get_model_metadata(core, message)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    return dict(signature_map.signature_def)


def raises(error: type, text: str, call, *args):
    with pytest.raises(error) as caught:
        call(*args)
    assert caught.value.message == text
    return caught.value


# -- the corpus ------------------------------------------------------------------------------------


def all_layouts():
    out = []
    for model in MODELS:
        try:
            _, layouts = tflite_manifest(model)
        except AssertionError:
            return [pytest.param(None, None, id="oracle-not-built")]  # the test fails, saying so
        out += [(model, name) for name, layout in layouts.items() if layout["cases"]]
    return out


@pytest.mark.parametrize(("model", "layout"), all_layouts())
def test_every_oracle_tflite_model_answers_as_tflite_in_tensorflow(tmp_path, cores, model, layout):
    root, layouts = tflite_manifest(model or MODELS[0])
    record = layouts[layout]
    core = serve(tmp_path, {"m": layout_base(model, layout, tmp_path / "m")})
    cores.append(core)
    expected = meta_graph_pb2.MetaGraphDef.FromString((root / record["signature_defs"]).read_bytes())
    assert signature_defs(core, "m") == dict(expected.signature_def)
    for case in record["cases"]:
        inputs = {alias: read_tensor(root / p) for alias, p in case["inputs"].items()}
        response = predict(core, request("m", inputs, case["signature"]))
        assert response.model_spec.signature_name == case["signature"]
        assert response.model_spec.version.value == record["version"]
        assert set(response.outputs) == set(case["outputs"])
        for alias, path in case["outputs"].items():
            want, got = read_tensor(root / path), tensor_codec.decode(response.outputs[alias])
            assert (
                response.outputs[alias].dtype
                == expected.signature_def[case["signature"]].outputs[alias].dtype
            )
            assert got.dtype == want.dtype and got.shape == want.shape, (alias, got, want)
            np.testing.assert_allclose(got, want, rtol=case["rtol"], atol=case["atol"])


def test_native_signatures_are_not_served_as_in_tf_serving(tmp_path, cores):
    """A TF2 conversion with two TF Lite signatures: TF Serving serves the primary subgraph as a
    generated ``serving_default``; the model's own signature names are unknown keys."""
    _, layouts = tflite_manifest("tflite_dense")
    assert layouts["dense_two_native_signatures"]["native_signatures"] == ["embed", "serving_default"]
    core = serve(tmp_path, {"m": layout_base("tflite_dense", "dense_two_native_signatures", tmp_path / "m")})
    cores.append(core)
    assert list(signature_defs(core, "m")) == ["serving_default"]
    raises(
        errors.FailedPreconditionError,
        'Serving signature key "embed" not found.',
        predicted,
        core,
        "m",
        {"embed_x": np.zeros((1, 64), np.float32)},
        "embed",
    )


# -- preference and fallback -----------------------------------------------------------------------


def test_model_tflite_is_preferred_with_the_flag_and_the_saved_model_serves_without(tmp_path, cores):
    manifest = corpus.load_manifest("tflite_half_plus_two")
    both = tmp_path / "both"
    shutil.copytree(manifest["export_path"], both / "123")  # saved_model.pb and model.tflite
    saved_only = tmp_path / "saved_only"
    shutil.copytree(manifest["export_path"], saved_only / "7", ignore=shutil.ignore_patterns("model.tflite"))
    core = serve(tmp_path, {"both": both, "saved_only": saved_only})
    cores.append(core)
    tflite_defs = signature_defs(core, "both")
    assert list(tflite_defs) == ["serving_default"]
    assert tflite_defs["serving_default"].inputs["x"].name == "x"  # the TF Lite tensor, not "x:0"
    assert predicted(core, "both", {"x": np.float32([[2.0]])})["y"].tolist() == [[3.0]]
    assert {"regress_x_to_y", "classify_x_to_y"} <= set(signature_defs(core, "saved_only"))
    assert predicted(core, "saved_only", {"x": np.float32([[1.0], [3.0]])})["y"].tolist() == [[2.5], [3.5]]
    plain = ServerCore(ServerOptions(port=0, file_system_poll_wait_seconds=0))
    cores.append(plain)
    plain.reload_config(config_for([("both", both)]))
    assert {"regress_x_to_y", "serving_default"} <= set(signature_defs(plain, "both"))
    assert signature_defs(plain, "both")["serving_default"].inputs["x"].name == "x:0"


# -- request errors --------------------------------------------------------------------------------


@pytest.fixture
def dense(tmp_path, cores):
    core = serve(tmp_path, {"dense": layout_base("tflite_dense", "dense_float", tmp_path / "dense")})
    cores.append(core)
    return core


def test_request_errors_have_tf_servings_codes_and_texts(dense):
    x = np.zeros((2, 64), np.float32)
    ok = predicted(dense, "dense", {"serving_default_x": x})
    assert ok["StatefulPartitionedCall_2"].shape == (2, 8)
    raises(
        errors.FailedPreconditionError,
        'Serving signature key "nope" not found.',
        predicted,
        dense,
        "dense",
        {"serving_default_x": x},
        "nope",
    )
    raises(
        errors.InvalidArgumentError,
        "Expects arg[0] to be float but double is provided",
        predicted,
        dense,
        "dense",
        {"serving_default_x": x.astype(np.float64)},
    )
    raises(
        errors.InternalError,
        "Failed to allocate tensors",
        predicted,
        dense,
        "dense",
        {"serving_default_x": np.zeros((2, 65), np.float32)},
    )
    error = raises(
        errors.InvalidArgumentError,
        "input size does not match signature: 2!=1 len({serving_default_x,y}) != len({serving_default_x}). "
        "Sent extra: {y}. Missing but required: {}.",
        predicted,
        dense,
        "dense",
        {"serving_default_x": x, "y": x},
    )
    assert error.code == errors.INVALID_ARGUMENT
    # A failed resize leaves the interpreter able to serve the next request.
    for _ in range(3):
        assert np.array_equal(
            predicted(dense, "dense", {"serving_default_x": x})["StatefulPartitionedCall_2"],
            ok["StatefulPartitionedCall_2"],
        )


def test_session_names_a_tensor_the_primary_subgraph_lacks(dense):
    servable = dense.servable_handle(request("dense", {}).model_spec)
    session = servable.bundle.session
    raises(
        errors.InternalError,
        "Unknown tensor 'nope:0'.\n\tMissing input TFLite tensor: nope:0",
        session.run,
        ["StatefulPartitionedCall_2:0"],
        {"nope:0": np.zeros((1, 64), np.float32)},
    )
    raises(
        errors.InternalError,
        "Missing output TFLite tensor: nope:0: Unknown tensor 'nope:0'.",
        session.run,
        ["nope:0"],
        {"serving_default_x:0": np.zeros((1, 64), np.float32)},
    )
    # Only a TF name ending ":N" falls back to the TF Lite name without it (FixTfLiteTensorName).
    raises(
        errors.InternalError,
        "Unknown tensor 'serving_default_x'.\n\tMissing input TFLite tensor: serving_default_x",
        session.run,
        ["StatefulPartitionedCall_2:0"],
        {"serving_default_x": np.zeros((1, 64), np.float32)},
    )


def test_a_tf_tensor_name_finds_its_legacy_tflite_tensor(tmp_path, cores):
    base = layout_base("tflite_half_plus_two", "saved_model_half_plus_two_tflite", tmp_path / "m")
    core = serve(tmp_path, {"m": base})
    cores.append(core)
    session = core.servable_handle(request("m", {}).model_spec).bundle.session
    (y,) = session.run(["y:0"], {"x:0": np.float32([[4.0]])})  # the TF Lite tensors are "x" and "y"
    assert y.tolist() == [[4.0]]


def test_invoke_failure_is_tf_servings_internal_error(dense, monkeypatch):
    servable = dense.servable_handle(request("dense", {}).model_spec)
    pool = servable.bundle.session._pool
    wrappers = [pool.get() for _ in range(pool.size)]
    try:
        for wrapper in wrappers:
            monkeypatch.setattr(wrapper.interpreter, "invoke", _failing_invoke)
    finally:
        for wrapper in wrappers:
            pool.put(wrapper)
    raises(
        errors.InternalError,
        "Failed to invoke TfLite interpreter",
        predicted,
        dense,
        "dense",
        {"serving_default_x": np.zeros((1, 64), np.float32)},
    )


def _failing_invoke():
    raise RuntimeError("Node number 3 (FULLY_CONNECTED) failed to invoke.")


# -- load errors -----------------------------------------------------------------------------------


def model_object(model: str, layout: str):
    root, layouts = tflite_manifest(model)
    path = root / layouts[layout]["base_path"] / f"{layouts[layout]['version']:08d}" / "model.tflite"
    return schema.ModelT.InitFromPackedBuf(bytearray(path.read_bytes()), 0)


def packed(model) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def with_metadata(model, data: bytes):
    """``model`` with its signature_defs_metadata buffer replaced by ``data``."""
    (metadata,) = [m for m in model.metadata if m.name == b"signature_defs_metadata"]
    model.buffers[metadata.buffer].data = np.frombuffer(data, np.uint8)
    return model


def signature_map(entries: dict[str, bytes]) -> bytes:
    builder = flexbuffers.Builder()
    with builder.Map():
        for key, value in entries.items():
            builder.Key(key)
            builder._WriteBlob(value, True, flexbuffers.Type.STRING)
    return bytes(builder.Finish())


def corrupt_cases():
    good = lambda: model_object("tflite_half_plus_two", "saved_model_half_plus_two_tflite")  # noqa: E731
    sigdef = lambda: model_object("tflite_half_plus_two", "saved_model_half_plus_two_tflite_with_sigdef")  # noqa: E731

    def renamed_input():
        model = good()
        model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].name = None
        return packed(model)

    def duplicate_output():
        model = good()
        subgraph = model.subgraphs[0]
        other = next(
            i for i in range(len(subgraph.tensors)) if i not in (*subgraph.inputs, *subgraph.outputs)
        )
        subgraph.tensors[other].name = b"y"
        subgraph.outputs = [*subgraph.outputs, other]
        return packed(model)

    def float64_input():
        model = good()
        model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].type = schema.TensorType.FLOAT64
        return packed(model)

    def unknown_tensor():
        signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
        signature.inputs["x"].name = "nope:0"
        signature.outputs["y"].name = "y:0"
        return packed(
            with_metadata(sigdef(), signature_map({"serving_default": signature.SerializeToString()}))
        )

    def unparsable_signature():
        return packed(with_metadata(sigdef(), signature_map({"serving_default": b"\xff\xff\xff"})))

    def unreadable_map():
        return packed(with_metadata(sigdef(), b"\x01"))

    def truncated():
        whole = packed(good())
        return whole[: len(whole) // 2]

    return [
        ("empty", lambda: b"", errors.InvalidArgumentError, "Cannot build FlatBufferModel from buffer."),
        (
            "garbage",
            lambda: b"not a model" * 50,
            errors.InvalidArgumentError,
            "Cannot build FlatBufferModel from buffer.",
        ),
        (
            "truncated",
            truncated,
            errors.InvalidArgumentError,
            "Cannot build FlatBufferModel from buffer.",
        ),
        ("input_without_name", renamed_input, errors.InternalError, "Input name missing for tensor index: 0"),
        (
            "duplicate_output",
            duplicate_output,
            errors.AlreadyExistsError,
            "Output tensor name: y has multiple indices",
        ),
        ("float64_input", float64_input, errors.InternalError, "Unknown TfLite type: 11"),
        (
            "unknown_tensor",
            unknown_tensor,
            errors.InternalError,
            "Unknown tensor 'nope:0'.\n\tSignature input x references an unknown tensor",
        ),
        (
            "unparsable_signature",
            unparsable_signature,
            errors.InvalidArgumentError,
            "Invalid SignatureDefs found in TfLite model: Cannot parse signature def found in flatbuffer.",
        ),
        ("unreadable_map", unreadable_map, errors.InvalidArgumentError, None),
    ]


@pytest.mark.parametrize(
    ("name", "make", "error", "text"), corrupt_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_bad_model_tflite_fails_its_load_with_tf_servings_status(tmp_path, name, make, error, text):
    version = tmp_path / "1"
    version.mkdir()
    (version / "model.tflite").write_bytes(make())
    with pytest.raises(error) as caught:
        tflite.load_tflite_bundle(str(version), 1, 1)
    if text is None:
        assert caught.value.message.startswith("Invalid SignatureDefs found in TfLite model: Error reading")
    else:
        assert caught.value.message == text


def test_a_custom_op_litert_lacks_fails_the_load_naming_it(tmp_path):
    base = layout_base("tflite_dense", "parse_example", tmp_path / "m")
    raises(
        errors.UnimplementedError,
        "Failed to allocate tensors: the model uses custom op ParseExampleV2, which LiteRT's interpreter "
        "does not have",
        tflite.load_tflite_bundle,
        str(base / "00000001"),
        1,
        1,
    )


def test_a_corrupt_new_version_fails_and_the_previous_keeps_serving(tmp_path, cores):
    base = layout_base("tflite_half_plus_two", "saved_model_half_plus_two_tflite", tmp_path / "m")
    core = serve(tmp_path, {"m": base}, file_system_poll_wait_seconds=1, max_num_load_retries=0)
    cores.append(core)
    (base / "00000124").mkdir()
    (base / "00000124" / "model.tflite").write_bytes(b"\0" * 64)
    deadline = time.monotonic() + 30
    while not tried(core, "m", 124):
        assert time.monotonic() < deadline, "version 124 was never tried"
        time.sleep(0.1)
    (state,) = core.model_status("m", 124)
    assert state.error.code == errors.INVALID_ARGUMENT
    assert state.error.message == "Cannot build FlatBufferModel from buffer."
    response = predict(core, request("m", {"x": np.float32([[2.0]])}))
    assert response.model_spec.version.value == 123
    assert list(response.outputs["y"].float_val) == [3.0]


def tried(core, name: str, version: int) -> bool:
    try:
        return core.model_status(name, version)[0].error is not None
    except errors.NotFoundError:
        return False


# -- concurrency and batching ----------------------------------------------------------------------


def concurrent_answers(core, model: str, alias: str, output: str, batches: list[np.ndarray]) -> None:
    """Each batch's answer, asked by 16 threads at once, equals the one it gets alone."""
    alone = [predicted(core, model, {alias: b})[output] for b in batches]
    jobs = [i % len(batches) for i in range(400)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: predicted(core, model, {alias: batches[i]})[output], jobs))
    for i, answer in zip(jobs, answers, strict=True):
        assert np.array_equal(answer, alone[i]), i


def feature_batches() -> list[np.ndarray]:
    r = np.random.default_rng(7)
    return [r.normal(0, 1, (rows, 64)).astype(np.float32) for rows in (1, 2, 3, 5, 8, 13)]


def test_requests_are_thread_safe_on_a_pool_of_interpreters(dense):
    concurrent_answers(dense, "dense", "serving_default_x", "StatefulPartitionedCall_2", feature_batches())


def test_interpreters_per_pool_batches_concurrent_requests_in_the_session(tmp_path, cores):
    base = layout_base("tflite_dense", "dense_float", tmp_path / "m")
    core = serve(tmp_path, {"m": base}, num_tflite_interpreters_per_pool=4)
    cores.append(core)
    session = core.servable_handle(request("m", {}).model_spec).bundle.session
    scheduler = session._scheduler
    assert scheduler is not None and scheduler.max_execution_batch_size == 125  # ceil(500 / 4)
    concurrent_answers(core, "m", "serving_default_x", "StatefulPartitionedCall_2", feature_batches())
    assert scheduler.batches_run < scheduler.tasks_run  # some requests shared a batch
    raises(
        errors.InvalidArgumentError,
        "Task size 501 is larger than maximum input batch size 500",
        predicted,
        core,
        "m",
        {"serving_default_x": np.zeros((501, 64), np.float32)},
    )


def test_enable_batching_wraps_the_tflite_session(tmp_path, cores):
    parameters = tmp_path / "batching.pbtxt"
    parameters.write_text("max_batch_size { value: 32 } batch_timeout_micros { value: 2000 }\n")
    base = layout_base("tflite_dense", "dense_float", tmp_path / "m")
    core = serve(tmp_path, {"m": base}, enable_batching=True, batching_parameters_file=str(parameters))
    cores.append(core)
    session = core.servable_handle(request("m", {}).model_spec).bundle.session
    assert type(session).__name__ == "BatchingSession"
    concurrent_answers(core, "m", "serving_default_x", "StatefulPartitionedCall_2", feature_batches()[:4])


# -- warmup, unload, the missing extra -------------------------------------------------------------


def warmup_file(version: Path, signature: str, x: np.ndarray) -> None:
    log = prediction_log_pb2.PredictionLog()
    log.predict_log.request.CopyFrom(request("m", {"x": x}, signature))
    (version / "assets.extra").mkdir()
    (version / "assets.extra" / "tf_serving_warmup_requests").write_bytes(
        encode_record(log.SerializeToString())
    )


def test_warmup_replays_through_the_tflite_session(tmp_path, cores):
    base = layout_base("tflite_half_plus_two", "saved_model_half_plus_two_tflite", tmp_path / "m")
    warmup_file(base / "00000123", "", np.float32([[1.0]]))
    core = serve(tmp_path, {"m": base})
    cores.append(core)
    assert predicted(core, "m", {"x": np.float32([[2.0]])})["y"].tolist() == [[3.0]]
    bad = layout_base("tflite_half_plus_two", "saved_model_half_plus_two_tflite", tmp_path / "bad")
    warmup_file(bad / "00000123", "nope", np.float32([[1.0]]))
    options = ServerOptions(
        port=0, file_system_poll_wait_seconds=0, prefer_tflite_model=True, max_num_load_retries=0
    )
    failing = ServerCore(options)
    cores.append(failing)
    with pytest.raises(errors.OpError) as caught:
        failing.reload_config(config_for([("bad", bad)]))
    assert caught.value.message.endswith(
        'due to error: FAILED_PRECONDITION: Serving signature key "nope" not found.}, }'
    ), caught.value.message


def test_an_unloaded_version_releases_its_interpreters(tmp_path):
    base = layout_base("tflite_dense", "dense_float", tmp_path / "m")
    loaded = tflite.load_tflite_bundle(str(base / "00000001"), 2, 4)
    threads = loaded.session._scheduler._threads
    held = weakref.ref(loaded.session._pool.get().interpreter)
    loaded.close()
    assert not any(thread.is_alive() for thread in threads)
    del loaded
    gc.collect()
    assert held() is None


def test_without_litert_the_flag_is_one_clear_start_up_error(monkeypatch):
    def missing():
        raise ImportError("No module named 'ai_edge_litert'")

    monkeypatch.setattr(tflite_bundle, "_interpreter_class", missing)
    options = ServerOptions(model_base_path="/models/m", prefer_tflite_model=True)
    text = (
        "--prefer_tflite_model=true serves TensorFlow Lite models through LiteRT's interpreter, which is "
        "not installed: pip install 'savedmodel-server[tflite]' (the ai-edge-litert package)"
    )
    raises(errors.FailedPreconditionError, text, server_module.check_options, options)
    raises(errors.FailedPreconditionError, text, tflite.load_tflite_bundle, "/models/m/1", 1, 1)
    server_module.check_options(options.replace(prefer_tflite_model=False))  # the flag off: no check


def test_response_dtype_of_an_int8_model_is_int8(tmp_path, cores):
    core = serve(tmp_path, {"q": layout_base("tflite_dense", "dense_int8", tmp_path / "q")})
    cores.append(core)
    response = predict(core, request("q", {"serving_default_x": np.zeros((1, 64), np.int8)}))
    assert response.outputs["StatefulPartitionedCall_2"].dtype == types_pb2.DT_INT8
    raises(
        errors.InvalidArgumentError,
        "Expects arg[0] to be int8 but float is provided",
        predicted,
        core,
        "q",
        {"serving_default_x": np.zeros((1, 64), np.float32)},
    )
