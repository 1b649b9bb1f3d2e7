"""What each loaded model version holds, end to end: ``GET /v1/models``' ``memory_bytes``, the
``savedmodel_server_model_memory_bytes`` gauge and the line logged at load agree, cover every
variable, count the onnxruntime sessions once clusters compile, and leave with the version."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request

import grpc

from serving.resources import memory
from tests.e2e.test_monitoring import scrape, value
from tests.e2e.test_version_pickup import export_of, request_of

MODEL = "zoo_mobilenet_v2_saved"
PREDICT = "/tensorflow.serving.PredictionService/Predict"


def held(rest_port: int) -> dict:
    """{(model, version): memory_bytes} of GET /v1/models."""
    with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/v1/models") as response:
        models = json.loads(response.read())["models"]
    return {
        (m["name"], int(s["version"])): s["memory_bytes"]
        for m in models
        for s in m["model_version_status"]
        if "memory_bytes" in s
    }


def test_memory_per_model_version(model_server, model_dir, free_port, tmp_path):
    base = tmp_path / MODEL
    shutil.copytree(export_of(MODEL), base / "1")
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f'  config {{ name: "{MODEL}" base_path: "{base}" model_platform: "tensorflow" }}\n'
        f'  config {{ name: "half_plus_two" base_path: "{model_dir("half_plus_two")}" model_platform: "tensorflow" }}\n'
        "}\n"
    )
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }\n")
    rest_port = free_port()
    server = model_server(
        f"--model_config_file={config}",
        f"--rest_api_port={rest_port}",
        f"--monitoring_config_file={monitoring}",
        "--file_system_poll_wait_seconds=1",
    )
    variables = sum(f.stat().st_size for f in (base / "1" / "variables").glob("variables.data-*"))
    first = held(rest_port)
    assert set(first) == {(MODEL, 1), ("half_plus_two", 123)}
    arrays = first[(MODEL, 1)]["arrays"]
    assert variables * 0.95 <= arrays <= variables * 3, (variables, arrays)  # every variable, once
    assert first[("half_plus_two", 123)]["arrays"] < 1 << 20
    assert f"Servable version {{name: {MODEL} version: 1}} holds" in server.output()

    # A request compiles the delegated clusters: their onnxruntime sessions are counted.
    call = server.channel().unary_unary(PREDICT)
    call(request_of(MODEL).SerializeToString(), timeout=120)
    time.sleep(memory.REFRESH_SECONDS + 0.5)
    after = held(rest_port)[(MODEL, 1)]
    assert after["onnxruntime"] > 0
    samples = scrape(rest_port)
    gauge = "savedmodel_server_model_memory_bytes"
    for kind in ("arrays", "onnxruntime"):
        assert value(samples, gauge, model_name=MODEL, version="1", kind=kind) == after[kind]

    # A new version: the old one's figures leave with it.
    shutil.copytree(export_of(MODEL), tmp_path / "staging")
    (tmp_path / "staging").rename(base / "2")
    deadline = time.monotonic() + 120
    while set(held(rest_port)) != {(MODEL, 2), ("half_plus_two", 123)}:
        assert time.monotonic() < deadline, held(rest_port)
        time.sleep(0.2)
    samples = scrape(rest_port)
    assert value(samples, gauge, model_name=MODEL, version="1", kind="arrays") == 0
    assert (
        value(samples, gauge, model_name=MODEL, version="2", kind="arrays")
        == held(rest_port)[(MODEL, 2)]["arrays"]
    )
    try:
        call(request_of(MODEL).SerializeToString(), timeout=120)
    except grpc.RpcError as e:  # pragma: no cover - the failure's text
        raise AssertionError(e.details()) from None
