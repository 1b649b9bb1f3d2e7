"""The shared batch scheduler with real threads: batching, timeouts, full queues, failures,
fairness and shutdown behave as TF's SharedBatchScheduler does (codes and texts included)."""

from __future__ import annotations

import threading
import time

import pytest

from runtime import errors
from serving.batching.parameters import QueueOptions, SchedulerOptions
from serving.batching.scheduler import SharedBatchScheduler
from serving.batching.tasks import BatchTask


class Recorder:
    """A process_batch: records each batch's task payloads; answers each task with its
    payload; ``gate`` (when set) holds every batch until released."""

    def __init__(self, gate: threading.Event | None = None, fail: Exception | None = None):
        self.batches: list[list] = []
        self.gate, self.fail = gate, fail
        self.started = threading.Event()

    def __call__(self, tasks: list[BatchTask]) -> None:
        self.batches.append([t.inputs for t in tasks])
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        for t in tasks:
            if self.fail is not None:
                t.fail(self.fail)
            else:
                t.finish(t.inputs)


def task(payload, size: int = 1, deadline: float | None = None) -> BatchTask:
    return BatchTask(payload, size, time.monotonic(), deadline)


@pytest.fixture
def scheduler():
    made = []

    def make(threads: int = 1) -> SharedBatchScheduler:
        made.append(SharedBatchScheduler(SchedulerOptions(threads, "test_batch_threads")))
        return made[-1]

    yield make
    for s in made:
        s.stop(5)


class Background:
    """``queue.schedule(task).wait()`` on a thread of its own (a task that runs at once runs on
    its caller's thread: tests that hold a batch must not be that caller)."""

    def __init__(self, queue, task: BatchTask):
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(queue, task))
        self.thread.start()

    def _run(self, queue, task):
        try:
            self.result = queue.schedule(task).wait()
        except Exception as e:  # noqa: BLE001 - the test looks at it
            self.result = e

    def wait(self):
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.result


def run_in_threads(fn, items) -> list:
    results: list = [None] * len(items)

    def call(i):
        try:
            results[i] = fn(items[i])
        except Exception as e:  # noqa: BLE001 - the test looks at it
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results


def test_tasks_that_wait_together_run_as_one_batch(scheduler):
    record = Recorder()
    options = QueueOptions(
        input_batch_size_limit=8, max_execution_batch_size=8, batch_timeout_micros=60_000_000
    )
    queue = scheduler().add_queue(options, record, "q")
    start = time.monotonic()
    results = run_in_threads(lambda i: queue.schedule(task(i)).wait(), list(range(8)))
    assert time.monotonic() - start < 30  # a full batch does not wait for its timeout
    assert results == list(range(8))
    assert len(record.batches) == 1 and sorted(record.batches[0]) == list(range(8))
    assert queue.stats.tasks == 8


def test_a_lone_task_waits_for_the_timeout_then_runs_alone(scheduler):
    record = Recorder()
    queue = scheduler().add_queue(QueueOptions(batch_timeout_micros=200_000), record, "q")
    start = time.monotonic()
    assert queue.schedule(task("a")).wait() == "a"
    assert time.monotonic() - start >= 0.2
    assert record.batches == [["a"]]


def test_timeout_zero_runs_at_once_and_tasks_pile_up_while_the_thread_is_busy(scheduler):
    gate = threading.Event()
    record = Recorder(gate)
    queue = scheduler(threads=1).add_queue(QueueOptions(), record, "q")
    first = Background(queue, task("first"))
    assert record.started.wait(5)
    later = [queue.schedule(task(i)) for i in range(5)]  # the one thread is busy
    gate.set()
    assert first.wait() == "first" and [t.wait() for t in later] == list(range(5))
    assert record.batches == [["first"], [0, 1, 2, 3, 4]]


def test_a_full_batch_closes_and_the_next_opens(scheduler):
    gate = threading.Event()
    record = Recorder(gate)
    queue = scheduler(threads=1).add_queue(
        QueueOptions(input_batch_size_limit=3, max_execution_batch_size=3), record, "q"
    )
    blocker = Background(queue, task("x"))
    assert record.started.wait(5)
    waiting = [queue.schedule(task(i, size=2)) for i in range(3)]  # 2 + 2 > 3: one task per batch
    gate.set()
    blocker.wait()
    assert [t.wait() for t in waiting] == [0, 1, 2]
    assert record.batches == [["x"], [0], [1], [2]]


def test_schedule_never_waits_for_a_running_batch(scheduler):
    gate = threading.Event()
    record = Recorder(gate)
    queue = scheduler(threads=1).add_queue(QueueOptions(), record, "q")
    running = Background(queue, task("running"))
    assert record.started.wait(5)
    start = time.monotonic()
    pending = [queue.schedule(task(i)) for i in range(100)]
    assert time.monotonic() - start < 1.0  # the batch still runs: schedule did not wait for it
    assert queue.num_enqueued_tasks() == 100
    gate.set()
    assert [t.wait() for t in pending] == list(range(100))
    assert running.wait() == "running"


def test_a_task_larger_than_max_batch_size_is_invalid_argument(scheduler):
    queue = scheduler().add_queue(
        QueueOptions(input_batch_size_limit=4, max_execution_batch_size=4), Recorder(), "q"
    )
    with pytest.raises(errors.InvalidArgumentError) as raised:
        queue.schedule(task("big", size=5))
    assert raised.value.message == "Task size 5 is larger than maximum input batch size 4"
    assert queue.stats.rejected == 1


def test_a_full_queue_answers_unavailable_at_once_and_loses_nothing_else(scheduler):
    gate = threading.Event()
    record = Recorder(gate)
    options = QueueOptions(input_batch_size_limit=2, max_execution_batch_size=2, max_enqueued_batches=2)
    queue = scheduler(threads=1).add_queue(options, record, "q")
    running = Background(queue, task("run", size=2))
    assert record.started.wait(5)
    accepted = [queue.schedule(task(i)) for i in range(4)]  # two batches of 2: the queue's limit
    start = time.monotonic()
    with pytest.raises(errors.UnavailableError) as raised:
        queue.schedule(task("one too many"))
    assert time.monotonic() - start < 0.5
    assert raised.value.message == (
        "The batch scheduling queue to which this task was submitted is full; currently 2 batches enqueued "
        "and max_enqueued_batches is 2"
    )
    gate.set()
    assert running.wait() == "run" and [t.wait() for t in accepted] == [0, 1, 2, 3]
    assert record.batches[1:] == [[0, 1], [2, 3]]
    assert queue.schedule(task("again")).wait() == "again"  # room again once batches ran


def test_a_full_queue_with_splitting_names_its_capacity(scheduler):
    gate = threading.Event()
    record = Recorder(gate)
    options = QueueOptions(
        input_batch_size_limit=8,
        max_execution_batch_size=4,
        max_enqueued_batches=2,
        enable_large_batch_splitting=True,
    )
    queue = scheduler(threads=1).add_queue(options, record, "q")
    running = Background(queue, task("run"))
    assert record.started.wait(5)
    queue.schedule(task("a", size=3))
    with pytest.raises(errors.UnavailableError) as raised:
        queue.schedule(task("b", size=6))
    assert raised.value.message == (
        "The batch scheduling queue to which this task was submitted is full; task size is 6 but scheduling "
        "capacity is only 5 (num_enqueued_batches=1, max_enqueued_batches=2, open_batch_size=3, "
        "max_execution_batch_size=4)"
    )
    gate.set()
    assert running.wait() == "run"


def test_a_failing_batch_fails_each_of_its_tasks_and_the_next_batch_runs(scheduler):
    fail = Recorder(fail=errors.InternalError(None, None, "kernel failed"))
    s = scheduler()
    failing = s.add_queue(QueueOptions(batch_timeout_micros=100_000), fail, "failing")
    results = run_in_threads(lambda i: failing.schedule(task(i)).wait(), list(range(4)))
    assert all(isinstance(r, errors.InternalError) and r.message == "kernel failed" for r in results)
    assert len({id(r) for r in results}) == 4  # each caller raises its own copy
    fail.fail = None
    assert failing.schedule(task("next")).wait() == "next"


def test_a_process_batch_that_raises_still_answers_every_task(scheduler):
    def broken(tasks):
        tasks[0].finish("first")
        raise RuntimeError("bug")

    queue = scheduler().add_queue(QueueOptions(batch_timeout_micros=100_000), broken, "q")
    results = run_in_threads(lambda i: queue.schedule(task(i)).wait(), [0, 1, 2])
    assert results.count("first") == 1
    others = [r for r in results if r != "first"]
    assert all(
        isinstance(r, errors.InternalError) and "Batch processing failed: bug" in r.message for r in others
    )


def test_queues_share_the_threads_round_robin(scheduler):
    gate = threading.Event()
    order: list[str] = []

    def process(name):
        def run(tasks):
            gate.wait(10)
            order.append(name)
            for t in tasks:
                t.finish(t.inputs)

        return run

    s = scheduler(threads=1)
    options = QueueOptions(  # a timeout: no task runs on its caller's thread here
        input_batch_size_limit=1,
        max_execution_batch_size=1,
        max_enqueued_batches=100,
        batch_timeout_micros=10**6,
    )
    a, b = s.add_queue(options, process("a"), "a"), s.add_queue(options, process("b"), "b")
    tasks = [a.schedule(task(i)) for i in range(4)] + [b.schedule(task(i)) for i in range(4)]
    gate.set()
    for t in tasks:
        t.wait()
    assert order[1:7] in (["b", "a"] * 3, ["a", "b"] * 3)


def test_large_batch_splitting_spreads_a_task_over_batches_and_reassembles_it(scheduler):
    import numpy as np

    batches = []

    def process(tasks):
        batches.append([t.size for t in tasks])
        for t in tasks:
            t.finish([t.inputs[0] * 10])

    options = QueueOptions(
        input_batch_size_limit=10,
        max_execution_batch_size=4,
        enable_large_batch_splitting=True,
        batch_timeout_micros=50_000,
        max_enqueued_batches=10,
    )
    queue = scheduler().add_queue(options, process, "q")
    values = np.arange(10)
    got = queue.schedule(BatchTask([values], 10, time.monotonic(), None)).wait()
    np.testing.assert_array_equal(got[0], values * 10)
    assert sorted(sum(batches, [])) == [2, 4, 4] and all(sum(b) <= 4 for b in batches)


def test_stop_runs_queued_tasks_without_waiting_for_their_timeout(scheduler):
    record = Recorder()
    s = scheduler()
    queue = s.add_queue(QueueOptions(batch_timeout_micros=60_000_000), record, "q")
    pending = [queue.schedule(task(i)) for i in range(3)]
    start = time.monotonic()
    assert s.stop(grace_seconds=10) is True
    assert time.monotonic() - start < 5
    assert [t.wait() for t in pending] == [0, 1, 2]
    with pytest.raises(errors.UnavailableError) as raised:
        queue.schedule(task("late"))
    assert raised.value.message == "The batch scheduling queue to which this task was submitted is closed"


def test_stop_fails_what_the_grace_period_leaves_queued(scheduler):
    gate = threading.Event()
    record = Recorder(gate)
    s = scheduler(threads=1)
    queue = s.add_queue(QueueOptions(input_batch_size_limit=1, max_execution_batch_size=1), record, "q")
    running = Background(queue, task("running"))
    assert record.started.wait(5)
    queued = [queue.schedule(task(i)) for i in range(3)]
    assert s.stop(grace_seconds=0.2) is False
    for t in queued:
        with pytest.raises(errors.UnavailableError) as raised:
            t.wait()
        assert raised.value.message == "The batch scheduler stopped before this task could run"
    gate.set()
    assert running.wait() == "running"  # the batch already running still answers its tasks


def test_remove_queue_runs_what_is_queued_then_removes_it(scheduler):
    record = Recorder()
    s = scheduler()
    queue = s.add_queue(QueueOptions(batch_timeout_micros=60_000_000), record, "q")
    pending = queue.schedule(task("queued"))
    s.remove_queue(queue)
    assert pending.wait() == "queued"
    assert queue not in s.queues()


def test_a_task_ready_at_once_runs_on_its_callers_thread_within_num_batch_threads(scheduler):
    threads_seen = []

    def process(tasks):
        threads_seen.append(threading.current_thread().name)
        for t in tasks:
            t.finish(t.inputs)

    queue = scheduler(threads=1).add_queue(QueueOptions(), process, "q")
    assert queue.schedule(task("alone")).wait() == "alone"
    assert threads_seen == [threading.current_thread().name]  # no hand-off to a batch thread

    gate = threading.Event()
    record = Recorder(gate)
    busy = scheduler(threads=1).add_queue(QueueOptions(), record, "busy")
    first = Background(busy, task("first"))  # takes the one slot, on its caller's thread
    assert record.started.wait(5)
    second = busy.schedule(task("second"))  # no slot free: queued, not run by this thread
    assert not second.answered
    gate.set()
    assert first.wait() == "first" and second.wait() == "second"
    assert record.batches == [["first"], ["second"]]


def test_a_timeout_keeps_tasks_off_their_callers_thread(scheduler):
    record = Recorder()
    queue = scheduler().add_queue(QueueOptions(batch_timeout_micros=1000), record, "q")
    assert queue.schedule(task("a")).wait() == "a"
    assert queue.stats.tasks == 1 and record.batches == [["a"]]
