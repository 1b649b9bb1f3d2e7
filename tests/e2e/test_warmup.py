"""Model warmup end to end: ``assets.extra/tf_serving_warmup_requests`` replayed before a
version serves, and every way a warmup file can fail a load (TF Serving's texts) while the
previous version keeps serving."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_log_pb2,
    prediction_service_pb2_grpc,
)
from runtime.tensor_util import make_tensor_proto
from serving.observability import tfrecord

MODEL = "keras_mlp"
State = get_model_status_pb2.ModelVersionStatus.State


def predict_request(features=((0.5, -1.0, 2.0, 0.25),), input_name="features") -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL
    request.inputs[input_name].CopyFrom(make_tensor_proto(np.float32(features)))
    return request


def predict_log(**kwargs) -> bytes:
    log = prediction_log_pb2.PredictionLog()
    log.predict_log.request.CopyFrom(predict_request(**kwargs))
    return log.SerializeToString()


def write_warmup(version_dir: Path, records: list[bytes], raw: bytes | None = None) -> Path:
    path = version_dir / "assets.extra" / "tf_serving_warmup_requests"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw if raw is not None else b"".join(map(tfrecord.encode_record, records)))
    return path


def version_status(channel, version: int):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = MODEL
    for status in (
        model_service_pb2_grpc.ModelServiceStub(channel)
        .GetModelStatus(request, timeout=20)
        .model_version_status
    ):
        if status.version == version:
            return status
    return None


def test_warmup_replays_records_before_the_version_is_available(model_server, model_dir):
    base = Path(model_dir(MODEL))
    write_warmup(
        base / "1", [predict_log(), predict_log(features=((1, 2, 3, 4), (4, 3, 2, 1))), predict_log()]
    )
    server = model_server(
        f"--model_base_path={base}", f"--model_name={MODEL}", "--num_request_iterations_for_warmup=2"
    )
    log = server.output()
    started = log.index("Starting to read warmup data for model at")
    finished = log.index("Number of warmup records read: 3.")
    available = log.index("Successfully loaded servable version {name: keras_mlp version: 1}")
    assert started < finished < available
    assert "model-warmup-options num_request_iterations { value: 2 }" in log
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    response = stub.Predict(predict_request(), timeout=20)
    assert len(response.outputs["output_0"].float_val) == 3
    assert server.stop() == 0


def corrupt(path_records: list[bytes]) -> bytes:
    data = bytearray(b"".join(map(tfrecord.encode_record, path_records)))
    data[12] ^= 0xFF  # the first record's first data byte
    return bytes(data)


def session_run_log() -> bytes:
    log = prediction_log_pb2.PredictionLog()
    log.session_run_log.request.model_spec.name = MODEL
    return log.SerializeToString()


CASES = {
    "corrupt file": (
        dict(raw=corrupt([predict_log()])),
        "DATA_LOSS",
        "corrupted record at 12. Please verify your warmup data is in TFRecord format.",
    ),
    "too many records": (
        dict(records=[predict_log()] * 1001),
        "INVALID_ARGUMENT",
        "Number of warmup records exceeds the maximum (1000) at {path}",
    ),
    "unparsable record": (
        dict(records=[b"\xff\xff not a PredictionLog"]),
        "INVALID_ARGUMENT",
        "Failed to parse warmup record: ",
    ),
    "failing request": (
        dict(records=[predict_log(), predict_log(input_name="nope")]),
        "INVALID_ARGUMENT",
        "Signature input alias: features(feed name: serving_default_features:0) not found in request",
    ),
    "unsupported log type": (
        dict(records=[session_run_log()]),
        "UNIMPLEMENTED",
        "Unsupported log_type for warmup: 5",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_warmup_file_fails_the_load_and_the_previous_version_serves(model_server, model_dir, case):
    base = Path(model_dir(MODEL))
    server = model_server(f"--model_base_path={base}", f"--model_name={MODEL}", "--max_num_load_retries=0")
    files, code, message = CASES[case]
    staging = base.parent / "staging"
    shutil.copytree(base / "1", staging)
    path = write_warmup(staging, files.get("records", []), files.get("raw"))
    os.rename(staging, base / "2")
    deadline = time.monotonic() + 60
    while (status := version_status(server.channel(), 2)) is None or status.state != State.END:
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.2)
    from runtime import errors

    assert errors.CODE_NAMES[status.status.error_code] == code
    expected = message.format(path=base / "2" / "assets.extra" / "tf_serving_warmup_requests")
    assert expected in status.status.error_message, status.status.error_message
    assert path.name == "tf_serving_warmup_requests"
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    assert stub.Predict(predict_request(), timeout=20).model_spec.version.value == 1
    assert version_status(server.channel(), 1).state == State.AVAILABLE
    assert server.stop() == 0


def test_without_warmup_the_file_is_not_read(model_server, model_dir):
    base = Path(model_dir(MODEL))
    write_warmup(base / "1", [], raw=b"garbage that would fail a warmup")
    server = model_server(f"--model_base_path={base}", f"--model_name={MODEL}", "--enable_model_warmup=false")
    log = server.output()
    assert "Successfully loaded servable version {name: keras_mlp version: 1}" in log
    assert "warmup data" not in log
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel())
    assert stub.Predict(predict_request(), timeout=20).model_spec.version.value == 1
    assert server.stop() == 0
