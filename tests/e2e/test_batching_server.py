"""``model_server --enable_batching`` end to end: a process with TF Serving's batching flags,
driven by concurrent gRPC clients (ours and tensorflow-serving-api's), its answers checked
against TensorFlow's, its log showing the batches it formed, and SIGTERM with calls queued."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from apis.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from serving.inference import tensor_codec
from tests.e2e.conftest import server_command
from tests.oracle import corpus, oracle_dir

REPO = Path(__file__).resolve().parents[2]
PARAMS = """
max_batch_size { value: 8 }
batch_timeout_micros { value: 20000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 2 }
allowed_batch_sizes: 4
allowed_batch_sizes: 8
"""


def read(path: Path) -> np.ndarray:
    return tensor_codec.decode(tensor_pb2.TensorProto.FromString(path.read_bytes()))


def mlp_case():
    manifest = corpus.load_manifest("batching_mlp")
    case = next(c for c in manifest["cases"] if c["signature"] == "serving_default")
    features = read(manifest["dir"] / case["inputs"]["features"])
    ((key, file),) = case["outputs"].items()
    return manifest, case, features, key, read(manifest["dir"] / file)


def write_config(tmp_path: Path, params: str = PARAMS) -> tuple[Path, Path]:
    """Models "mlp" (the oracle's batching_mlp) and "half" (TF1 half_plus_two); the batching file."""
    manifest = corpus.load_manifest("batching_mlp")
    shutil.copytree(manifest["export_path"], tmp_path / "mlp" / "1")
    shutil.copytree(REPO / "models" / "half_plus_two", tmp_path / "half")
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f'  config {{ name: "mlp" base_path: "{tmp_path / "mlp"}" model_platform: "tensorflow" }}\n'
        f'  config {{ name: "half" base_path: "{tmp_path / "half"}" model_platform: "tensorflow" }}\n'
        "}\n"
    )
    batching = tmp_path / "batching.txt"
    batching.write_text(params)
    return config, batching


def queue_summary(output: str) -> tuple[int, int, int]:
    """The tasks, batches and refusals the mlp's serving_default queue logged at the stop."""
    summary = re.search(
        r"Batching of \{name: mlp version: 1\} \{inputs: serving_default_features:0.*?: (\d+) tasks in (\d+) "
        r"batches.* (\d+) refused",
        output,
    )
    assert summary, output
    return tuple(map(int, summary.groups()))


def predict(stub, model: str, alias: str, value: np.ndarray, timeout: float = 30):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    tensor_codec.encode_content_into(request.inputs[alias], value)
    return stub.Predict(request, timeout=timeout)


def test_concurrent_clients_are_batched_and_get_tensorflows_answers(model_server, tmp_path):
    _, case, features, key, expected = mlp_case()
    config, batching = write_config(tmp_path)
    server = model_server(
        f"--model_config_file={config}", "--enable_batching", f"--batching_parameters_file={batching}"
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    rows = list(range(len(features))) * 6

    def one(i: int) -> np.ndarray:
        return tensor_codec.decode(predict(stub, "mlp", "features", features[i : i + 1]).outputs[key])

    with futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, rows))
    for i, value in zip(rows, got):
        np.testing.assert_allclose(value, expected[i : i + 1], rtol=case["rtol"], atol=case["atol"])

    with pytest.raises(grpc.RpcError) as raised:  # more rows than max_batch_size
        predict(stub, "mlp", "features", np.concatenate([features, features[:1]]))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == "Task size 9 is larger than maximum input batch size 8"
    assert tensor_codec.decode(predict(stub, "half", "x", np.float32([[2.0]])).outputs["y"]).tolist() == [
        [3.0]
    ]

    log = server.output()
    assert "Wrapping session to perform batch processing" in log
    assert re.search(
        r"Batching parameters of servable \{name: mlp version: 1\}: max_batch_size=8 batch_timeout_micros=20000 "
        r"max_enqueued_batches=100 num_batch_threads=2 thread_pool_name=batch_threads allowed_batch_sizes=\[4,8\]",
        log,
    ), log
    assert server.stop() == 0
    tasks, batches, refused = queue_summary(server.output())
    assert (tasks, refused) == (len(rows), 1)
    assert batches < tasks / 2  # requests ran several to a batch


def test_adaptive_batching_answers_as_tensorflow_batched_or_not(model_server, tmp_path):
    """``--adaptive_batch_timeout``: a lone client's calls run unbatched (each a batch of one in
    the queue's summary), concurrent clients' as the climb chooses; every answer TensorFlow's."""
    _, case, features, key, expected = mlp_case()
    config, batching = write_config(tmp_path, PARAMS.replace("20000", "2000"))
    server = model_server(
        f"--model_config_file={config}",
        "--enable_batching",
        f"--batching_parameters_file={batching}",
        "--adaptive_batch_timeout",
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())

    def one(i: int) -> np.ndarray:
        return tensor_codec.decode(predict(stub, "mlp", "features", features[i : i + 1]).outputs[key])

    alone = list(range(len(features))) * 3
    for i in alone:
        np.testing.assert_allclose(one(i), expected[i : i + 1], rtol=case["rtol"], atol=case["atol"])
    together = list(range(len(features))) * 40
    with futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, together))
    for i, value in zip(together, got):
        np.testing.assert_allclose(value, expected[i : i + 1], rtol=case["rtol"], atol=case["atol"])
    assert server.stop() == 0
    tasks, batches, refused = queue_summary(server.output())
    assert (tasks, refused) == (len(alone) + len(together), 0)
    assert len(alone) <= batches <= tasks


CLIENT = textwrap.dedent(
    r"""
    import json, sys
    from concurrent import futures
    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import (classification_pb2, inference_pb2, predict_pb2,
                                         prediction_service_pb2_grpc, regression_pb2)

    address, features_file = sys.argv[1], sys.argv[2]
    features = np.load(features_file)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(address))

    def predict(rows):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "mlp"
        request.inputs["features"].CopyFrom(tf.make_tensor_proto(rows))
        response = stub.Predict(request, 30)
        return {k: tf.make_ndarray(v).tolist() for k, v in response.outputs.items()}

    def examples(request, *xs):
        for x in xs:
            request.input.example_list.examples.add().features.feature["x"].float_list.value.extend([x])
        return request

    def classify(x):
        request = classification_pb2.ClassificationRequest()
        request.model_spec.name = "half"
        request.model_spec.signature_name = "classify_x_to_y"
        response = stub.Classify(examples(request, x), 30)
        return [c.classes[0].score for c in response.result.classifications]

    def regress(xs):
        request = regression_pb2.RegressionRequest()
        request.model_spec.name = "half"
        request.model_spec.signature_name = "regress_x_to_y"
        return [r.value for r in stub.Regress(examples(request, *xs), 30).result.regressions]

    def multi(x):
        request = inference_pb2.MultiInferenceRequest()
        for signature, method in (("regress_x_to_y", "regress"), ("classify_x_to_y", "classify")):
            task = request.tasks.add()
            task.model_spec.name = "half"
            task.model_spec.signature_name = signature
            task.method_name = "tensorflow/serving/" + method
        response = stub.MultiInference(examples(request, x), 30)
        return [response.results[0].regression_result.regressions[0].value,
                response.results[1].classification_result.classifications[0].classes[0].score]

    out = {}
    with futures.ThreadPoolExecutor(16) as pool:
        out["predict"] = list(pool.map(lambda i: predict(features[i : i + 1]), [i % len(features) for i in range(48)]))
        out["classify"] = list(pool.map(classify, [float(i) for i in range(16)]))
        out["regress"] = list(pool.map(regress, [[float(i), float(i + 1)] for i in range(16)]))
        out["multi"] = list(pool.map(multi, [float(i) for i in range(16)]))
    try:
        predict(np.concatenate([features, features[:1]]))
    except grpc.RpcError as e:
        out["too_big"] = [e.code().name, e.details()]
    print(json.dumps(out))
    """
)


def test_tensorflow_serving_api_stubs_against_a_batching_server(model_server, tmp_path):
    python = oracle_dir() / "tf221" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no oracle venv at {python}: run `python -m tests.oracle build`")
    _, case, features, key, expected = mlp_case()
    config, batching = write_config(tmp_path)
    np.save(tmp_path / "features.npy", features)
    server = model_server(
        f"--model_config_file={config}", "--enable_batching", f"--batching_parameters_file={batching}"
    )
    result = subprocess.run(
        [str(python), "-c", CLIENT, server.address, str(tmp_path / "features.npy")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    for i, outputs in enumerate(out["predict"]):
        row = i % len(features)
        np.testing.assert_allclose(
            outputs[key], expected[row : row + 1], rtol=case["rtol"], atol=case["atol"]
        )
    assert out["classify"] == [[0.5 * i + 2] for i in range(16)]
    assert out["regress"] == [[0.5 * i + 2, 0.5 * (i + 1) + 2] for i in range(16)]
    assert out["multi"] == [[0.5 * i + 2, 0.5 * i + 2] for i in range(16)]
    assert out["too_big"] == ["INVALID_ARGUMENT", "Task size 9 is larger than maximum input batch size 8"]
    assert server.stop() == 0
    assert re.search(r"Batching of \{name: half version: 123\} \{inputs: tf_example:0", server.output())


def test_sigterm_finishes_the_calls_queued_in_batches(model_server, tmp_path):
    config, batching = write_config(tmp_path, PARAMS.replace("20000", "3000000"))  # batches wait 3 s
    server = model_server(
        f"--model_config_file={config}", "--enable_batching", f"--batching_parameters_file={batching}"
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    results: list = [None] * 3

    def call(i):
        try:
            results[i] = predict(stub, "half", "x", np.float32([[float(i)]])).outputs["y"]
        except grpc.RpcError as e:
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10  # wait until the three calls sit in the queue
    while "Predict" not in server.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    server.proc.send_signal(15)
    for t in threads:
        t.join(20)
    assert [tensor_codec.decode(r).tolist() for r in results] == [[[2.0]], [[2.5]], [[3.0]]], results
    assert server.wait_exit() == 0
    assert re.search(r"Batching of \{name: half version: 123\}.*: 3 tasks in 1 batches", server.output())


def test_per_model_batching_parameters_from_the_version_directory(model_server, tmp_path):
    config, batching = write_config(tmp_path, "num_batch_threads { value: 1 }\n")
    (tmp_path / "half" / "00000123" / "batching_params.pbtxt").write_text(
        "max_batch_size { value: 2 }\nbatch_timeout_micros { value: 1000 }\n"
    )
    server = model_server(
        f"--model_config_file={config}",
        "--enable_batching",
        f"--batching_parameters_file={batching}",
        "--enable_per_model_batching_parameters",
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    with pytest.raises(grpc.RpcError) as raised:
        predict(stub, "half", "x", np.float32([[1.0], [2.0], [3.0]]))
    assert raised.value.details() == "Task size 3 is larger than maximum input batch size 2"
    assert tensor_codec.decode(predict(stub, "half", "x", np.float32([[1.0], [2.0]])).outputs["y"]).shape == (
        2,
        1,
    )
    _, _, features, _, _ = mlp_case()  # no batching_params.pbtxt: not batched, any size
    assert predict(stub, "mlp", "features", np.concatenate([features] * 200)).outputs
    log = server.output()
    assert (
        "Batching parameters of servable {name: half version: 123}: max_batch_size=2 batch_timeout_micros=1000"
        in log
    )
    assert "num_batch_threads=1 thread_pool_name=batch_threads" in log
    assert "Servable {name: mlp version: 1}: no batching_params.pbtxt in its directory" in log
    assert server.stop() == 0


def start_and_fail(*flags: str) -> str:
    result = subprocess.run(
        [*server_command(), "--port=0", "--grpc_socket_path=/tmp/unused-batching.sock", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin:" + str(Path(sys.executable).parent)},
    )
    assert result.returncode == 255, result.stdout + result.stderr
    return result.stdout


def test_batching_parameters_tf_serving_refuses_fail_the_start_with_its_texts(tmp_path):
    config, batching = write_config(tmp_path, "num_batch_threads { value: 0 }")
    out = start_and_fail(
        f"--model_config_file={config}", "--enable_batching", f"--batching_parameters_file={batching}"
    )
    assert "Failed to start server. Error: INVALID_ARGUMENT: num_batch_threads must be positive; was 0" in out
    batching.write_text("max_batch_size { value: 8 } allowed_batch_sizes: 4")
    out = start_and_fail(
        f"--model_config_file={config}",
        "--enable_batching",
        f"--batching_parameters_file={batching}",
        "--max_num_load_retries=0",
    )
    assert (
        "due to error: INVALID_ARGUMENT: Last entry in allowed_batch_sizes must match max_batch_size; last "
        "entry was 4; expected 8}"
    ) in out
    batching.write_text("max_batch_size: 8")
    out = start_and_fail(
        f"--model_config_file={config}", "--enable_batching", f"--batching_parameters_file={batching}"
    )
    assert f"Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: '{batching}'" in out
    out = start_and_fail(f"--model_config_file={config}", f"--batching_parameters_file={batching}")
    assert (
        "server_options.batching_parameters_file is set without setting server_options.enable_batching to true."
    ) in out


def test_warmup_requests_go_through_the_batching_session(model_server, model_dir, tmp_path):
    from tests.e2e.test_warmup import predict_log, write_warmup

    base = Path(model_dir("keras_mlp"))
    write_warmup(
        base / "1", [predict_log(), predict_log(features=((1, 2, 3, 4), (4, 3, 2, 1))), predict_log()]
    )
    batching = tmp_path / "batching.txt"
    batching.write_text("max_batch_size { value: 2 }\n")
    server = model_server(
        f"--model_base_path={base}",
        "--model_name=keras_mlp",
        "--num_request_iterations_for_warmup=2",
        "--enable_batching",
        f"--batching_parameters_file={batching}",
    )
    assert server.output().index("Wrapping session to perform batch processing") < server.output().index(
        "Starting to read warmup data for model at"
    )
    assert server.stop() == 0
    # 3 records, twice: 6 tasks ran through the queue of serving_default's tensors, and nothing else
    assert re.search(
        r"Batching of \{name: keras_mlp version: 1\} \{[^}]*\}: 6 tasks in \d+ batches", server.output()
    )


def test_batching_metrics_count_the_tasks_and_batches(model_server, tmp_path, free_port):
    """The Prometheus page of a batching server: input_batch_size counts every task (a row
    each), processed_batch_size every batch with its rows (padding included), padding_size
    the padding, queuing_latency every task; the queue depth gauge names the queue."""
    from prometheus_client.parser import text_string_to_metric_families

    _, _, features, _, _ = mlp_case()
    config, batching = write_config(tmp_path)
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }\n")
    rest_port = free_port()
    server = model_server(
        f"--model_config_file={config}",
        "--enable_batching",
        f"--batching_parameters_file={batching}",
        f"--rest_api_port={rest_port}",
        f"--monitoring_config_file={monitoring}",
    )
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    rows = list(range(len(features))) * 4
    with futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: predict(stub, "mlp", "features", features[i : i + 1]), rows))
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics") as page:
        families = {f.name: f for f in text_string_to_metric_families(page.read().decode())}

    def total(family: str, suffix: str, **labels) -> float:
        return sum(
            s.value
            for s in families[family].samples
            if s.name == family + suffix and labels.items() <= s.labels.items()
        )

    inputs = ":tensorflow:serving:batching:input_batch_size"
    assert total(inputs, "_count", model_name="mlp") == len(rows)
    assert total(inputs, "_sum", model_name="mlp") == len(rows)
    processed = ":tensorflow:serving:batching:processed_batch_size"
    batches = total(processed, "_count", model_name="mlp")
    assert 0 < batches < len(rows)
    padding = total(":tensorflow:serving:batching:padding_size", "_sum", model_name="mlp")
    assert total(processed, "_sum", model_name="mlp") == len(rows) + padding
    queuing = ":tensorflow:serving:batching_session:queuing_latency"
    assert total(queuing, "_count", thread_pool_name="batch_threads") == len(rows)
    depth = families["savedmodel_server_batching_queue_depth"].samples
    assert any(s.labels["model_name"] == "mlp" and s.value == 0 for s in depth), depth
    assert server.stop() == 0
