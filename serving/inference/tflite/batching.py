"""The batch scheduler TF Serving's ``TfLiteSession`` runs with ``--num_tflite_interpreters_per_pool``
above 1: a ``BasicBatchScheduler`` with no batch timeout (a batch runs as soon as a batch thread
is free), one batch thread per interpreter, large tasks split (``SplitTfLiteInputTask``), an input
batch limit of 500 rows, batches of at most ``max_execution_batch_size`` rows and at most
``max_enqueued_batches`` waiting. It is the session's own, below ``--enable_batching``'s
``BatchingSession``, which may wrap this session as it wraps any other.

Unlike TF Serving's, a batch only holds tasks that feed and fetch the same tensors with the same
dtypes and trailing dimensions: TF Serving concatenates whatever is queued and runs the first
task's fetches, so one odd request fails (or misanswers) the others of its batch.

Batch forming is pure (``split_rows``, ``merge``, ``split_outputs``); ``TfLiteBatchScheduler`` holds
the queue and the threads. Thread-safe.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from runtime import errors

logger = logging.getLogger(__name__)

INITIAL_BATCH_SIZE = 500  # TF Serving's kInitialBatchSize: the scheduler's max_batch_size
QUEUE_TIMEOUT_TEXT = "Run() timeout exceeded while waiting in batching queue"

RunBatch = Callable[[list[int], list[np.ndarray], list[int]], list]


def split_rows(size: int, room: int, max_rows: int) -> list[int]:
    """``SplitTfLiteInputTask``'s piece sizes: ``room`` rows into the open batch, then pieces of
    at most ``max_rows``."""
    sizes = [min(room, size)] if room > 0 else []
    left = size - sum(sizes)
    while left > 0:
        sizes.append(min(left, max_rows))
        left -= sizes[-1]
    return sizes


def merge(pieces: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """Each input's rows of every piece, concatenated in piece order."""
    if len(pieces) == 1:
        return list(pieces[0])
    return [np.concatenate(column) for column in zip(*pieces, strict=True)]


def split_outputs(outputs: Sequence[np.ndarray], rows: Sequence[int]) -> list[list[np.ndarray]]:
    """``SplitOutputTensors``: each piece's rows of every output (TF Serving's INTERNAL for an
    output whose first dimension is not the batch's)."""
    total = sum(rows)
    for output in outputs:
        if output.ndim == 0 or output.shape[0] != total:
            raise errors.InternalError(
                None,
                None,
                "Tensor split operation failed: INVALID_ARGUMENT: Sum of split sizes must not exceed "
                f"dim0-size of input tensor; output of shape {list(output.shape)}, batch of {total}",
            )
    bounds = np.cumsum(rows)[:-1]
    per_output = [np.split(output, bounds) for output in outputs]
    return [list(piece) for piece in zip(*per_output, strict=True)] if outputs else [[] for _ in rows]


class _Task:
    """One run: its pieces' outputs, in order, and the event its caller waits on."""

    def __init__(self, pieces: int, deadline: float | None) -> None:
        self.results: list[list | None] = [None] * pieces
        self.left = pieces
        self.error: Exception | None = None
        self.deadline = deadline
        self.done = threading.Event()

    def finish(self, piece: int, outputs: list | None, error: Exception | None) -> None:
        """Under the scheduler's lock."""
        self.results[piece] = outputs
        if error is not None and self.error is None:
            self.error = error
        self.left -= 1
        if self.left == 0:
            self.done.set()


class _Batch:
    __slots__ = ("key", "pieces", "rows")

    def __init__(self, key) -> None:
        self.key = key
        self.pieces: list[tuple[_Task, int, list[np.ndarray]]] = []  # (task, piece number, inputs)
        self.rows = 0


class TfLiteBatchScheduler:
    """Batches runs of one TfLiteSession on ``num_batch_threads`` threads; ``schedule`` blocks
    until its run is answered. ``stop`` fails what is still queued and ends the threads."""

    def __init__(
        self,
        run_batch: RunBatch,
        num_batch_threads: int,
        max_execution_batch_size: int,
        max_enqueued_batches: int,
    ) -> None:
        self._run_batch = run_batch
        self.max_execution_batch_size = self._max_rows = max(1, max_execution_batch_size)
        self.tasks_run = self.batches_run = 0  # (read by tests and logs; updated under the lock)
        self._max_batches = max_enqueued_batches
        self._cv = threading.Condition()
        self._queue: collections.deque[_Batch] = collections.deque()
        self._open: dict[tuple, _Batch] = {}
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._loop, name=f"tflite-batch-{i}", daemon=True)
            for i in range(max(1, num_batch_threads))
        ]
        for thread in self._threads:
            thread.start()

    def schedule(
        self, indices: list[int], values: list[np.ndarray], outputs: list[int], timeout_ms: int
    ) -> list:
        if not values or values[0].ndim == 0:  # no batch dimension: nothing to batch with
            return self._run_batch(indices, values, outputs)
        size = values[0].shape[0]
        if size > INITIAL_BATCH_SIZE:
            raise errors.InvalidArgumentError(
                None, None, f"Task size {size} is larger than maximum input batch size {INITIAL_BATCH_SIZE}"
            )
        key = (tuple(indices), tuple(outputs), tuple((v.dtype.str, v.shape[1:]) for v in values))
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        with self._cv:
            task = self._enqueue(key, values, size, deadline)
        task.done.wait()
        if task.error is not None:
            raise task.error
        pieces = task.results
        if len(pieces) == 1:
            return pieces[0]
        return [np.concatenate(column) for column in zip(*pieces, strict=True)]

    def _enqueue(self, key, values: list[np.ndarray], size: int, deadline: float | None) -> _Task:
        """Under the lock: the task's pieces into the open batch of its key and new batches."""
        if self._stopped:
            raise errors.UnavailableError(None, None, "The TF Lite session is closed")
        batch = self._open.get(key)
        room = self._max_rows - batch.rows if batch is not None else 0
        sizes = split_rows(size, room, self._max_rows) if size else [0]
        new_batches = len(sizes) - (1 if room > 0 else 0)
        if len(self._queue) + new_batches > self._max_batches:
            raise errors.UnavailableError(
                None, None, "The batch scheduling queue to which this task was submitted is full"
            )
        task = _Task(len(sizes), deadline)
        start = 0
        for piece, rows in enumerate(sizes):
            if batch is None or batch.rows + rows > self._max_rows:
                batch = _Batch(key)
                self._queue.append(batch)
                self._open[key] = batch
            batch.pieces.append((task, piece, [v[start : start + rows] for v in values]))
            batch.rows += rows
            start += rows
        self._cv.notify(len(sizes))
        return task

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopped:
                    self._cv.wait()
                if not self._queue:
                    return
                batch = self._queue.popleft()
                if self._open.get(batch.key) is batch:
                    del self._open[batch.key]
            self._process(batch)

    def _process(self, batch: _Batch) -> None:
        """``ProcessBatch``: every task of a batch gets its rows, or the batch's error."""
        indices, outputs, _ = batch.key
        now = time.monotonic()
        error: Exception | None = None
        results: list[list] = []
        if all(task.deadline is not None and task.deadline <= now for task, _, _ in batch.pieces):
            error = errors.ResourceExhaustedError(None, None, QUEUE_TIMEOUT_TEXT)
        else:
            try:
                merged = merge([inputs for _, _, inputs in batch.pieces])
                values = self._run_batch(list(indices), merged, list(outputs))
                results = split_outputs(values, [inputs[0].shape[0] for _, _, inputs in batch.pieces])
            except Exception as e:  # noqa: BLE001 - every task of a failing batch gets its error
                error = e
        with self._cv:
            self.batches_run += 1
            self.tasks_run += sum(1 for task, piece, _ in batch.pieces if piece == 0)
            for n, (task, piece, _) in enumerate(batch.pieces):
                task.finish(piece, None if error is not None else results[n], error)

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            queued, self._queue = list(self._queue), collections.deque()
            self._open.clear()
            for batch in queued:
                for task, piece, _ in batch.pieces:
                    task.finish(
                        piece, None, errors.UnavailableError(None, None, "The TF Lite session is closed")
                    )
            self._cv.notify_all()
        for thread in self._threads:
            thread.join(timeout=5)
