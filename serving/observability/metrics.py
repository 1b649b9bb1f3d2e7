"""Prometheus monitoring: TF Serving's metrics, as its exporter writes them, and ours beside them.

TF Serving's metrics keep TensorFlow's names with ``/`` written ``:`` and its labels, so existing
dashboards work unchanged (``--monitoring_config_file``, ``prometheus_config { enable: true }``,
page at ``/monitoring/prometheus/metrics`` on the REST port)::

    :tensorflow:serving:request_count{model_name, status}              counter
    :tensorflow:serving:request_latency{model_name, API, entrypoint}   histogram, microseconds
    :tensorflow:serving:runtime_latency{model_name, API, runtime}      histogram, microseconds
    :tensorflow:serving:model_warmup_latency{model_path, status}       histogram, microseconds
    :tensorflow:serving:model_warmup_records_read{model_path, status}  counter
    :tensorflow:serving:batching_session:queuing_latency{thread_pool_name}   histogram, microseconds
    :tensorflow:serving:batching:input_batch_size / processed_batch_size / padding_size{model_name}
    :tensorflow:cc:saved_model:load_attempt_count{model_path, status}  counter ("success", "fail")
    :tensorflow:cc:saved_model:load_latency{model_path}                counter, microseconds

They are written as TF Serving's ``PrometheusExporter`` writes them: ``# TYPE`` lines, counters
without ``_total``, bucket bounds and sums printed as ``absl::StrCat`` prints doubles. Ours
(``savedmodel_server_*``: per-signature requests, version states, load failures, batching queue
depth, request-log drops, process RSS/CPU/threads) follow Prometheus' own conventions.

Every metric is counted once, in ``serving.inference.request_functions`` (the one wrapper every transport
goes through) and the loading path. Values live in prometheus-client's registry; with
``--num_workers`` each worker writes them to ``PROMETHEUS_MULTIPROC_DIR`` (set by the
supervisor before this module is imported) and a scrape of any worker sums them all.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest

from runtime import errors

DEFAULT_PATH = "/monitoring/prometheus/metrics"
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
TF_PREFIX = ":tensorflow:"


def exponential_buckets(scale: float, growth: float, count: int) -> list[float]:
    """TensorFlow's ``Buckets::Exponential``: ``count`` bounds ``scale * growth**i``."""
    return [scale * growth**i for i in range(count)]


LATENCY_BUCKETS = exponential_buckets(10, 1.8, 33)  # microseconds, up to ~20 minutes
QUEUING_BUCKETS = exponential_buckets(100, 1.2, 52)  # microseconds, up to ~1 second
SIZE_BUCKETS = exponential_buckets(1, 2, 15)  # batch and example counts

disable_created_metrics()  # no ``*_created`` series: TF Serving has none, and they double the page
REGISTRY = CollectorRegistry(auto_describe=True)
_STATES = ("START", "LOADING", "AVAILABLE", "UNLOADING", "END")

request_count = Counter(
    ":tensorflow:serving:request_count",
    "The total number of requests.",
    ["model_name", "status"],
    registry=REGISTRY,
)
request_latency = Histogram(
    ":tensorflow:serving:request_latency",
    "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
    ["model_name", "API", "entrypoint"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
runtime_latency = Histogram(
    ":tensorflow:serving:runtime_latency",
    "Distribution of wall time (in microseconds) for Tensorflow runtime.",
    ["model_name", "API", "runtime"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
model_warmup_latency = Histogram(
    ":tensorflow:serving:model_warmup_latency",
    "Distribution of wall time (in microseconds) for warming up the model.",
    ["model_path", "status"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
model_warmup_records_read = Counter(
    ":tensorflow:serving:model_warmup_records_read",
    "Total number of warmup records read during model warmup.",
    ["model_path", "status"],
    registry=REGISTRY,
)
queuing_latency = Histogram(
    ":tensorflow:serving:batching_session:queuing_latency",
    "Distribution of wall time spent (in microseconds) in queuing",
    ["thread_pool_name"],
    buckets=QUEUING_BUCKETS,
    registry=REGISTRY,
)
input_batch_size = Histogram(
    ":tensorflow:serving:batching:input_batch_size",
    "Tracks the batching input size distribution on the batch scheduler.",
    ["model_name"],
    buckets=SIZE_BUCKETS,
    registry=REGISTRY,
)
processed_batch_size = Histogram(
    ":tensorflow:serving:batching:processed_batch_size",
    "Tracks the batch size distribution on processing.",
    ["model_name"],
    buckets=SIZE_BUCKETS,
    registry=REGISTRY,
)
padding_size = Histogram(
    ":tensorflow:serving:batching:padding_size",
    "Tracks the padding size distribution on batches.",
    ["model_name"],
    buckets=SIZE_BUCKETS,
    registry=REGISTRY,
)
load_attempt_count = Counter(
    ":tensorflow:cc:saved_model:load_attempt_count",
    "The number of times a SavedModel was successfully loaded.",
    ["model_path", "status"],
    registry=REGISTRY,
)
load_latency = Counter(
    ":tensorflow:cc:saved_model:load_latency",
    "Latency in microseconds for SavedModels that were successfully loaded.",
    ["model_path"],
    registry=REGISTRY,
)
# Ours, beyond TF Serving.
signature_request_count = Counter(
    "savedmodel_server_signature_requests",
    "Requests by model, signature, API, transport and status.",
    ["model_name", "signature_name", "API", "entrypoint", "status"],
    registry=REGISTRY,
)
model_version_state = Gauge(
    "savedmodel_server_model_version_state",
    "1 for the state each model version is in (START, LOADING, AVAILABLE, UNLOADING, END), else 0.",
    ["model_name", "version", "state"],
    multiprocess_mode="max",
    registry=REGISTRY,
)
model_load_failures = Counter(
    "savedmodel_server_model_load_failures",
    "Failed attempts to load a model version, by model.",
    ["model_name"],
    registry=REGISTRY,
)
model_loads = Counter(
    "savedmodel_server_model_loads",
    "Model versions loaded, by model (with --model_memory_budget_bytes, every load on demand).",
    ["model_name"],
    registry=REGISTRY,
)
model_unloads = Counter(
    "savedmodel_server_model_unloads",
    "Model versions unloaded, by model (evictions included).",
    ["model_name"],
    registry=REGISTRY,
)
model_evictions = Counter(
    "savedmodel_server_model_evictions",
    "Idle model versions unloaded to stay within --model_memory_budget_bytes, by model.",
    ["model_name"],
    registry=REGISTRY,
)
request_log_dropped = Counter(
    "savedmodel_server_request_log_dropped",
    "Sampled requests not logged because the log writer was behind.",
    ["model_name"],
    registry=REGISTRY,
)
process_threads = Gauge(
    "savedmodel_server_process_threads",
    "Python threads of the server process.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
if MULTIPROCESS_ENV not in os.environ:  # per worker, its own process: not summable
    ProcessCollector(registry=REGISTRY)

STATUS_NAMES = errors.CODE_NAMES


class Cells:
    """Labelled children of a metric, kept per label tuple: ``labels()`` costs a lock and a
    dict build per call, which the request path need not pay each time. Thread-safe (a race
    creates one child twice, and prometheus-client returns the same one)."""

    def __init__(self, metric) -> None:
        self._metric = metric
        self._children: dict[tuple, object] = {}

    def __call__(self, *labels: str):
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self._metric.labels(*labels)
        return child


_runtime_latency = Cells(runtime_latency)
MAX_LABEL_SETS = 1000
OTHER = "__other__"  # the model_name of requests past MAX_LABEL_SETS distinct label sets
_requests: dict[tuple, tuple] = {}  # (model, signature, API, entrypoint, code) -> its children


def request_done(
    model_name: str, signature_name: str, api: str, entrypoint: str, code: int, seconds: float
) -> None:
    """One request answered (TF Serving's ``RecordRequestLatency``, on success only, and
    ``RecordModelRequestCount``); its three children found with one lookup."""
    key = (model_name, signature_name, api, entrypoint, code)
    children = _requests.get(key)
    if children is None:
        if len(_requests) >= MAX_LABEL_SETS:  # names come from clients: bound what they can add
            model_name, signature_name = OTHER, ""
            key = (model_name, signature_name, api, entrypoint, code)
            children = _requests.get(key)
    if children is None:
        status = STATUS_NAMES.get(code, "UNKNOWN")
        children = _requests[key] = (
            request_count.labels(model_name, status),
            signature_request_count.labels(model_name, signature_name, api, entrypoint, status),
            request_latency.labels(model_name, api, entrypoint) if code == errors.OK else None,
        )
    count, by_signature, latency = children
    count.inc()
    by_signature.inc()
    if latency is not None:
        latency.observe(seconds * 1e6)


def runtime_done(model_name: str, api: str, seconds: float) -> None:
    """Time in the Session for one request (TF Serving's ``RecordRuntimeLatency``)."""
    _runtime_latency(model_name, api, "TF1").observe(seconds * 1e6)


_queue_depth_sources: list = []


def add_queue_depth_source(source) -> None:
    """``source()`` gives ``(model_name, queue, tasks waiting)`` per batching queue: read at
    scrape time (``savedmodel_server_batching_queue_depth``; the answering process's queues)."""
    _queue_depth_sources.append(source)


def _queue_depths():
    family = GaugeMetricFamily(
        "savedmodel_server_batching_queue_depth",
        "Tasks waiting in a batching queue, by model and queue.",
        labels=["model_name", "queue"],
    )
    for source in list(_queue_depth_sources):
        for model_name, queue, depth in source():
            family.add_metric([model_name, queue], depth)
    return family


_memory_sources: list = []


def add_memory_source(source) -> None:
    """``source()`` gives ``(model_name, version, kind, bytes)`` per loaded version and kind:
    read at scrape time (``savedmodel_server_model_memory_bytes``; the answering process's)."""
    _memory_sources.append(source)


def _model_memory():
    family = GaugeMetricFamily(
        "savedmodel_server_model_memory_bytes",
        "Bytes a loaded model version holds, by kind: arrays (variables, constants) and what its "
        "onnxruntime sessions were given (their arenas are not visible).",
        labels=["model_name", "version", "kind"],
    )
    for source in list(_memory_sources):
        for model_name, version, kind, value in source():
            family.add_metric([model_name, str(version), kind], value)
    return family


def version_state(model_name: str, version: int, state: str) -> None:
    for name in _STATES:
        model_version_state.labels(model_name, str(version), name).set(1 if name == state else 0)


# -- the page ------------------------------------------------------------------------------------

_page_lock = threading.Lock()


def page() -> bytes:
    """The Prometheus page: TF Serving's metrics in its exporter's format, then ours."""
    with _page_lock:
        process_threads.set(threading.active_count())
        families = [*_collect(), _queue_depths(), _model_memory()]
    tf = [f for f in families if f.name.startswith(TF_PREFIX)]
    ours = [f for f in families if not f.name.startswith(TF_PREFIX)]
    lines = [line for family in sorted(tf, key=lambda f: f.name) for line in _tf_lines(family)]
    text = "\n".join(lines) + "\n" if lines else ""
    return text.encode() + generate_latest(_Families(ours))


def _collect():
    directory = os.environ.get(MULTIPROCESS_ENV)
    if not directory:
        return REGISTRY.collect()
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return registry.collect()


class _Families:
    """What ``generate_latest`` asks of a registry: ``collect()``."""

    def __init__(self, families: Iterable) -> None:
        self._families = list(families)

    def collect(self):
        return iter(self._families)


def _number(value: float) -> str:
    """A double as ``absl::StrCat`` prints it: six significant digits, %g style."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.6g}"


def _labels(labels: dict, skip: str = "") -> list[str]:
    return [f'{k}="{_escape(v)}"' for k, v in labels.items() if k != skip]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _tf_lines(family) -> list[str]:
    """One metric as TF Serving's ``PrometheusExporter`` writes it."""
    if family.type == "histogram":
        return _tf_histogram(family)
    kind = family.type if family.type in ("counter", "gauge") else "untyped"
    lines = [f"# TYPE {family.name} {kind}"]
    for sample in sorted(family.samples, key=lambda s: sorted(s.labels.items())):
        if sample.name.endswith("_created"):
            continue
        lines.append(f"{family.name}{{{','.join(_labels(sample.labels))}}} {int(sample.value)}")
    return lines


def _tf_histogram(family) -> list[str]:
    points: dict[tuple, dict] = {}
    for sample in family.samples:
        key = tuple((k, v) for k, v in sample.labels.items() if k != "le")
        point = points.setdefault(key, {"buckets": [], "sum": 0.0, "count": 0.0})
        if sample.name.endswith("_bucket"):
            point["buckets"].append((float(sample.labels["le"]), sample.value))
        elif sample.name.endswith("_sum"):
            point["sum"] = sample.value
        elif sample.name.endswith("_count"):
            point["count"] = sample.value
    lines = [f"# TYPE {family.name} histogram"]
    for key in sorted(points):
        point, labels = points[key], [f'{k}="{_escape(v)}"' for k, v in key]
        prefix = f"{family.name}_bucket{{{','.join(labels)}{',' if labels else ''}"
        for bound, cumulative in sorted(point["buckets"]):
            shown = "+Inf" if math.isinf(bound) else _number(bound)
            lines.append(f'{prefix}le="{shown}"}} {int(cumulative)}')
        lines.append(f"{family.name}_sum{{{','.join(labels)}}} {_number(point['sum'])}")
        lines.append(f"{family.name}_count{{{','.join(labels)}}} {int(point['count'])}")
    return lines
