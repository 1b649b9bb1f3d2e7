"""TF's ``SharedBatchScheduler``: one pool of batch threads serving every model's queues.

Each ``BatchQueue`` (one per model version and set of input and output tensors) gathers tasks
into batches: the newest batch is open and takes tasks until it is full
(``max_execution_batch_size`` rows), then closes and a new one opens. A batch thread takes a
closed batch, or the open one once its timeout has passed since its first task (at once with a
timeout of 0), visiting the queues round-robin, and runs the queue's ``process_batch`` on it
outside any lock. A batch holds one queue's tasks only. At most ``num_batch_threads`` batches run
at once; a task that alone makes a batch ready at once, while one of those slots is free, runs on
its caller's thread (where TF would hand it to an idle batch thread) and saves two thread
switches.

Guarantees:

- ``BatchQueue.schedule`` never waits for a batch: it takes the scheduler's lock for a few list
  operations and answers at once. A task larger than the queue's ``max_batch_size`` is
  INVALID_ARGUMENT, a full queue (``max_enqueued_batches``) UNAVAILABLE, with TF's texts; the
  caller then waits on its own task (``BatchTask.wait``), never on a lock a running batch holds.
- With ``enable_large_batch_splitting``, a task larger than the room left in the open batch is
  cut into pieces that fill batches (``batch_forming.split_task_sizes``); its caller gets the
  pieces' outputs put back together, or the first piece's error.
- Every accepted task is answered exactly once: by ``process_batch``, or by ``stop`` when the
  grace period ends first. ``stop(grace_seconds)`` refuses new tasks, runs the queued ones
  without waiting for timeouts, waits up to ``grace_seconds`` for them, fails what is left
  with UNAVAILABLE and ends the threads.

Threads wait on one condition variable: an idle thread sleeps until a task makes a batch
schedulable or until the earliest open batch's timeout, and is woken only when a queue gains
something to do, so an idle server spends no CPU.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence

from runtime import errors
from serving.batching import batch_forming
from serving.batching.adaptive import AdaptiveTimeout
from serving.batching.parameters import QueueOptions, SchedulerOptions
from serving.batching.stats import QueueStats
from serving.batching.tasks import BatchTask, SplitTask
from serving.resources.memory import shared_by_all

logger = logging.getLogger(__name__)

ProcessBatch = Callable[[list[BatchTask]], None]


class BatchQueue:
    """One queue of ``SharedBatchScheduler``: TF's ``internal::Queue`` with its handle's API.

    Its state is guarded by the scheduler's lock. ``stats`` is the queue's ``QueueStats``."""

    def __init__(
        self,
        scheduler: SharedBatchScheduler,
        options: QueueOptions,
        process_batch: ProcessBatch,
        stats: QueueStats,
    ) -> None:
        self.options = options
        self.stats = stats
        self._scheduler = scheduler
        self._process_batch = process_batch
        self._max_size = options.max_execution_batch_size
        self._closed_batches: collections.deque[list[BatchTask]] = collections.deque()
        self._open: list[BatchTask] = []
        self._open_size = 0
        self._open_start = 0.0
        self._in_flight = 0  # batches being processed
        self._closed = False
        self._timeout = options.batch_timeout_micros / 1e6
        self._adaptive = (
            AdaptiveTimeout(options.adaptive_timeout_cap_micros / 1e6)
            if options.adaptive_batch_timeout
            else None
        )

    # -- the request side -------------------------------------------------------------------

    def schedule(self, task: BatchTask) -> BatchTask | None:
        """Queues ``task``; returns what to ``wait`` on (the task, or the ``SplitTask`` it was
        cut into), or None where the adaptive choice is to run it unbatched: the caller runs it
        and then calls ``unbatched_done``. Raises at once where the task cannot be queued."""
        scheduler = self._scheduler
        with scheduler._cv:
            try:
                if self._closed or scheduler._stopping:
                    raise errors.UnavailableError(
                        None, None, "The batch scheduling queue to which this task was submitted is closed"
                    )
                self._check_capacity(task.size)
            except errors.OpError as e:
                self.stats.task_rejected(e.code)
                raise
            self.stats.task_scheduled(task.size)
            if self._adaptive is not None:
                busy = bool(self._open or self._closed_batches or self._in_flight)
                self._adaptive.arrival(task.enqueued, task.size, busy)
                if self._adaptive.unbatched and not self._open and not self._closed_batches:
                    self._in_flight += 1  # (what ``busy`` sees, and ``stop`` waits for)
                    return None
            inline = self._runs_at_once(task)
            if inline:
                scheduler._running += 1
                self._in_flight += 1
            else:
                task = self._enqueue(task)
        if inline:
            self._run_inline(task)
        return task

    def unbatched_done(self, size: int, seconds: float) -> None:
        """A task ``schedule`` left to its caller (of ``size`` rows) ran, for ``seconds``: a
        batch of one task in the stats."""
        self.stats.batch_processed([size], 0, [0.0], 0, seconds)
        with self._scheduler._cv:
            self._in_flight -= 1
            self._scheduler._batch_done(self)

    def _runs_at_once(self, task: BatchTask) -> bool:
        """Whether ``task`` alone is a batch ready now with a batch thread free to take it: the
        queue holds nothing, its timeout is 0 and fewer than ``num_batch_threads`` batches run.
        TF's scheduler would hand it to an idle thread at once; its caller runs it instead,
        which saves two thread switches (a lone client's latency stays its unbatched one)."""
        scheduler = self._scheduler
        return (
            not self._open
            and not self._closed_batches
            and task.size <= self._max_size
            and scheduler._running < scheduler._max_running
            and (self._timeout if self._adaptive is None else self._adaptive.timeout) == 0
        )

    def _run_inline(self, task: BatchTask) -> None:
        """Runs a batch of ``task`` alone on the caller's thread, in a batch thread's slot."""
        scheduler = self._scheduler
        try:
            self._run([task])
        finally:
            with scheduler._cv:
                scheduler._running -= 1
                self._in_flight -= 1
                scheduler._batch_done(self)

    def _enqueue(self, task: BatchTask) -> BatchTask:
        """Adds ``task`` (or its pieces) to the batches; wakes an idle thread where a batch
        became ready or a timer started. Under the scheduler's lock."""
        scheduler = self._scheduler
        pieces: Sequence[BatchTask] = (task,)
        room = self._max_size - self._open_size
        if self.options.enable_large_batch_splitting and task.size > room:
            task = SplitTask(task, batch_forming.split_task_sizes(task.size, room, self._max_size))
            pieces = task.pieces
        wake = False
        for piece in pieces:
            if self._open_size + piece.size > self._max_size:
                self._close_open_batch()
                wake = True
            if not self._open:
                self._open_start = task.enqueued
                wake = True  # a timer starts (or, at timeout 0, a batch is ready)
            self._open.append(piece)
            self._open_size += piece.size
        if self._open_size >= self._max_size:
            wake = True
        if wake and scheduler._idle:
            scheduler._cv.notify()
        return task

    def _check_capacity(self, size: int) -> None:
        """TF's ``ValidateBatchTaskQueueCapacity``, texts included."""
        options = self.options
        if size > options.input_batch_size_limit:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Task size {size} is larger than maximum input batch size {options.input_batch_size_limit}",
            )
        batches = len(self._closed_batches) + 1  # TF counts the open batch among them
        if options.enable_large_batch_splitting:
            capacity = (
                (options.max_enqueued_batches - batches) * self._max_size + self._max_size - self._open_size
            )
            if size > capacity:
                raise errors.UnavailableError(
                    None,
                    None,
                    "The batch scheduling queue to which this task was submitted is full; task size is "
                    f"{size} but scheduling capacity is only {capacity} (num_enqueued_batches={batches}, "
                    f"max_enqueued_batches={options.max_enqueued_batches}, open_batch_size={self._open_size}, "
                    f"max_execution_batch_size={self._max_size})",
                )
        elif (
            self._open_size + size > options.input_batch_size_limit
            and batches >= options.max_enqueued_batches
        ):
            raise errors.UnavailableError(
                None,
                None,
                "The batch scheduling queue to which this task was submitted is full; currently "
                f"{batches} batches enqueued and max_enqueued_batches is {options.max_enqueued_batches}",
            )

    def num_enqueued_tasks(self) -> int:
        """Tasks accepted and not yet handed to a batch thread (queue depth, for monitoring)."""
        with self._scheduler._cv:
            return len(self._open) + sum(len(batch) for batch in self._closed_batches)

    # -- the batch-thread side (under the scheduler's lock) --------------------------------

    def _close_open_batch(self) -> None:
        self._closed_batches.append(self._open)
        self._open, self._open_size = [], 0

    def _take_batch(self, now: float, flush: bool) -> tuple[list[BatchTask] | None, float | None]:
        """A batch ready to run, else None and when the open batch will be (None: never
        without more tasks)."""
        if self._closed_batches:
            return self._closed_batches.popleft(), None
        if not self._open:
            return None, None
        if flush or self._closed or self._open_size >= self._max_size:
            ready_at = now
        elif self._adaptive is not None:
            ready_at = self._open_start + self._adaptive.timeout
        else:
            ready_at = self._open_start + self._timeout
        if now < ready_at:
            return None, ready_at
        batch = self._open
        self._open, self._open_size = [], 0
        return batch, None

    def _is_empty(self) -> bool:
        return not self._in_flight and not self._open and not self._closed_batches

    def _drop_queued(self) -> list[BatchTask]:
        """Every task not yet taken, removed (the caller fails them outside the lock)."""
        tasks = [t for batch in self._closed_batches for t in batch] + self._open
        self._closed_batches.clear()
        self._open, self._open_size = [], 0
        return tasks

    def _run(self, batch: list[BatchTask]) -> None:
        """Runs ``process_batch`` (outside the lock); a task it left unanswered (a bug) fails."""
        try:
            self._process_batch(batch)
        except BaseException as e:  # noqa: BLE001 - the batch's callers must hear of it
            logger.exception("Processing a batch failed")
            for task in batch:
                if not task.answered:
                    task.fail(errors.InternalError(None, None, f"Batch processing failed: {e}"))


@shared_by_all
class SharedBatchScheduler:
    """``num_batch_threads`` threads shared by every queue, round-robin; as many batches at most
    run at once (on those threads, or on the caller's thread of a batch ready alone). Thread-safe."""

    def __init__(
        self,
        options: SchedulerOptions,
        stats_factory: Callable[[str, str], QueueStats] = QueueStats,
    ) -> None:
        self.options = options
        self._stats_factory = stats_factory
        self._cv = threading.Condition(threading.Lock())
        self._queues: list[BatchQueue] = []
        self._next = 0  # the queue the next idle thread asks first
        self._idle = 0  # threads waiting on _cv
        self._running = 0  # batches being processed, by batch threads or callers (inline)
        self._max_running = options.num_batch_threads
        self._slot_wanted = False  # a thread found every slot taken
        self._stopping = False  # no new tasks; open batches run without waiting
        self._stopped = False  # threads end once no batch is left
        self._threads = [
            threading.Thread(target=self._thread_logic, name=f"{options.thread_pool_name}_{i}", daemon=True)
            for i in range(options.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def add_queue(
        self, options: QueueOptions, process_batch: ProcessBatch, name: str, model_name: str = ""
    ) -> BatchQueue:
        """A new queue whose batches ``process_batch`` runs (on a batch thread); ``name`` and
        ``model_name`` label its stats."""
        queue = BatchQueue(self, options, process_batch, self._stats_factory(name, model_name))
        with self._cv:
            if self._stopping:
                raise errors.UnavailableError(None, None, "The batch scheduler is stopped")
            self._queues.append(queue)
        return queue

    def remove_queue(self, queue: BatchQueue) -> None:
        """``CloseAndWaitUntilEmpty``: refuses new tasks, runs the queued ones at once and
        returns when the queue is empty (or the scheduler has stopped)."""
        with self._cv:
            queue._closed = True
            self._cv.notify_all()
            self._cv.wait_for(lambda: queue._is_empty() or self._stopped)
            if queue in self._queues:
                self._queues.remove(queue)
        _log_summary(queue)

    def queues(self) -> list[BatchQueue]:
        with self._cv:
            return list(self._queues)

    def stop(self, grace_seconds: float) -> bool:
        """Refuses new tasks, runs those queued without waiting for timeouts, waits up to
        ``grace_seconds`` for them; then fails what is left (UNAVAILABLE) and ends the threads.
        Returns whether every task ran. Idempotent."""
        dropped: list[BatchTask] = []
        with self._cv:
            if self._stopped:
                return all(q._is_empty() for q in self._queues)
            self._stopping = True
            self._cv.notify_all()
            drained = self._cv.wait_for(
                lambda: all(q._is_empty() for q in self._queues), timeout=max(0.0, grace_seconds)
            )
            if not drained:
                for queue in self._queues:
                    dropped += queue._drop_queued()
            self._stopped = True
            self._cv.notify_all()
        for task in dropped:
            task.fail(
                errors.UnavailableError(None, None, "The batch scheduler stopped before this task could run")
            )
        if dropped:
            logger.warning("Batch scheduler stopped with %d queued task(s) not run", len(dropped))
        for queue in self.queues():
            _log_summary(queue)
        return drained

    # -- batch threads ------------------------------------------------------------------------

    def _thread_logic(self) -> None:
        cv = self._cv
        while True:
            with cv:
                while True:
                    if self._running < self._max_running:
                        queue, batch, wait = self._next_batch()
                        if batch is not None:
                            self._running += 1
                            queue._in_flight += 1
                            break
                    else:
                        self._slot_wanted, wait = True, None
                    if self._stopped:
                        return
                    self._idle += 1
                    cv.wait(wait)
                    self._idle -= 1
            queue._run(batch)
            with cv:
                self._running -= 1
                queue._in_flight -= 1
                if queue._closed or self._stopping:
                    cv.notify_all()  # remove_queue and stop wait for queues to empty

    def _batch_done(self, queue: BatchQueue) -> None:
        """A batch run by its caller ended (under the lock): wake who waits for its slot."""
        if queue._closed or self._stopping:
            self._cv.notify_all()
        elif self._slot_wanted and self._idle:
            self._slot_wanted = False
            self._cv.notify()

    def _next_batch(self) -> tuple[BatchQueue | None, list[BatchTask] | None, float | None]:
        """The next queue's batch, round-robin; else how long to sleep (None: until woken)."""
        now = time.monotonic()
        count = len(self._queues)
        wake_at = None
        flush = self._stopping
        for _ in range(count):
            index = self._next % count
            self._next = index + 1
            queue = self._queues[index]
            batch, ready_at = queue._take_batch(now, flush)
            if batch is not None:
                return queue, batch, None
            if ready_at is not None and (wake_at is None or ready_at < wake_at):
                wake_at = ready_at
        return None, None, None if wake_at is None else max(0.0, wake_at - now)


def _log_summary(queue: BatchQueue) -> None:
    """What a queue did, when it did anything: whether batching pays shows here."""
    if queue.stats.tasks or queue.stats.rejected:
        logger.info("Batching of %s: %s", queue.stats.name, queue.stats.summary())
