"""Request logging: sampled requests and their responses as ``PredictionLog`` TFRecords.

Beyond TF Serving, whose open-source build accepts ``logging_config`` and logs nothing: with
``--request_log_dir`` (ours) every model's requests are sampled at
``--request_log_sampling_rate``, and a model whose config has ``logging_config`` is sampled at
its ``sampling_config.sampling_rate`` into its ``log_collector_config.filename_prefix`` (or
``--request_log_dir``). A model's log is a series of files::

    <prefix>.00000.tfrecord, <prefix>.00001.tfrecord, ...   (prefix: <dir>/<model> by default)

each closed at ``max_bytes`` or at 1,000 records, so that any one of them is a valid warmup
file (``assets.extra/tf_serving_warmup_requests``): a model gets its warmup data from real
traffic. At most ``MAX_FILES`` files are kept per model, the oldest removed first.

Requests never wait for the disk: a sampled record goes into a bounded queue that one writer
thread drains; when the queue is full the record is dropped and counted (``dropped``).
"""

from __future__ import annotations

import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from apis.tensorflow_serving.apis import prediction_log_pb2
from serving.observability import metrics, tfrecord

logger = logging.getLogger(__name__)

MAX_RECORDS_PER_FILE = 1000  # serving.inference.warmup.MAX_RECORDS: a file is a warmup file
MAX_FILES = 100
QUEUE_SIZE = 1024
LOG_FIELDS = {  # request kind -> PredictionLog field
    "predict": "predict_log",
    "classify": "classify_log",
    "regress": "regress_log",
    "multi_inference": "multi_inference_log",
}


@dataclass(frozen=True)
class ModelLogging:
    """Where and how often one model's requests are logged."""

    prefix: str
    sampling_rate: float


def model_logging(name: str, logging_config, directory: str, default_rate: float) -> ModelLogging | None:
    """A model's logging from its ``logging_config`` (a LoggingConfig, or None) and the flags;
    None when its requests are not logged."""
    if logging_config is not None and logging_config.HasField("sampling_config"):
        rate = logging_config.sampling_config.sampling_rate
        prefix = logging_config.log_collector_config.filename_prefix
        if rate > 0 and (prefix or directory):
            return ModelLogging(prefix or os.path.join(directory, name), min(rate, 1.0))
        if rate > 0:
            logger.warning(
                "Model %s: logging_config has no log_collector_config.filename_prefix and "
                "--request_log_dir is not set; its requests are not logged",
                name,
            )
        return None
    if directory and default_rate > 0:
        return ModelLogging(os.path.join(directory, name), min(default_rate, 1.0))
    return None


class RecordFiles:
    """One model's series of TFRecord files; used by the writer thread only."""

    def __init__(self, prefix: str, max_bytes: int) -> None:
        self.prefix, self._max_bytes = prefix, max_bytes
        os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
        self._index = self._next_index()
        self._file = None
        self._bytes = self._records = 0

    def _next_index(self) -> int:
        base = os.path.basename(self.prefix)
        existing = [int(n) for n in (_index(p, base) for p in self._files()) if n is not None]
        return max(existing, default=-1) + 1

    def _files(self) -> list[str]:
        directory, base = os.path.split(self.prefix)
        names = sorted(n for n in os.listdir(directory or ".") if _index(n, base) is not None)
        return [os.path.join(directory, n) for n in names]

    def write(self, record: bytes) -> None:
        data = tfrecord.encode_record(record)
        if self._file is not None and (
            self._bytes + len(data) > self._max_bytes or self._records >= MAX_RECORDS_PER_FILE
        ):
            self.close()
        if self._file is None:
            self._file = open(f"{self.prefix}.{self._index:05d}.tfrecord", "ab")  # noqa: SIM115
            self._index += 1
            self._bytes = self._records = 0
            for old in self._files()[:-MAX_FILES]:
                os.remove(old)
        self._file.write(data)
        self._file.flush()
        self._bytes += len(data)
        self._records += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _index(name: str, base: str) -> str | None:
    name = os.path.basename(name)
    if name.startswith(base + ".") and name.endswith(".tfrecord"):
        digits = name[len(base) + 1 : -len(".tfrecord")]
        return digits if digits.isdigit() else None
    return None


class RequestLogger:
    """Samples and writes requests for the models configured with ``update``. Thread-safe:
    ``log`` may be called from any request thread; it never blocks."""

    def __init__(self, max_bytes: int = 64 << 20, rng: Callable[[], float] = random.random) -> None:
        self._max_bytes, self._rng = max_bytes, rng
        self._models: dict[str, ModelLogging] = {}
        self._queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self._files: dict[str, RecordFiles] = {}
        self.dropped = 0
        self._thread = threading.Thread(target=self._write, name="request_log_writer", daemon=True)
        self._thread.start()

    def update(self, models: dict[str, ModelLogging]) -> None:
        """The models to log from now on (a config reload replaces the set)."""
        self._models = dict(models)
        for name, config in self._models.items():
            logger.info(
                "Logging requests of model %s to %s.*.tfrecord at rate %g",
                name,
                config.prefix,
                config.sampling_rate,
            )

    def log(self, kind: str, model_name: str, signature_name: str, request, response) -> None:
        """Maybe logs one answered request (its messages, their wire bytes, or an answer with a
        ``wire()`` that gives them, called on the writer's thread)."""
        config = self._models.get(model_name)
        if config is None or self._rng() >= config.sampling_rate:
            return
        try:
            self._queue.put_nowait((config, kind, model_name, signature_name, request, response, time.time()))
        except queue.Full:
            self.dropped += 1
            metrics.request_log_dropped.labels(model_name).inc()

    def close(self, timeout: float = 5.0) -> None:
        """Writes what is queued (up to ``timeout``), then closes every file."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _write(self) -> None:
        while (item := self._queue.get()) is not None:
            config = item[0]
            try:
                files = self._files.get(config.prefix)
                if files is None:
                    files = self._files[config.prefix] = RecordFiles(config.prefix, self._max_bytes)
                files.write(prediction_log(config, *item[1:]))
            except Exception:  # noqa: BLE001 - a full disk never stops serving
                logger.exception("Could not write a request log record to %s", config.prefix)
        for files in self._files.values():
            files.close()


def prediction_log(config: ModelLogging, kind, model_name, signature_name, request, response, now) -> bytes:
    """The serialized PredictionLog of one request; the version served is the response's."""
    log = prediction_log_pb2.PredictionLog()
    entry = getattr(log, LOG_FIELDS[kind])
    for field, value in (("request", request), ("response", response)):
        target = getattr(entry, field)
        if hasattr(value, "wire"):  # an answer not yet encoded (``inference.predict.PredictOutputs``)
            value = value.wire()
        if isinstance(value, bytes | bytearray | memoryview):
            target.MergeFromString(bytes(value))
        else:
            target.CopyFrom(value)
    metadata = log.log_metadata
    metadata.model_spec.name = model_name
    metadata.model_spec.version.value = _version(entry.response)
    if signature_name:
        metadata.model_spec.signature_name = signature_name
    metadata.sampling_config.sampling_rate = config.sampling_rate
    metadata.timestamp_secs = int(now)
    return log.SerializeToString()


def _version(response) -> int:
    if response.DESCRIPTOR.name == "MultiInferenceResponse":
        return response.results[0].model_spec.version.value if response.results else 0
    return response.model_spec.version.value
