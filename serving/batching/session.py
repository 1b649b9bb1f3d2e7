"""TF Serving's ``BatchingSession``: a Session whose Run() calls are batched with others'.

It has the interface the request path uses of a Session (``run``, ``make_callable`` with
``options`` / ``timeout_ms``, ``close``; anything else is the wrapped Session's), so Predict,
Classify, Regress and MultiInference run through it without knowing. A call feeds and fetches
tensor names; the set of names fed and the set fetched (TF's ``TensorSignature``) pick its
queue: one per SignatureDef, made when the version is wrapped, and one per other combination
(an ``output_filter``, a MultiInference's union), made on first use, up to
``MAX_CUSTOM_QUEUES``; past that a call runs unbatched. A batch runs every output of its
queue's tensors, fed the concatenated inputs (``batch_forming``), and each task gets its rows.

Per batch, as TF Serving: a task whose deadline passed in the queue is answered
RESOURCE_EXHAUSTED and left out; the batch's timeout is the latest deadline left among its
tasks (none if one has none); an error fails every task of the batch, and the next batch runs.
Thread-safe; a call blocks only on its own task.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Sequence

import numpy as np

from runtime import errors
from serving.batching import batch_forming
from serving.batching.parameters import QueueOptions
from serving.batching.scheduler import BatchQueue, SharedBatchScheduler
from serving.batching.tasks import BatchTask
from serving.inference import signatures
from serving.observability import tracing

logger = logging.getLogger(__name__)

MAX_CUSTOM_QUEUES = 64  # queues for tensor sets no SignatureDef names; a bound on memory
_WARN_EVERY_SECONDS = 120
QUEUE_TIMEOUT_TEXT = "Run() timeout exceeded while waiting in batching queue"

TensorSignature = tuple[tuple[str, ...], tuple[str, ...]]  # (sorted input names, sorted output names)


def tensor_signature(inputs: Iterable[str], outputs: Iterable[str]) -> TensorSignature:
    """TF's ``TensorSignature``: the sets of tensors fed and fetched (here sorted tuples)."""
    return tuple(sorted(set(inputs))), tuple(sorted(set(outputs)))


class _SignatureBatcher:
    """One queue and what its batches run: the wrapped Session's callable of the signature's
    inputs and outputs, in sorted name order."""

    def __init__(
        self, session, scheduler: SharedBatchScheduler, options: QueueOptions, key, name: str, model_name: str
    ):
        self.inputs, self.outputs = key
        self._options = options
        self._run = signatures.session_callable(session, self.inputs, self.outputs)
        self.queue: BatchQueue = scheduler.add_queue(options, self.process_batch, name, model_name)

    def call(self, values: list, timeout_ms: int) -> list:
        """Runs one task of ``values`` (in ``inputs`` order); its rows of every output."""
        for i, value in enumerate(values):
            if type(value) is not np.ndarray:
                values[i] = np.asarray(value)
        size = batch_forming.input_batch_size(values)
        now = time.monotonic()
        deadline = now + timeout_ms / 1000 if timeout_ms > 0 else None
        task = self.queue.schedule(BatchTask(values, size, now, deadline))
        if task is not None:
            return task.wait()
        try:  # the adaptive queue's choice: this task alone, here, checked as a batch of one
            return batch_forming.split_outputs(self._run(*values, timeout_ms=timeout_ms), [size], 0)[0]
        finally:
            self.queue.unbatched_done(size, time.monotonic() - now)

    def process_batch(self, tasks: list[BatchTask]) -> None:
        """``ProcessBatch``, on a batch thread: answers every task of the batch (once its stats
        are recorded, so that a caller who got its answer sees them)."""
        now = time.monotonic()
        live, expired, latest = _expired(tasks, now)
        sizes = [task.size for task in live]
        padding, outcome = 0, []
        if live:
            timeout_ms = 0 if latest is None else max(1, math.ceil((latest - now) * 1000))
            padding, outcome = self._run_batch(live, sizes, timeout_ms)
        queuing = [now - task.enqueued for task in tasks]
        self.queue.stats.batch_processed(sizes, padding, queuing, len(expired), time.monotonic() - now)
        for task in expired:
            task.fail(errors.ResourceExhaustedError(None, None, QUEUE_TIMEOUT_TEXT))
        if isinstance(outcome, Exception):
            for task in live:
                task.fail(outcome)
        else:
            for task, task_outputs in zip(live, outcome):
                task.finish(task_outputs)

    def _run_batch(
        self, tasks: list[BatchTask], sizes: list[int], timeout_ms: int
    ) -> tuple[int, list | Exception]:
        """Merges, runs and splits one batch: the padding rows and each task's outputs, or the
        error that fails every task of the batch."""
        options = self._options
        try:
            merged, padding = batch_forming.merge_inputs(
                [task.inputs for task in tasks],
                self.inputs,
                options.allowed_batch_sizes,
                options.pad_variable_length_inputs,
            )
            outputs = self._run(*merged, timeout_ms=timeout_ms)
            return padding, batch_forming.split_outputs(outputs, sizes, padding)
        except Exception as e:  # noqa: BLE001 - every task of a failing batch gets its error
            return 0, e


def _expired(tasks: list[BatchTask], now: float) -> tuple[list[BatchTask], list[BatchTask], float | None]:
    """The tasks whose deadline has not passed, those whose deadline has, and the latest
    deadline among the first (None where one has none)."""
    live, expired = [], []
    latest: float | None = 0.0
    for task in tasks:
        if task.deadline is None:
            latest = None
        elif task.deadline <= now:
            expired.append(task)
            continue
        elif latest is not None and task.deadline > latest:
            latest = task.deadline
        live.append(task)
    return live, expired, latest


class BatchingSession:
    """A Session batching Run() calls of one servable version; see the module docstring."""

    def __init__(
        self,
        session,
        scheduler: SharedBatchScheduler,
        options: QueueOptions,
        signature_keys: Iterable[TensorSignature],
        name: str = "",
        model_name: str = "",
    ) -> None:
        self._wrapped = session
        self._scheduler = scheduler
        self._options = options
        self._name, self._model_name = name, model_name
        self._lock = threading.Lock()  # guards the custom queues
        self._batchers: dict[TensorSignature, _SignatureBatcher] = {}
        self._custom = 0
        self._closed = False
        self._warned = -_WARN_EVERY_SECONDS
        for key in signature_keys:
            if key[0] and key[1] and key not in self._batchers:
                self._batchers[key] = self._new_batcher(key)

    @property
    def wrapped(self):
        return self._wrapped

    def __getattr__(self, name: str):  # graph, delegation_report, ...: the wrapped Session's
        if name.startswith("_"):  # (not ours: copy and pickle probe before __init__ ran)
            raise AttributeError(name)
        return getattr(self._wrapped, name)

    def _new_batcher(self, key: TensorSignature) -> _SignatureBatcher:
        label = f"{self._name} {{inputs: {', '.join(key[0])}; outputs: {', '.join(key[1])}}}"
        return _SignatureBatcher(
            self._wrapped, self._scheduler, self._options, key, label.strip(), self._model_name
        )

    def _batcher(self, key: TensorSignature) -> _SignatureBatcher | None:
        """The queue of ``key``: a SignatureDef's, else a custom one (None past the bound)."""
        if not key[0]:
            batch_forming.input_batch_size(())  # TF's text for a Run() that feeds nothing
        batcher = self._batchers.get(key)
        if batcher is not None:
            return batcher
        with self._lock:
            batcher = self._batchers.get(key)
            if batcher is None and self._custom < MAX_CUSTOM_QUEUES and not self._closed:
                batcher = self._batchers[key] = self._new_batcher(key)
                self._custom += 1
        if batcher is None:
            now = time.monotonic()
            if now - self._warned >= _WARN_EVERY_SECONDS:  # TF Serving's LOG_EVERY_N_SEC
                self._warned = now
                logger.warning("Request doesn't match any batching queue; bypassing batcher: %s", key)
        return batcher

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """``Session.run`` of tensor names, batched; ``options`` gives the timeout."""
        names = _fetch_names(fetches)
        feeds = {_name(k): v for k, v in (feed_dict or {}).items()}
        key = tensor_signature(feeds, names)
        batcher = self._batcher(key)
        if batcher is None:
            return self._wrapped.run(fetches, feed_dict, options=options, run_metadata=run_metadata)
        timeout_ms = options.timeout_in_ms if options is not None else 0
        with tracing.span("batching queue"):  # (waiting for its batch, and the batch's run)
            outputs = batcher.call([feeds[name] for name in key[0]], timeout_ms)
        index = {name: i for i, name in enumerate(key[1])}
        values = [outputs[index[name]] for name in names]
        return values[0] if isinstance(fetches, str) else values

    def make_callable(self, fetches, feed_list: Sequence | None = None, accept_options: bool = False):
        """``Session.make_callable``: ``call(*feed_values, options=None, timeout_ms=0)``."""
        unbatched = self._wrapped.make_callable(fetches, feed_list, accept_options=accept_options)
        names = _fetch_names(fetches)
        feeds = [_name(k) for k in (feed_list or ())]
        key = tensor_signature(feeds, names)
        batcher = self._batcher(key) if len(set(feeds)) == len(feeds) else None
        if batcher is None:
            return unbatched
        order = [feeds.index(name) for name in key[0]]
        picks = [key[1].index(name) for name in names]
        single = isinstance(fetches, str)

        def call(*feed_values, options=None, run_metadata=None, timeout_ms: int = 0):
            if len(feed_values) != len(order):
                raise TypeError(f"Expected {len(order)} feed arguments, got {len(feed_values)}")
            if options is not None:
                timeout_ms = options.timeout_in_ms
            with tracing.span("batching queue"):  # (waiting for its batch, and the batch's run)
                outputs = batcher.call([feed_values[i] for i in order], timeout_ms)
            return outputs[picks[0]] if single else [outputs[i] for i in picks]

        return call

    def close(self) -> None:
        """Runs what is queued, removes the queues from the scheduler, closes the Session."""
        with self._lock:
            self._closed = True
            batchers = list(self._batchers.values())
        for batcher in batchers:
            self._scheduler.remove_queue(batcher.queue)
        close = getattr(self._wrapped, "close", None)
        if close is not None:
            close()

    def queues(self) -> list[BatchQueue]:
        with self._lock:
            return [batcher.queue for batcher in self._batchers.values()]


def _name(tensor) -> str:
    return tensor if isinstance(tensor, str) else tensor.name


def _fetch_names(fetches) -> list[str]:
    """The tensor names fetched; a target (an op name, without ":") is refused, as TF Serving's
    BatchingSession refuses target nodes."""
    single = isinstance(fetches, str) or hasattr(fetches, "name")
    names = [_name(fetches)] if single else [_name(f) for f in fetches]
    for name in names:
        if ":" not in name:
            raise errors.PermissionDeniedError(None, None, "BatchingSession does not support target nodes")
    return names
