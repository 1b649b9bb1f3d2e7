"""The image built from ``docker/Dockerfile``, run as a TF Serving user runs tensorflow/serving.

``docker run -v <model>:/models/half_plus_two -e MODEL_NAME=half_plus_two IMAGE --port=... ``:
the container serves the mounted model on gRPC (and REST), runs as an unprivileged user with the
server as PID 1, and ``docker stop`` with its default 10 s timeout drains it under load: every
call sent before the stop is answered, the later ones are answered or refused with UNAVAILABLE,
none is CANCELLED, and the container exits 0 (not 137: not killed). A ``--model_config_file``
passed through ``docker run`` serves two models with ``--num_workers=2``. Containers use the
host network on free loopback ports (the image's own 8500/8501 are overridden by flags).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apis.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.deploy import docker_env
from tests.e2e.conftest import MODELS_DIR, free_port
from tests.e2e.grpc_load import PredictLoad, count

# The REST API (--rest_api_port, /healthz, /readyz) is built on another branch: until it is on
# main these tests are expected to fail, and strict, so that they must pass once it is.


def predict_request(name: str, alias: str, value: np.ndarray) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.inputs[alias].CopyFrom(make_tensor_proto(value))
    return request


def half_plus_two_request() -> predict_pb2.PredictRequest:
    return predict_request("half_plus_two", "x", np.float32([[1.0], [2.0], [5.0]]))


def wait_serving(address: str, container, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if not container.running():
                break
            time.sleep(0.2)
    raise AssertionError(f"container not serving on {address}:\n{container.logs()}")


def predict(address: str, request: predict_pb2.PredictRequest) -> dict[str, np.ndarray]:
    with grpc.insecure_channel(address) as channel:
        reply = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=30)
    return {key: make_ndarray(value) for key, value in reply.outputs.items()}


def run_half_plus_two(container, model_dir, *args: str):
    grpc_port, rest_port = free_port(), free_port()
    served = container(
        f"--port={grpc_port}",
        f"--rest_api_port={rest_port}",
        *args,
        env={"MODEL_NAME": "half_plus_two"},
        volumes={model_dir("half_plus_two"): "/models/half_plus_two:ro"},
        options=["--health-interval=1s"],
    )
    address = f"127.0.0.1:{grpc_port}"
    wait_serving(address, served)
    return served, address, rest_port


def test_the_build_context_holds_the_sources_only(docker_daemon, tmp_path):
    """.dockerignore: what ``docker build`` sends (exported by a build that copies it all) is the
    package, pyproject.toml, README.md and the image's two scripts; never .oracle, .venv,
    models, tests, .git or caches."""
    dockerfile = "FROM scratch\nCOPY . /\n"
    result = subprocess.run(
        [
            docker_env.docker_client(),
            "build",
            "-q",
            "-f",
            "-",
            "--output",
            f"type=local,dest={tmp_path}",
            ".",
        ],
        input=dockerfile,
        capture_output=True,
        text=True,
        cwd=docker_env.REPO_ROOT,
        env=dict(os.environ, DOCKER_BUILDKIT="1"),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    top = {p.name for p in tmp_path.iterdir()}
    assert top == {"pyproject.toml", "README.md", "apis", "runtime", "loader", "serving", "docker"}
    assert {p.name for p in (tmp_path / "docker").iterdir()} == {"tf_serving_entrypoint.sh", "healthcheck.py"}
    junk = [p for p in tmp_path.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    assert not junk, junk[:5]


def test_a_mounted_model_is_served_over_grpc_and_docker_stop_drains_it_under_load(container, model_dir):
    served, address, _ = run_half_plus_two(container, model_dir)
    outputs = predict(address, half_plus_two_request())
    np.testing.assert_allclose(outputs["y"], [[2.5], [3.0], [4.5]])
    # TF Serving's contract: its flags from MODEL_NAME and MODEL_BASE_PATH, then ours; the
    # server is PID 1 (it gets docker stop's SIGTERM), run by an unprivileged user.
    command = served.exec("cat", "/proc/1/cmdline").replace("\0", " ")
    assert (
        "/usr/bin/tensorflow_model_server --port=8500 --rest_api_port=8501 --model_name=half_plus_two"
        in command
    )
    assert "--model_base_path=/models/half_plus_two" in command
    assert served.exec("id", "-u").strip() == "1000"
    logs = served.logs()
    assert "Serving model half_plus_two version 123" in logs
    assert f"Running gRPC ModelServer at 0.0.0.0:{address.rsplit(':', 1)[1]}" in logs

    stopped: dict[str, float] = {}
    with PredictLoad(address, half_plus_two_request().SerializeToString()) as load:
        time.sleep(1.0)

        def stop() -> None:
            stopped["at"] = time.monotonic()
            stopped["exit"] = served.stop()  # docker stop's default: SIGTERM, SIGKILL after 10 s
            stopped["took"] = time.monotonic() - stopped["at"]

        stopper = threading.Thread(target=stop)
        stopper.start()
        stopper.join(60)
        time.sleep(0.2)
    before = count(c for c in load.calls if c.sent < stopped["at"])
    after = count(c for c in load.calls if c.sent >= stopped["at"])
    print(f"docker stop took {stopped['took']:.1f}s; sent before: {before}; after: {after}")
    assert stopped["exit"] == 0, served.logs()  # drained, not killed (137)
    assert set(before) == {"OK"}, before
    assert set(after) <= {"OK", "UNAVAILABLE"}, after
    assert "Lame duck" in served.logs() and "Server stopped" in served.logs()


def test_a_model_config_file_passed_through_serves_two_models_with_two_workers(container, tmp_path):
    models = tmp_path / "models"
    for name, version in (("half_plus_two", "00000123"), ("keras_mlp", "1")):
        shutil.copytree(MODELS_DIR / name / version, models / name / version)
    (models / "models.config").write_text(
        "model_config_list {\n"
        '  config { name: "half_plus_two" base_path: "/models/half_plus_two" model_platform: "tensorflow" }\n'
        '  config { name: "mlp" base_path: "/models/keras_mlp" model_platform: "tensorflow" }\n'
        "}\n"
    )
    grpc_port = free_port()
    served = container(
        f"--port={grpc_port}",
        "--rest_api_port=0",  # the HEALTHCHECK then asks gRPC health
        "--model_config_file=/models/models.config",
        "--num_workers=2",
        volumes={str(models): "/models:ro"},
        options=["--health-interval=1s"],
    )
    served.wait_for_log("All 2 workers are serving")
    address = f"127.0.0.1:{grpc_port}"
    np.testing.assert_allclose(predict(address, half_plus_two_request())["y"], [[2.5], [3.0], [4.5]])
    features = np.float32([[3.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0]])
    probabilities = predict(address, predict_request("mlp", "features", features))["output_0"]
    assert probabilities.shape == (2, 3) and list(probabilities.argmax(axis=1)) == [0, 2]
    np.testing.assert_allclose(probabilities.sum(axis=1), [1.0, 1.0], rtol=1e-5)
    logs = served.logs()
    assert logs.count("Serving model half_plus_two version 123") == 2  # once per worker
    assert logs.count("Serving model mlp version 1") == 2
    served.wait_healthy(timeout=60)
    assert served.stop() == 0, served.logs()  # the supervisor, PID 1, drains both workers
    assert served.logs().count("exited with status 0") == 2


def test_rest_predict_and_the_healthcheck_answer_through_the_rest_port(container, model_dir):
    served, address, rest_port = run_half_plus_two(container, model_dir)
    base = f"http://127.0.0.1:{rest_port}"
    with urllib.request.urlopen(f"{base}/v1/models/half_plus_two", timeout=10) as reply:
        status = json.load(reply)
    assert status["model_version_status"][0]["state"] == "AVAILABLE"
    body = json.dumps({"instances": [[1.0], [2.0], [5.0]]}).encode()
    predict_url = f"{base}/v1/models/half_plus_two:predict"
    with urllib.request.urlopen(urllib.request.Request(predict_url, data=body), timeout=10) as reply:
        assert json.load(reply) == {"predictions": [[2.5], [3.0], [4.5]]}
    served.wait_healthy(timeout=60)  # the image's HEALTHCHECK: GET /readyz on --rest_api_port
    assert served.stop() == 0
