"""Model warmup: a version's recorded requests replayed before it serves (TF Serving's
``saved_model_warmup``).

A model may ship ``<version>/assets.extra/tf_serving_warmup_requests``: a TFRecord file of
``PredictionLog`` records (Classify, Regress, Predict, MultiInference). With
``--enable_model_warmup`` (the default) each record is run ``--num_request_iterations_for_warmup``
times (default once) against the version being loaded, through the same transport-free
functions live requests use and the version's own Session (the batching wrapper, when batching
is on), so the first live request does not pay for onnxruntime's compilation and validation.
A failing record fails the load with that record's status (the previous version keeps
serving), as do more than ``MAX_RECORDS`` records, an unparsable record and a corrupt file;
texts are TF Serving's. A request log written by ``--request_log_dir`` is such a file.
"""

from __future__ import annotations

import logging
import os
import time

from google.protobuf import text_format

from apis.tensorflow_serving.apis import prediction_log_pb2
from apis.tensorflow_serving.servables.tensorflow import session_bundle_config_pb2
from runtime import errors
from serving.inference.classify import run_classify
from serving.inference.multi_inference import run_multi_inference
from serving.inference.predict import run_predict
from serving.inference.regress import run_regress
from serving.observability import metrics, tfrecord

logger = logging.getLogger(__name__)

REQUESTS_FILE = "tf_serving_warmup_requests"
ASSETS_EXTRA = "assets.extra"
MAX_RECORDS = 1000


def warmup_path(export_dir: str) -> str:
    return os.path.join(export_dir, ASSETS_EXTRA, REQUESTS_FILE)


def run_warmup(servable, export_dir: str, num_request_iterations: int = 0) -> int:
    """Replays the version's warmup file on ``servable`` (a Servable of the version being
    loaded); returns the number of records read. Raises the status that stops it."""
    path = warmup_path(export_dir)
    if not os.path.exists(path):
        logger.info("No warmup data file found at %s", path)
        return 0
    options = session_bundle_config_pb2.ModelWarmupOptions()
    if num_request_iterations > 0:
        options.num_request_iterations.value = num_request_iterations
    iterations = options.num_request_iterations.value if options.HasField("num_request_iterations") else 1
    logger.info(
        "Starting to read warmup data for model at %s with model-warmup-options %s",
        path,
        text_format.MessageToString(options, as_one_line=True),
    )
    start = time.monotonic()
    read, status = [0], "OK"  # records read so far, counted on failure too
    try:
        _replay_file(servable, path, iterations, read)
    except errors.OpError as e:
        status = f"{errors.CODE_NAMES.get(e.code, 'UNKNOWN')}: {e.message}"  # absl's Status::ToString
        raise
    finally:  # TF Serving's warmup metrics, labelled with the export and the status
        metrics.model_warmup_latency.labels(export_dir, status).observe((time.monotonic() - start) * 1e6)
        metrics.model_warmup_records_read.labels(export_dir, status).inc(read[0])
    logger.info(
        "Finished reading warmup data for model at %s. Number of warmup records read: %d. "
        "Elapsed time (microseconds): %d.",
        path,
        read[0],
        (time.monotonic() - start) * 1e6,
    )
    return read[0]


def _replay_file(servable, path: str, iterations: int, read: list[int]) -> None:
    try:
        with open(path, "rb") as f:
            for record in tfrecord.read_records(f, os.fstat(f.fileno()).st_size):
                log = _parse(record, path)
                for _ in range(iterations):
                    replay(servable, log)
                read[0] += 1
                if read[0] > MAX_RECORDS:
                    raise errors.InvalidArgumentError(
                        None, None, f"Number of warmup records exceeds the maximum ({MAX_RECORDS}) at {path}"
                    )
    except errors.DataLossError as e:
        raise errors.DataLossError(
            None, None, f"{e.message}. Please verify your warmup data is in TFRecord format."
        ) from None
    except OSError as e:
        raise errors.NotFoundError(None, None, f"{path}; {e.strerror or e}") from None


def _parse(record: bytes, path: str) -> prediction_log_pb2.PredictionLog:
    log = prediction_log_pb2.PredictionLog()
    try:
        log.ParseFromString(record)
    except Exception:  # noqa: BLE001 - any parse failure is TF Serving's one error
        text = record.decode("utf-8", "replace")
        raise errors.InvalidArgumentError(
            None, None, f"Failed to parse warmup record: {text} from {path}"
        ) from None
    return log


def replay(servable, log: prediction_log_pb2.PredictionLog) -> None:
    """One record's request on ``servable`` (TF Serving's ``RunWarmupRequest``); the response
    is dropped."""
    kind = log.WhichOneof("log_type")
    if kind == "predict_log":
        run_predict(servable, log.predict_log.request)
    elif kind == "classify_log":
        run_classify(servable, log.classify_log.request)
    elif kind == "regress_log":
        run_regress(servable, log.regress_log.request)
    elif kind == "multi_inference_log":
        run_multi_inference(servable, log.multi_inference_log.request)
    elif kind is not None:  # predict_streamed_log, session_run_log
        number = log.DESCRIPTOR.fields_by_name[kind].number  # TF prints log_type_case()
        raise errors.UnimplementedError(None, None, f"Unsupported log_type for warmup: {number}")
