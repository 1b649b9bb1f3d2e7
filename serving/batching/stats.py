"""What batching reports about itself: one ``QueueStats`` per queue, the hooks metrics use.

TF Serving records, per batching queue, the size of each task (``input_batch_size``), of each
batch as it runs (``processed_batch_size``), the rows padded onto it (``padding_size``) and
each task's time in the queue (``queuing_latency``); our monitoring exports the same. The
scheduler and the batching session call the methods below and nothing else, so a metrics
exporter subclasses ``QueueStats`` (and hands ``SharedBatchScheduler`` its factory) without
touching the scheduling logic. The base class keeps plain totals, which the log prints when a
queue closes and tests read. Thread-safe: counters change under the instance's own lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from serving.observability import metrics


class QueueStats:
    """Totals of one queue (one model version and set of tensors)."""

    def __init__(self, name: str, model_name: str = "") -> None:
        self.name, self.model_name = name, model_name
        self._lock = threading.Lock()
        self.tasks = 0  # accepted Run() calls (a split task counts once)
        self.rejected = 0  # refused at once: queue full or task too large
        self.expired = 0  # deadline passed while queued
        self.batches = 0
        self.rows = 0  # rows of the tasks that ran
        self.padding_rows = 0
        self.queuing_seconds = 0.0  # summed over the tasks that left the queue
        self.run_seconds = 0.0  # summed over the batches: merge, Session run, split

    def task_scheduled(self, size: int) -> None:
        """A task of ``size`` rows entered the queue (``input_batch_size``)."""
        with self._lock:
            self.tasks += 1

    def task_rejected(self, code: int) -> None:
        """A task was refused before queuing, with the canonical error ``code``."""
        with self._lock:
            self.rejected += 1

    def batch_processed(
        self,
        task_sizes: Sequence[int],
        padding: int,
        queuing: Sequence[float],
        expired: int,
        run_seconds: float,
    ) -> None:
        """A batch left the queue: the sizes of the tasks that ran, the rows padded on
        (``processed_batch_size`` is their sum), each task's time queued, how many tasks were
        dropped for their deadline, and how long the batch took to run."""
        with self._lock:
            self.expired += expired
            self.queuing_seconds += sum(queuing)
            if task_sizes:
                self.batches += 1
                self.rows += sum(task_sizes)
                self.padding_rows += padding
                self.run_seconds += run_seconds

    def summary(self) -> str:
        with self._lock:
            batches = max(1, self.batches)
            return (
                f"{self.tasks} tasks in {self.batches} batches, mean batch size {self.rows / batches:.1f} rows, "
                f"mean batch run {self.run_seconds / batches * 1e3:.2f} ms, "
                f"{self.padding_rows} padding rows, mean queuing {self.queuing_seconds / max(1, self.tasks) * 1e3:.2f} ms, "
                f"{self.expired} expired in queue, {self.rejected} refused"
            )


class ExportedQueueStats(QueueStats):
    """``QueueStats`` that also records TF Serving's batching metrics (``serving.observability.metrics``):
    the size of each task and batch, the padding, and each task's time queued."""

    def __init__(self, name: str, model_name: str = "", thread_pool_name: str = "") -> None:
        super().__init__(name, model_name)
        self._input_size = metrics.input_batch_size.labels(model_name)
        self._processed_size = metrics.processed_batch_size.labels(model_name)
        self._padding = metrics.padding_size.labels(model_name)
        self._queuing = metrics.queuing_latency.labels(thread_pool_name)

    def task_scheduled(self, size: int) -> None:
        super().task_scheduled(size)
        self._input_size.observe(size)

    def batch_processed(self, task_sizes, padding, queuing, expired, run_seconds) -> None:
        super().batch_processed(task_sizes, padding, queuing, expired, run_seconds)
        for seconds in queuing:
            self._queuing.observe(seconds * 1e6)
        if task_sizes:
            self._processed_size.observe(sum(task_sizes) + padding)
            self._padding.observe(padding)
