"""Models on S3: ``model_server --model_base_path=s3://...`` against moto's S3 server on loopback.

The server reads a version once into its local cache and loads it from there; a version uploaded
while clients are busy is picked up with no failed request; an outage of the endpoint (a proxy
taken down for several polls) costs no request and unloads nothing; a base path with nothing
stored is one clear NOT_FOUND for that model while another model serves. Credentials never
appear in the log.
"""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apis.tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc
from tests.e2e.conftest import MODELS_DIR
from tests.e2e.s3_server import BUCKET, CREDENTIALS
from tests.e2e.test_version_pickup import Clients

SOURCE = MODELS_DIR / "half_plus_two" / "00000123"
SERVING = health_pb2.HealthCheckResponse.SERVING


def upload_version(fs, base: str, version: int, pause: float = 0.0) -> None:
    """Puts half_plus_two as ``version``, one object at a time, saved_model.pb first."""
    files = sorted(SOURCE.rglob("*"), key=lambda p: (p.name != "saved_model.pb", str(p)))
    for path in files:
        if path.is_file():
            fs.put_file(str(path), f"{base}/{version}/{path.relative_to(SOURCE)}")
            time.sleep(pause)


def wait_for_version(clients: Clients, version: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (not clients.versions or clients.versions[-1] != version):
        time.sleep(0.1)
    assert clients.versions and clients.versions[-1] == version, clients.versions[-5:]


def wait_for_log(server, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in server.output():
        assert time.monotonic() < deadline, f"no {text!r} in the log within {timeout} s"
        time.sleep(0.2)


def test_serves_from_s3_picks_up_versions_and_rides_out_an_outage(model_server, s3, monkeypatch, tmp_path):
    fs, proxy = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    base = f"{BUCKET}/models/half_plus_two"
    upload_version(fs, base, 1)
    cache = tmp_path / "cache"
    server = model_server(
        f"--model_base_path=s3://{base}",
        "--model_name=half_plus_two",
        f"--remote_model_cache_dir={cache}",
    )
    clients = Clients(server.address)
    try:
        wait_for_version(clients, 1)
        upload_version(fs, base, 2, pause=1.2)  # each object visible to a poll on its own
        wait_for_version(clients, 2)
        served = len(clients.versions)
        proxy.down()  # until a poll has failed (a poll may hang in the client's retries first)
        wait_for_log(server, "keeps the versions it serves")
        proxy.up()
        wait_for_log(server, "can be read again")
        time.sleep(1)
        assert len(clients.versions) > served  # answered all along
    finally:
        clients.stop()
    log = server.output()
    print(f"{clients.sent} requests, {len(clients.failures)} failed")
    assert clients.failures == []
    assert clients.versions[-1] == 2
    assert "keeps the versions it serves" in log and "can be read again" in log
    (model_cache,) = cache.iterdir()  # the versions were read into the cache we named
    assert (model_cache / "2" / "saved_model.pb").exists()
    assert CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in log
    assert server.stop() == 0


def test_a_missing_base_path_is_reported_while_another_model_serves(model_server, s3, monkeypatch, tmp_path):
    fs, proxy = s3
    # TensorFlow's own variables for its S3 file system work too.
    monkeypatch.setenv("S3_ENDPOINT", f"127.0.0.1:{proxy.port}")
    monkeypatch.setenv("S3_USE_HTTPS", "0")
    upload_version(fs, f"{BUCKET}/present", 1)
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f'  config {{ name: "present" base_path: "s3://{BUCKET}/present" model_platform: "tensorflow" }}\n'
        f'  config {{ name: "missing" base_path: "s3://{BUCKET}/nothing-here" model_platform: "tensorflow" }}\n'
        "}\n"
    )
    # Not ready as a whole (a configured model has no version: readiness says so), but serving.
    server = model_server(f"--model_config_file={config}", wait=False)
    health = health_pb2_grpc.HealthStub(server.channel())
    deadline = time.monotonic() + 60
    while True:
        try:
            if health.Check(health_pb2.HealthCheckRequest(service="present"), timeout=1).status == SERVING:
                break
        except grpc.RpcError:
            pass
        assert time.monotonic() < deadline and server.proc.poll() is None, server.output()
        time.sleep(0.1)
    assert health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status != SERVING
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel())
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "present"
    assert stub.GetModelStatus(request, timeout=10).model_version_status[0].version == 1
    request.model_spec.name = "missing"
    with pytest.raises(grpc.RpcError) as info:
        stub.GetModelStatus(request, timeout=10)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert info.value.details().startswith(f"Could not find base path s3://{BUCKET}/nothing-here")
    logged = server.output().count(f"Could not find base path s3://{BUCKET}/nothing-here")
    time.sleep(2.5)  # more polls: the error is logged when it appears, not every poll
    assert server.output().count(f"Could not find base path s3://{BUCKET}/nothing-here") == logged <= 2
    assert server.stop() == 0


def test_without_the_backend_the_error_names_the_extra(model_server, tmp_path):
    server = model_server("--model_base_path=nosuchscheme://bucket/m", "--model_name=m", wait=False)
    deadline = time.monotonic() + 30
    while "install an fsspec backend for nosuchscheme://" not in server.output():
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.1)
    assert server.stop() == 0
