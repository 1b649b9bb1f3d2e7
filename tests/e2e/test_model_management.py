"""model_server as a process on real model directories: TF Serving's integration scenarios for
model management (tensorflow_model_server_test.py): status, configs, reloads, channel arguments,
unix sockets, hot swaps under load, half-written versions, health, reflection, SIGTERM.

Every test skips until ``models/half_plus_two`` exists and our loader loads it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time

import grpc
import pytest

from apis.tensorflow.core.framework import types_pb2
from apis.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from apis.tensorflow_serving.config import model_server_config_pb2

from .conftest import requires_model

MODEL = "half_plus_two"
ORIGINAL_VERSION = "00000123"
State = get_model_status_pb2.ModelVersionStatus.State
RPC_TIMEOUT = 20.0


@pytest.fixture(autouse=True)
def _needs_model():
    requires_model(MODEL)


def predict(channel, name, x=2.0, version=None, timeout=RPC_TIMEOUT):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    tensor = request.inputs["x"]
    tensor.dtype = types_pb2.DT_FLOAT
    tensor.tensor_shape.dim.add().size = 1
    tensor.tensor_shape.dim.add().size = 1
    tensor.float_val.append(x)
    reply = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=timeout)
    return reply.outputs["y"].float_val[0], reply.model_spec.version.value


def status(channel, name):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    try:
        reply = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(request, timeout=RPC_TIMEOUT)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return {}
        raise
    return {s.version: (s.state, s.status.error_code) for s in reply.model_version_status}


def wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def config_text(*models, policy=""):
    entries = "".join(
        f'config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow" {policy} }}\n'
        for name, base in models
    )
    return f"model_config_list {{\n{entries}}}\n"


def test_get_model_status(model_server, model_dir):
    base = model_dir(MODEL)
    server = model_server(f"--model_base_path={base}")
    assert status(server.channel(), "default") == {123: (State.AVAILABLE, 0)}
    assert predict(server.channel(), "default") == (3.0, 123)


def test_serves_the_latest_version(model_server, model_dir):
    base = model_dir(MODEL, versions={ORIGINAL_VERSION: "1"})
    shutil.copytree(os.path.join(base, "1"), os.path.join(base, "0002"))
    server = model_server(f"--model_base_path={base}", f"--model_name={MODEL}")
    assert status(server.channel(), MODEL) == {2: (State.AVAILABLE, 0)}
    assert predict(server.channel(), MODEL)[1] == 2


def test_good_model_config(model_server, model_dir, tmp_path):
    config = tmp_path / "good_model_config.conf"
    config.write_text(
        config_text(("half_plus_two", model_dir(MODEL)), ("half_plus_two_copy", model_dir(MODEL)))
    )
    server = model_server(f"--model_config_file={config}")
    assert predict(server.channel(), "half_plus_two") == (3.0, 123)
    assert predict(server.channel(), "half_plus_two_copy") == (3.0, 123)


def test_model_config_reload_with_polling(model_server, model_dir, tmp_path):
    config = tmp_path / "model_config.txt"
    config.write_text(config_text(("first", model_dir(MODEL))))
    server = model_server(f"--model_config_file={config}", "--model_config_file_poll_wait_seconds=1")
    assert predict(server.channel(), "first")[1] == 123
    config.write_text(config_text(("second", model_dir(MODEL))))
    wait_for(lambda: status(server.channel(), "second") == {123: (State.AVAILABLE, 0)}, what="second model")
    assert predict(server.channel(), "second")[0] == 3.0
    wait_for(lambda: status(server.channel(), "first") == {123: (State.END, 0)}, what="first model unloaded")


def test_model_config_reload_with_zero_poll_period(model_server, model_dir, tmp_path):
    config = tmp_path / "model_config.txt"
    config.write_text(config_text(("first", model_dir(MODEL))))
    server = model_server(f"--model_config_file={config}", "--model_config_file_poll_wait_seconds=0")
    config.write_text(config_text(("second", model_dir(MODEL))))
    time.sleep(2)
    assert predict(server.channel(), "first")[1] == 123
    assert status(server.channel(), "second") == {}


def test_bad_config_while_polling_keeps_serving(model_server, model_dir, tmp_path):
    config = tmp_path / "model_config.txt"
    config.write_text(config_text(("first", model_dir(MODEL))))
    server = model_server(f"--model_config_file={config}", "--model_config_file_poll_wait_seconds=1")
    config.write_text("improperly formatted file")
    wait_for(
        lambda: "Failed to read ModelServerConfig file: Invalid protobuf file" in server.output(), what="log"
    )
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in server.output()
    assert predict(server.channel(), "first") == (3.0, 123)


def test_specific_version_policy(model_server, model_dir, tmp_path):
    base = model_dir(MODEL, versions={ORIGINAL_VERSION: "1"})
    shutil.copytree(os.path.join(base, "1"), os.path.join(base, "2"))
    config = tmp_path / "specific.config"
    config.write_text(config_text(("m", base), policy="model_version_policy { specific { versions: 1 } }"))
    server = model_server(f"--model_config_file={config}")
    assert status(server.channel(), "m") == {1: (State.AVAILABLE, 0)}
    assert predict(server.channel(), "m") == (3.0, 1)


def test_good_grpc_channel_arguments(model_server, model_dir):
    server = model_server(
        f"--model_base_path={model_dir(MODEL)}",
        "--grpc_channel_arguments=grpc.max_connection_age_ms=2000,grpc.lb_policy_name=grpclb",
    )
    assert predict(server.channel(), "default") == (3.0, 123)


def test_unix_socket(model_server, model_dir, tmp_path):
    socket_path = str(tmp_path / "tf-serving.sock")
    server = model_server(f"--model_base_path={model_dir(MODEL)}", f"--grpc_socket_path={socket_path}")
    assert predict(server.unix_channel(socket_path), "default") == (3.0, 123)
    assert predict(server.channel(), "default") == (3.0, 123)


def test_unix_socket_only(model_server, model_dir, tmp_path):
    socket_path = str(tmp_path / "only.sock")
    server = model_server(
        f"--model_base_path={model_dir(MODEL)}", "--port=0", f"--grpc_socket_path={socket_path}", wait=False
    )
    server.wait_ready(target=f"unix:{socket_path}")
    assert predict(server.unix_channel(socket_path), "default") == (3.0, 123)


def test_version_hot_swap_under_load(model_server, model_dir):
    base = model_dir(MODEL, versions={ORIGINAL_VERSION: "1"})
    server = model_server(f"--model_base_path={base}", "--file_system_poll_wait_seconds=1")
    failures, versions, done = [], [], threading.Event()

    def client():
        channel = server.new_channel()
        while not done.is_set():
            try:
                versions.append(predict(channel, "default", timeout=10)[1])
            except grpc.RpcError as e:
                failures.append(f"{e.code()}: {e.details()}")

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    # A plain copy: the directory is visible (and half-written) while it is being copied.
    shutil.copytree(os.path.join(base, "1"), os.path.join(base, "2"))
    wait_for(
        lambda: status(server.channel(), "default") == {2: (State.AVAILABLE, 0), 1: (State.END, 0)},
        what="version 2 served and version 1 unloaded",
    )
    time.sleep(0.3)
    done.set()
    for t in threads:
        t.join()
    assert failures == []
    assert versions[0] == 1 and versions[-1] == 2
    assert set(versions) == {1, 2}


def test_half_written_version_is_not_served_until_complete(model_server, model_dir, tmp_path):
    base = model_dir(MODEL, versions={ORIGINAL_VERSION: "1"})
    server = model_server(
        f"--model_base_path={base}", "--max_num_load_retries=0", "--load_retry_interval_micros=100000"
    )
    partial = os.path.join(base, "2")
    os.makedirs(partial)
    shutil.copy(os.path.join(base, "1", "saved_model.pb"), partial)  # variables/ not copied yet
    wait_for(
        lambda: status(server.channel(), "default").get(2, (0,))[0] == State.END, what="version 2 failed"
    )
    version_2 = status(server.channel(), "default")[2]
    assert version_2[1] != 0  # the failed load's error code
    assert predict(server.channel(), "default") == (3.0, 1)
    for name in os.listdir(os.path.join(base, "1")):
        src = os.path.join(base, "1", name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(partial, name))
    wait_for(
        lambda: status(server.channel(), "default").get(2) == (State.AVAILABLE, 0), what="version 2 loaded"
    )
    wait_for(lambda: predict(server.channel(), "default")[1] == 2, what="requests served by version 2")


def test_handle_reload_config_request(model_server, model_dir):
    first = model_dir(MODEL)
    server = model_server(f"--model_base_path={first}", f"--model_name={MODEL}")
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel())
    config = model_server_config_pb2.ModelServerConfig()
    config.model_config_list.config.add(name=MODEL, base_path=first, model_platform="tensorflow")
    config.model_config_list.config.add(name="added", base_path=model_dir(MODEL), model_platform="tensorflow")
    reply = stub.HandleReloadConfigRequest(model_management_pb2.ReloadConfigRequest(config=config))
    assert reply.status.error_code == 0
    assert predict(server.channel(), "added") == (3.0, 123)  # available when the reply comes
    del config.model_config_list.config[0]
    assert (
        stub.HandleReloadConfigRequest(
            model_management_pb2.ReloadConfigRequest(config=config)
        ).status.error_code
        == 0
    )
    wait_for(lambda: status(server.channel(), MODEL) == {123: (State.END, 0)}, what=f"{MODEL} unloaded")
    with pytest.raises(grpc.RpcError) as e:
        predict(server.channel(), MODEL)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert e.value.details() == f"Servable not found for request: Latest({MODEL})"
    bad = model_server_config_pb2.ModelServerConfig()
    bad.model_config_list.config.add(name="x", base_path="relative", model_platform="tensorflow")
    with pytest.raises(grpc.RpcError) as e:
        stub.HandleReloadConfigRequest(model_management_pb2.ReloadConfigRequest(config=bad))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_version_labels(model_server, model_dir, tmp_path):
    base = model_dir(MODEL, versions={ORIGINAL_VERSION: "1"})
    shutil.copytree(os.path.join(base, "1"), os.path.join(base, "2"))
    config = tmp_path / "labels.config"
    config.write_text(
        f"model_config_list {{ config {{ name: 'm' base_path: '{base}' model_platform: 'tensorflow' "
        "model_version_policy { all {} } version_labels { key: 'stable' value: 1 } "
        "version_labels { key: 'canary' value: 2 } } }"
    )
    server = model_server(f"--model_config_file={config}", "--allow_version_labels_for_unavailable_models")
    wait_for(
        lambda: (
            len(status(server.channel(), "m")) == 2
            and all(s == (State.AVAILABLE, 0) for s in status(server.channel(), "m").values())
        ),
        what="both versions",
    )
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.version_label = "stable"
    tensor = request.inputs["x"]
    tensor.dtype = types_pb2.DT_FLOAT
    tensor.tensor_shape.dim.add().size = 1
    tensor.tensor_shape.dim.add().size = 1
    tensor.float_val.append(2.0)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    assert stub.Predict(request, timeout=RPC_TIMEOUT).model_spec.version.value == 1
    request.model_spec.version_label = "canary"
    assert stub.Predict(request, timeout=RPC_TIMEOUT).model_spec.version.value == 2
    request.model_spec.version_label = "nope"
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(request, timeout=RPC_TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "Unrecognized servable version label: nope"


def test_health_and_reflection(model_server, model_dir):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    server = model_server(f"--model_base_path={model_dir(MODEL)}", f"--model_name={MODEL}")
    health = health_pb2_grpc.HealthStub(server.channel())
    for service in ("", MODEL, "tensorflow.serving.PredictionService", "tensorflow.serving.ModelService"):
        assert (
            health.Check(health_pb2.HealthCheckRequest(service=service)).status
            == health_pb2.HealthCheckResponse.SERVING
        )
    reflection = reflection_pb2_grpc.ServerReflectionStub(server.channel())
    replies = reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    services = {s.name for reply in replies for s in reply.list_services_response.service}
    assert {
        "tensorflow.serving.PredictionService",
        "tensorflow.serving.ModelService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= services


def test_sigterm_exits_cleanly(model_server, model_dir):
    server = model_server(f"--model_base_path={model_dir(MODEL)}")
    assert predict(server.channel(), "default")[0] == 3.0
    assert server.stop(signal.SIGTERM) == 0
    assert "Running gRPC ModelServer at 127.0.0.1:" in server.output()


def test_sigterm_finishes_in_flight_requests(model_server, model_dir):
    import numpy as np

    # A lame duck, as by default: the call sent before SIGTERM is admitted even where its 120 MB
    # are still arriving when the signal comes (without one it may be refused, by design).
    server = model_server(f"--model_base_path={model_dir(MODEL)}", "--lame_duck_seconds=1")
    big = [("grpc.max_send_message_length", 2**31 - 1), ("grpc.max_receive_message_length", 2**31 - 1)]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "default"
    rows = 30_000_000  # 120 MB in, 120 MB out: about a second or two of work
    tensor = request.inputs["x"]
    tensor.dtype = types_pb2.DT_FLOAT
    tensor.tensor_shape.dim.add().size = rows
    tensor.tensor_shape.dim.add().size = 1
    tensor.tensor_content = np.full(rows, 2.0, np.float32).tobytes()
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.new_channel(options=big))
    future = stub.Predict.future(request, timeout=120)
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGTERM)
    reply = future.result()  # the request in flight at SIGTERM completes
    y = reply.outputs["y"]
    values = np.frombuffer(y.tensor_content, np.float32) if y.tensor_content else np.array(y.float_val)
    assert values.shape == (rows,) and values[0] == 3.0 and values[-1] == 3.0
    assert server.wait_exit(60) == 0
    assert "Received signal 15; shutting down" in server.output()
    with pytest.raises(grpc.RpcError) as e:
        predict(server.new_channel(), "default", timeout=2)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_sigterm_under_load_fails_no_started_request(model_server, model_dir):
    server = model_server(f"--model_base_path={model_dir(MODEL)}")
    codes, done = [], threading.Event()

    def client():
        channel = server.new_channel()
        while not done.is_set():
            try:
                assert predict(channel, "default", timeout=10)[0] == 3.0
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as e:
                codes.append(e.code())
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    return  # the server is gone: expected once it stopped accepting

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait_exit(30) == 0
    done.set()
    for t in threads:
        t.join()
    assert grpc.StatusCode.OK in codes
    # Calls that reach grpc after shutdown began are refused (UNAVAILABLE) or, when they race
    # with it before any handler ran, cancelled by grpc core (CANCELLED); nothing else.
    assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}, set(
        codes
    )


def test_sigint_exits_cleanly(model_server, model_dir):
    server = model_server(f"--model_base_path={model_dir(MODEL)}")
    assert server.stop(signal.SIGINT) == 0


def test_ssl_config_file(model_server, model_dir, tmp_path):
    """--ssl_config_file: TLS with the SSLConfig's key and certificate."""
    import subprocess

    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    ssl_config = tmp_path / "ssl.config"
    ssl_config.write_text(
        f"server_key: {json.dumps(key.read_text())}\nserver_cert: {json.dumps(cert.read_text())}\n"
    )
    server = model_server(
        f"--model_base_path={model_dir(MODEL)}", f"--ssl_config_file={ssl_config}", wait=False
    )
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    channel = grpc.secure_channel(server.address, credentials)
    try:
        wait_for(lambda: _serving(channel), what="TLS port")
        assert predict(channel, "default") == (3.0, 123)
        assert "Using SSL credentials" in server.output()
    finally:
        channel.close()


def _serving(channel) -> bool:
    try:
        return status(channel, "default") == {123: (State.AVAILABLE, 0)}
    except grpc.RpcError:
        return False


def test_a_broken_model_waiting_to_retry_does_not_hold_up_a_healthy_one(model_server, model_dir, tmp_path):
    """One load slot (the default): model "broken" gets a corrupt version 2 that fails and waits a
    minute to retry; model "healthy" gets a version 2 meanwhile, which loads within seconds.
    Version 1 of "broken" serves throughout."""
    broken = model_dir(MODEL, versions={ORIGINAL_VERSION: "1"})
    healthy = model_dir(MODEL, versions={ORIGINAL_VERSION: "1"})
    config = tmp_path / "two_models.conf"
    config.write_text(config_text(("broken", broken), ("healthy", healthy)))
    server = model_server(f"--model_config_file={config}", "--load_retry_interval_micros=60000000")
    channel = server.channel()
    os.makedirs(os.path.join(broken, "2"))
    with open(os.path.join(broken, "2", "saved_model.pb"), "wb") as f:
        f.write(b"\x0a\xff\xff corrupt")
    wait_for(lambda: "version: 2} failed" in server.output(), what="the broken load to fail")
    shutil.copytree(os.path.join(healthy, "1"), os.path.join(healthy, "2"))
    started = time.monotonic()
    wait_for(
        lambda: status(channel, "healthy").get(2, (None,))[0] == State.AVAILABLE,
        timeout=30,
        what="healthy v2",
    )
    assert time.monotonic() - started < 30  # before: held up for the broken model's 60 s retry wait
    assert status(channel, "broken")[2][0] == State.LOADING  # still waiting to retry
    assert predict(channel, "broken") == (3.0, 1)
    assert predict(channel, "healthy") == (3.0, 2)
    assert server.stop() == 0
