"""Prometheus monitoring, the request log and warmup metrics, end to end.

A server with both ports and ``--monitoring_config_file`` gets a known mix of requests from
concurrent gRPC and REST clients (good ones, bad inputs, an unknown model); its page, scraped
during and after the load, parses with prometheus-client's own parser, and the request counters
equal the requests sent, by model and status; the latency histograms count the successes, by
API and transport. A request log written under load reads back as PredictionLog records and,
used as a model's warmup file, loads, which the warmup metrics show.
"""

from __future__ import annotations

import json
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from apis.tensorflow_serving.apis import classification_pb2, predict_pb2, prediction_log_pb2
from runtime.tensor_util import make_tensor_proto
from serving.observability import tfrecord

GOOD, BAD, UNKNOWN = 30, 7, 5  # per client
CLIENTS = 3
PREDICT = "/tensorflow.serving.PredictionService/Predict"
CLASSIFY = "/tensorflow.serving.PredictionService/Classify"


def monitored_server(model_server, model_dir, free_port, tmp_path, *flags, base=None):
    config = tmp_path / "monitoring.config"
    config.write_text("prometheus_config { enable: true }\n")
    rest_port = free_port()
    server = model_server(
        f"--model_base_path={base or model_dir('half_plus_two')}",
        "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}",
        f"--monitoring_config_file={config}",
        *flags,
    )
    return server, rest_port


def scrape(rest_port: int) -> dict:
    """{(name, frozenset(labels)): value} of every sample on the page (prometheus-client's parser)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics") as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def predict_request(name="half_plus_two", input_name="x") -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.inputs[input_name].CopyFrom(make_tensor_proto(np.float32([[1.0]])))
    return request.SerializeToString()


def grpc_client(address: str, codes: list) -> None:
    channel = grpc.insecure_channel(address)
    predict, classify = channel.unary_unary(PREDICT), channel.unary_unary(CLASSIFY)
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "half_plus_two"
    request.model_spec.signature_name = "classify_x_to_y"
    request.input.example_list.examples.add().features.feature["x"].float_list.value.append(2.0)
    calls = [(predict, predict_request())] * GOOD + [(classify, request.SerializeToString())] * GOOD
    calls += [(predict, predict_request(input_name="nope"))] * BAD + [
        (predict, predict_request("nope"))
    ] * UNKNOWN
    for call, data in calls:
        try:
            call(data, timeout=30)
            codes.append("OK")
        except grpc.RpcError as e:
            codes.append(e.code().name)
    channel.close()


def rest_client(rest_port: int, codes: list) -> None:
    def post(model, body):
        url = f"http://127.0.0.1:{rest_port}/v1/models/{model}:predict"
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(body).encode())).read()
            codes.append(200)
        except urllib.error.HTTPError as e:
            codes.append(e.code)

    for _ in range(GOOD):
        post("half_plus_two", {"instances": [[1.0]]})
    for _ in range(BAD):
        post("half_plus_two", {"inputs": {"nope": [[1.0]]}})
    for _ in range(UNKNOWN):
        post("nope", {"instances": [[1.0]]})


def test_request_counters_equal_the_requests_sent(model_server, model_dir, free_port, tmp_path):
    server, rest_port = monitored_server(model_server, model_dir, free_port, tmp_path)
    grpc_codes, rest_codes, threads = [], [], []
    for _ in range(CLIENTS):
        threads.append(threading.Thread(target=grpc_client, args=(server.address, grpc_codes)))
        threads.append(threading.Thread(target=rest_client, args=(rest_port, rest_codes)))
    for thread in threads:
        thread.start()
    during = scrape(rest_port)  # a scrape under load parses too
    assert (
        value(
            during,
            "savedmodel_server_model_version_state",
            model_name="half_plus_two",
            version="123",
            state="AVAILABLE",
        )
        == 1
    )
    for thread in threads:
        thread.join()
    assert grpc_codes.count("OK") == 2 * GOOD * CLIENTS and rest_codes.count(200) == GOOD * CLIENTS
    assert grpc_codes.count("INVALID_ARGUMENT") == rest_codes.count(400) == BAD * CLIENTS
    assert grpc_codes.count("NOT_FOUND") == rest_codes.count(404) == UNKNOWN * CLIENTS
    samples = scrape(rest_port)
    count = ":tensorflow:serving:request_count_total"  # (the parser names counter samples *_total)
    assert value(samples, count, model_name="half_plus_two", status="OK") == 3 * GOOD * CLIENTS
    assert value(samples, count, model_name="half_plus_two", status="INVALID_ARGUMENT") == 2 * BAD * CLIENTS
    assert value(samples, count, model_name="nope", status="NOT_FOUND") == 2 * UNKNOWN * CLIENTS
    latency = ":tensorflow:serving:request_latency_count"
    assert (
        value(samples, latency, model_name="half_plus_two", API="Predict", entrypoint="GRPC")
        == GOOD * CLIENTS
    )
    assert (
        value(samples, latency, model_name="half_plus_two", API="Classify", entrypoint="GRPC")
        == GOOD * CLIENTS
    )
    assert (
        value(samples, latency, model_name="half_plus_two", API="Predict", entrypoint="REST")
        == GOOD * CLIENTS
    )
    runtime = ":tensorflow:serving:runtime_latency_count"
    assert (
        value(samples, runtime, model_name="half_plus_two", API="Predict", runtime="TF1")
        == 2 * GOOD * CLIENTS
    )
    assert (
        value(samples, runtime, model_name="half_plus_two", API="Classify", runtime="TF1") == GOOD * CLIENTS
    )
    by_signature = "savedmodel_server_signature_requests_total"
    assert value(samples, by_signature, model_name="half_plus_two", signature_name="classify_x_to_y",
                 API="Classify", entrypoint="GRPC", status="OK") == GOOD * CLIENTS  # fmt: skip
    loads = ":tensorflow:cc:saved_model:load_attempt_count_total"
    assert sum(v for (n, labels), v in samples.items() if n == loads and ("status", "success") in labels) == 1
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "savedmodel_server_process_threads") > 1
    assert server.stop() == 0


def test_a_request_log_written_under_load_is_a_warmup_file(model_server, model_dir, free_port, tmp_path):
    log_dir = tmp_path / "requests"
    server, rest_port = monitored_server(
        model_server,
        model_dir,
        free_port,
        tmp_path,
        f"--request_log_dir={log_dir}",
        "--request_log_sampling_rate=1",
    )
    grpc_codes, rest_codes = [], []
    threads = [threading.Thread(target=grpc_client, args=(server.address, grpc_codes))]
    threads += [threading.Thread(target=rest_client, args=(rest_port, rest_codes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.stop() == 0  # the log is written out
    (log,) = sorted(log_dir.iterdir())
    with open(log, "rb") as f:
        records = [
            prediction_log_pb2.PredictionLog.FromString(r)
            for r in tfrecord.read_records(f, log.stat().st_size)
        ]
    answered = 3 * GOOD  # only answered requests are logged: gRPC Predict and Classify, REST Predict
    assert len(records) == answered
    kinds = sorted(r.WhichOneof("log_type") for r in records)
    assert kinds == ["classify_log"] * GOOD + ["predict_log"] * 2 * GOOD
    assert {r.log_metadata.model_spec.version.value for r in records} == {123}
    assert all(
        r.predict_log.response.outputs["y"].float_val == [2.5] for r in records if r.HasField("predict_log")
    )

    base = Path(model_dir("half_plus_two"))
    (base / "00000123" / "assets.extra").mkdir()
    shutil.copy(log, base / "00000123" / "assets.extra" / "tf_serving_warmup_requests")
    server, rest_port = monitored_server(model_server, model_dir, free_port, tmp_path, base=base)
    assert f"Number of warmup records read: {answered}." in server.output()
    samples = scrape(rest_port)
    path = str(base / "00000123")
    assert (
        value(samples, ":tensorflow:serving:model_warmup_records_read_total", model_path=path, status="OK")
        == answered
    )
    assert value(samples, ":tensorflow:serving:model_warmup_latency_count", model_path=path, status="OK") == 1
    assert server.stop() == 0
