"""TF Serving's ``BatchingParameters``: reading them, their defaults, and their checks.

``--batching_parameters_file`` is a text ``tensorflow.serving.BatchingParameters`` (the
wrapper fields written ``max_batch_size { value: 32 }``); with
``--enable_per_model_batching_parameters`` a version directory's ``batching_params.pbtxt``
replaces its queue parameters, while the thread pool (``num_batch_threads``,
``thread_pool_name``) stays the server's, shared by every model. A field left out takes
the default of the C++ struct it configures (``SharedBatchScheduler::Options`` and
``QueueOptions``, ``BatchingSessionOptions``), and every check raises TF Serving's text:

==============================  ===========  ===============================================
field                           default      refused
==============================  ===========  ===============================================
max_batch_size                  1000         0: "input_batch_size_limit must be positive"
batch_timeout_micros            0            < 0: "... must be non-negative"
max_enqueued_batches            10           0 with splitting (without: taken as 1)
num_batch_threads               CPUs         < 1: "num_batch_threads must be positive"
thread_pool_name                batch_threads
allowed_batch_sizes             none         last entry other than max_batch_size
pad_variable_length_inputs      false
enable_large_batch_splitting    false
max_execution_batch_size        max_batch_size  over max_batch_size (with splitting)
==============================  ===========  ===============================================

TF Serving's model server checks only the last allowed batch size (``WrapSessionForBatching``;
the stricter "monotonically increasing" check is its ``CreateBasicBatchingSession``'s, which
the server does not use), so entries out of order are accepted and logged as a warning.
Pure functions and frozen values; no threads.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from apis.tensorflow_serving.servables.tensorflow.session_bundle_config_pb2 import BatchingParameters
from runtime import errors
from serving.lifecycle import model_config

logger = logging.getLogger(__name__)

BATCHING_PARAMS_FILENAME = "batching_params.pbtxt"  # a version directory's own parameters
DEFAULT_THREAD_POOL_NAME = "batch_threads"  # SharedBatchScheduler::Options
MODEL_SERVER_THREAD_POOL_NAME = "model_server_batch_threads"  # --enable_batching without a file
DEFAULT_MAX_BATCH_SIZE = 1000  # QueueOptions::input_batch_size_limit
DEFAULT_MAX_ENQUEUED_BATCHES = 10
ADAPTIVE_TIMEOUT_CAP_MICROS = 10_000  # the top of TF's advised CPU range, when none is set


@dataclass(frozen=True)
class SchedulerOptions:
    """``SharedBatchScheduler::Options``: the one pool of batch threads every model shares."""

    num_batch_threads: int
    thread_pool_name: str = DEFAULT_THREAD_POOL_NAME


@dataclass(frozen=True)
class QueueOptions:
    """One model version's batching: ``QueueOptions`` plus ``BatchingSessionOptions``.

    ``max_execution_batch_size`` is the largest batch that runs: ``input_batch_size_limit``
    unless large batch splitting is on. ``adaptive_batch_timeout`` (ours, off by default)
    lets the queue pick each batch's timeout from the traffic it sees, up to
    ``batch_timeout_micros`` (or ``ADAPTIVE_TIMEOUT_CAP_MICROS`` when that is 0)."""

    input_batch_size_limit: int = DEFAULT_MAX_BATCH_SIZE
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = DEFAULT_MAX_ENQUEUED_BATCHES
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False
    adaptive_batch_timeout: bool = False

    @property
    def adaptive_timeout_cap_micros(self) -> int:
        return self.batch_timeout_micros or ADAPTIVE_TIMEOUT_CAP_MICROS


def read_batching_parameters(path: str) -> BatchingParameters:
    """``ParseProtoTextFile<BatchingParameters>``, with TF Serving's errors for a bad file."""
    return model_config.read_text_proto_file(path, BatchingParameters())


def server_batching_parameters(batching_parameters_file: str) -> BatchingParameters:
    """What ``--enable_batching`` configures: the file's parameters, or, without a file, only
    the thread pool's name (``Server::BuildAndStart``)."""
    if batching_parameters_file:
        return read_batching_parameters(batching_parameters_file)
    params = BatchingParameters()
    params.thread_pool_name.value = MODEL_SERVER_THREAD_POOL_NAME
    return params


def per_model_batching_parameters(
    export_dir: str, common: BatchingParameters, per_model_configured: bool
) -> BatchingParameters | None:
    """``GetPerModelBatchingParams``: ``common``, or with per-model parameters on, the version
    directory's ``batching_params.pbtxt`` (None, no batching, where it has none)."""
    if not per_model_configured:
        return common
    path = os.path.join(export_dir, BATCHING_PARAMS_FILENAME)
    if not os.path.isfile(path):
        return None
    return read_batching_parameters(path)


def scheduler_options(params: BatchingParameters, default_threads: int) -> SchedulerOptions:
    """``CreateBatchScheduler``'s options; ``default_threads`` is TF's ``MaxParallelism()``."""
    threads = params.num_batch_threads.value if params.HasField("num_batch_threads") else default_threads
    if threads < 1:
        raise errors.InvalidArgumentError(None, None, f"num_batch_threads must be positive; was {threads}")
    name = params.thread_pool_name.value if params.HasField("thread_pool_name") else DEFAULT_THREAD_POOL_NAME
    return SchedulerOptions(threads, name)


def queue_options(params: BatchingParameters, *, adaptive_batch_timeout: bool = False) -> QueueOptions:
    """``WrapSessionForBatching`` + ``GetQueueOptions`` + ``AddQueue``: the queue options of
    ``params``, checked in TF Serving's order with its texts (INVALID_ARGUMENT)."""
    limit = params.max_batch_size.value if params.HasField("max_batch_size") else DEFAULT_MAX_BATCH_SIZE
    allowed = tuple(params.allowed_batch_sizes)
    if allowed and allowed[-1] != limit:
        _invalid(
            "Last entry in allowed_batch_sizes must match max_batch_size; last "
            f"entry was {allowed[-1]}; expected {limit}"
        )
    if any(b <= a for a, b in zip(allowed, allowed[1:])):
        logger.warning("allowed_batch_sizes entries are not increasing: %s", list(allowed))
    splitting = params.HasField("enable_large_batch_splitting") and params.enable_large_batch_splitting.value
    timeout = params.batch_timeout_micros.value if params.HasField("batch_timeout_micros") else 0
    enqueued = (
        params.max_enqueued_batches.value
        if params.HasField("max_enqueued_batches")
        else DEFAULT_MAX_ENQUEUED_BATCHES
    )
    if not splitting and enqueued == 0:
        enqueued = 1  # AddQueue: low-traffic models rely on 0 meaning 1
    max_execution = limit
    if splitting and params.HasField("max_execution_batch_size"):
        max_execution = params.max_execution_batch_size.value
    # TF's limits are size_t, where a negative value would wrap to a huge one: refused here
    # with the text TF gives for 0.
    if limit <= 0:
        _invalid(f"input_batch_size_limit must be positive; was {limit}")
    if timeout < 0:
        _invalid(f"batch_timeout_micros must be non-negative; was {timeout}")
    if enqueued <= 0:
        _invalid(f"max_enqueued_batches must be positive; was {enqueued}")
    if splitting and limit < max_execution:
        _invalid(  # StrCat appends the values after the sentence, as TF Serving prints it
            "When enable_large_batch_splitting is true, input_batch_size_limit must be greater "
            f"than or equal to max_execution_batch_size.1{limit}{max_execution}"
        )
    if max_execution <= 0:
        _invalid(f"max_execution_batch_size must be positive; was {max_execution}")
    return QueueOptions(
        input_batch_size_limit=limit,
        batch_timeout_micros=timeout,
        max_enqueued_batches=enqueued,
        enable_large_batch_splitting=splitting,
        max_execution_batch_size=max_execution,
        allowed_batch_sizes=allowed,
        pad_variable_length_inputs=params.pad_variable_length_inputs,
        adaptive_batch_timeout=adaptive_batch_timeout,
    )


def describe(queue: QueueOptions, scheduler: SchedulerOptions) -> str:
    """The parameters in force, one line, for the log (ours: TF Serving logs them at VLOG 1)."""
    parts = [
        f"max_batch_size={queue.input_batch_size_limit}",
        f"batch_timeout_micros={queue.batch_timeout_micros}",
        f"max_enqueued_batches={queue.max_enqueued_batches}",
        f"num_batch_threads={scheduler.num_batch_threads}",
        f"thread_pool_name={scheduler.thread_pool_name}",
        f"allowed_batch_sizes=[{','.join(map(str, queue.allowed_batch_sizes))}]",
        f"pad_variable_length_inputs={str(queue.pad_variable_length_inputs).lower()}",
        f"enable_large_batch_splitting={str(queue.enable_large_batch_splitting).lower()}",
    ]
    if queue.enable_large_batch_splitting:
        parts.append(f"max_execution_batch_size={queue.max_execution_batch_size}")
    if queue.adaptive_batch_timeout:
        parts.append(f"adaptive_batch_timeout=up to {queue.adaptive_timeout_cap_micros}us")
    return " ".join(parts)


def _invalid(message: str):
    raise errors.InvalidArgumentError(None, None, message)
