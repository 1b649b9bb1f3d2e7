"""serving.observability.request_log: which models are logged, sampling, files that are warmup files,
rotation, retention, and a full queue that drops instead of blocking."""

from __future__ import annotations

import io
import os
import queue

import pytest

from apis.tensorflow_serving.apis import predict_pb2, prediction_log_pb2
from apis.tensorflow_serving.config import logging_config_pb2
from serving.observability import request_log, tfrecord
from serving.observability.request_log import ModelLogging, RecordFiles, RequestLogger, model_logging


def logging_config(rate=None, prefix=""):
    config = logging_config_pb2.LoggingConfig()
    if rate is not None:
        config.sampling_config.sampling_rate = rate
    config.log_collector_config.filename_prefix = prefix
    return config


@pytest.mark.parametrize(
    "config, directory, default_rate, expected",
    [
        (None, "", 1.0, None),
        (None, "/logs", 0.0, None),
        (None, "/logs", 0.25, ModelLogging("/logs/m", 0.25)),
        (None, "/logs", 7.0, ModelLogging("/logs/m", 1.0)),
        (logging_config(0.5, "/var/m"), "", 0.0, ModelLogging("/var/m", 0.5)),
        (logging_config(0.5), "/logs", 0.1, ModelLogging("/logs/m", 0.5)),
        (logging_config(0.5), "", 0.0, None),  # nowhere to write: warned
        (logging_config(0.0, "/var/m"), "/logs", 1.0, None),  # the model's own rate wins
        (logging_config(None, "/var/m"), "/logs", 0.2, ModelLogging("/logs/m", 0.2)),
    ],
)
def test_model_logging(config, directory, default_rate, expected):
    assert model_logging("m", config, directory, default_rate) == expected


def read(path):
    with open(path, "rb") as f:
        return list(tfrecord.read_records(f, os.path.getsize(path)))


def test_files_rotate_by_records_and_bytes_and_keep_the_newest(tmp_path, monkeypatch):
    files = RecordFiles(str(tmp_path / "m"), max_bytes=1_000_000)
    for i in range(request_log.MAX_RECORDS_PER_FILE + 5):
        files.write(b"%d" % i)
    files.close()
    names = sorted(os.listdir(tmp_path))
    assert names == ["m.00000.tfrecord", "m.00001.tfrecord"]
    assert len(read(tmp_path / names[0])) == 1000 and read(tmp_path / names[1])[-1] == b"1004"
    files = RecordFiles(str(tmp_path / "m"), max_bytes=100)  # a restart continues the series
    for _ in range(3):
        files.write(b"x" * 60)
    files.close()
    assert sorted(os.listdir(tmp_path))[-1] == "m.00004.tfrecord"
    monkeypatch.setattr(request_log, "MAX_FILES", 2)
    files = RecordFiles(str(tmp_path / "m"), max_bytes=100)
    files.write(b"y")
    files.close()
    assert sorted(os.listdir(tmp_path)) == ["m.00004.tfrecord", "m.00005.tfrecord"]


def test_logged_requests_read_back_as_prediction_logs(tmp_path):
    draws = iter([0.1, 0.9, 0.3])
    logger = RequestLogger(rng=lambda: next(draws))
    logger.update({"m": ModelLogging(str(tmp_path / "m"), 0.5)})
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    response = predict_pb2.PredictResponse()
    response.model_spec.version.value = 3
    logger.log("predict", "m", "serving_default", request, response.SerializeToString())  # 0.1: kept
    logger.log("predict", "m", "serving_default", request, response)  # 0.9: not sampled
    logger.log("predict", "other", "", request, response)  # not configured: no draw
    newer = predict_pb2.PredictResponse()
    newer.model_spec.version.value = 4
    logger.log("predict", "m", "", request, newer)  # 0.3: kept
    logger.close()
    (name,) = os.listdir(tmp_path)
    logs = [prediction_log_pb2.PredictionLog.FromString(r) for r in read(tmp_path / name)]
    assert [log.log_metadata.model_spec.version.value for log in logs] == [3, 4]
    assert logs[0].log_metadata.model_spec.signature_name == "serving_default"
    assert logs[0].log_metadata.sampling_config.sampling_rate == 0.5
    assert logs[0].predict_log.request == request and logs[0].predict_log.response == response


def test_a_full_queue_drops_records_instead_of_blocking(tmp_path):
    logger = RequestLogger()
    logger.update({"m": ModelLogging(str(tmp_path / "m"), 1.0)})
    writer_queue = logger._queue
    logger._queue = queue.Queue(1)
    logger._queue.put("occupied")
    logger.log("classify", "m", "", predict_pb2.PredictRequest(), io.BytesIO().getvalue())
    assert logger.dropped == 1
    logger._queue = writer_queue
    logger.close()
