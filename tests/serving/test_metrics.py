"""serving.observability.metrics: TF Serving's exposition format, and label sets clients cannot grow without bound."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from runtime import errors
from serving.observability import metrics


def test_tf_metrics_are_written_as_tf_servings_exporter_writes_them():
    metrics.request_done("fmt_model", "serving_default", "Predict", "GRPC", errors.OK, 150e-6)
    metrics.request_done("fmt_model", "serving_default", "Predict", "GRPC", errors.INVALID_ARGUMENT, 1e-6)
    page = metrics.page().decode()
    lines = page.splitlines()
    assert "# TYPE :tensorflow:serving:request_count counter" in lines
    assert ':tensorflow:serving:request_count{model_name="fmt_model",status="OK"} 1' in lines
    assert ':tensorflow:serving:request_count{model_name="fmt_model",status="INVALID_ARGUMENT"} 1' in lines
    latency = (
        ':tensorflow:serving:request_latency_bucket{model_name="fmt_model",API="Predict",entrypoint="GRPC",'
    )
    assert f'{latency}le="104.976"}} 0' in lines and f'{latency}le="188.957"}} 1' in lines
    assert f'{latency}le="+Inf"}} 1' in lines
    assert (
        ':tensorflow:serving:request_latency_sum{model_name="fmt_model",API="Predict",entrypoint="GRPC"} 150'
        in lines
    )
    assert not [line for line in lines if line.startswith(":tensorflow:") and "_total" in line]
    assert not [line for line in lines if line.startswith("# HELP :tensorflow:")]  # TF writes none
    names = {f.name for f in text_string_to_metric_families(page)}
    assert ":tensorflow:serving:request_latency" in names and "savedmodel_server_signature_requests" in names


def test_label_sets_from_clients_are_bounded(monkeypatch):
    monkeypatch.setattr(metrics, "MAX_LABEL_SETS", len(metrics._requests) + 3)
    for i in range(50):
        metrics.request_done(f"random-{i}", "", "Predict", "REST", errors.NOT_FOUND, 0.0)
    assert len(metrics._requests) <= metrics.MAX_LABEL_SETS + 1
    page = metrics.page().decode()
    assert "random-49" not in page and 'model_name="__other__",status="NOT_FOUND"} 47' in page
