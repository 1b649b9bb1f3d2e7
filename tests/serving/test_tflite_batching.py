"""The TF Lite session's own batch scheduler (``serving.inference.tflite.batching``): batch forming
as pure functions, then the scheduler with a stand-in run, held until tasks have queued."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from runtime import errors
from serving.inference.tflite.batching import (
    QUEUE_TIMEOUT_TEXT,
    TfLiteBatchScheduler,
    merge,
    split_outputs,
    split_rows,
)


@pytest.mark.parametrize(
    ("size", "room", "max_rows", "pieces"),
    [
        (3, 0, 8, [3]),
        (3, 5, 8, [3]),
        (7, 2, 3, [2, 3, 2]),
        (10, 0, 4, [4, 4, 2]),
        (4, 4, 4, [4]),
        (9, 1, 4, [1, 4, 4]),
    ],
)
def test_split_rows_fills_the_open_batch_then_splits(size, room, max_rows, pieces):
    assert split_rows(size, room, max_rows) == pieces


def test_merge_and_split_outputs_are_inverse():
    a, b = np.arange(6).reshape(3, 2), np.arange(6, 10).reshape(2, 2)
    (merged,) = merge([[a], [b]])
    assert merged.tolist() == np.concatenate([a, b]).tolist()
    pieces = split_outputs([merged * 10], [3, 2])
    assert [p[0].tolist() for p in pieces] == [(a * 10).tolist(), (b * 10).tolist()]
    with pytest.raises(errors.InternalError, match="^Tensor split operation failed"):
        split_outputs([np.zeros((4, 2))], [3, 2])
    with pytest.raises(errors.InternalError, match="^Tensor split operation failed"):
        split_outputs([np.float32(1.0)], [1])


class HeldRun:
    """A batch run that waits for ``release`` and records each batch's rows; doubles inputs."""

    def __init__(self, fail_on_rows: int | None = None):
        self.release = threading.Event()
        self.batches: list[int] = []
        self.fail_on_rows = fail_on_rows

    def __call__(self, indices, values, outputs):
        self.release.wait(10)
        self.batches.append(values[0].shape[0])
        if values[0].shape[0] == self.fail_on_rows:
            raise errors.InternalError(None, None, "Failed to invoke TfLite interpreter")
        return [values[0] * 2 for _ in outputs]


def run_async(scheduler, values, timeout_ms=0, indices=(0,), outputs=(1,)):
    result: dict = {}

    def go():
        try:
            result["value"] = scheduler.schedule(list(indices), values, list(outputs), timeout_ms)
        except errors.OpError as e:
            result["error"] = e

    thread = threading.Thread(target=go)
    thread.start()
    return thread, result


def wait_queued(scheduler, batches: int):
    deadline = time.monotonic() + 5
    while len(scheduler._queue) < batches:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_tasks_queued_behind_a_busy_thread_share_a_batch_and_get_their_rows():
    run = HeldRun()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=1, max_execution_batch_size=8, max_enqueued_batches=10
    )
    first = run_async(scheduler, [np.ones((1, 2), np.float32)])
    time.sleep(0.05)  # the one thread holds the first task's batch
    jobs = [run_async(scheduler, [np.full((rows, 2), rows, np.float32)]) for rows in (2, 3, 4)]
    wait_queued(scheduler, 2)  # 2 + 3 + 3 of the 4 rows fill one batch of 8; 1 row opens the next
    run.release.set()
    for thread, _ in [first, *jobs]:
        thread.join(10)
    assert run.batches == [1, 8, 1]
    for rows, (_, result) in zip((2, 3, 4), jobs, strict=True):
        assert result["value"][0].tolist() == np.full((rows, 2), rows * 2).tolist()
    assert scheduler.tasks_run == 4
    scheduler.stop()


def test_a_large_task_is_split_and_its_answer_joined():
    run = HeldRun()
    run.release.set()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=2, max_execution_batch_size=4, max_enqueued_batches=10
    )
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    (out,) = scheduler.schedule([0], [x], [1], 0)
    assert out.tolist() == (x * 2).tolist()
    assert sorted(run.batches) == [2, 4, 4]
    scheduler.stop()


def test_tasks_of_other_tensors_or_shapes_never_share_a_batch():
    run = HeldRun()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=1, max_execution_batch_size=50, max_enqueued_batches=10
    )
    first = run_async(scheduler, [np.ones((1, 2), np.float32)])
    time.sleep(0.05)
    jobs = [
        run_async(scheduler, [np.ones((2, 2), np.float32)]),
        run_async(scheduler, [np.ones((2, 3), np.float32)]),  # other trailing shape
        run_async(scheduler, [np.ones((2, 2), np.float32)], outputs=(2,)),  # other fetch
    ]
    wait_queued(scheduler, 3)
    run.release.set()
    for thread, result in [first, *jobs]:
        thread.join(10)
        assert "value" in result
    assert sorted(run.batches) == [1, 2, 2, 2]
    scheduler.stop()


def test_refusals_have_tf_servings_codes_and_texts():
    run = HeldRun()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=1, max_execution_batch_size=2, max_enqueued_batches=2
    )
    with pytest.raises(
        errors.InvalidArgumentError, match="^Task size 501 is larger than maximum input batch size 500$"
    ):
        scheduler.schedule([0], [np.ones((501, 1))], [1], 0)
    held = run_async(scheduler, [np.ones((1, 1))])
    time.sleep(0.05)
    queued = run_async(scheduler, [np.ones((4, 1))])  # two batches of 2: the queue is full
    wait_queued(scheduler, 2)
    with pytest.raises(
        errors.UnavailableError, match="^The batch scheduling queue to which this task was submitted is full$"
    ):
        scheduler.schedule([0], [np.ones((1, 1), np.float64)], [1], 0)
    run.release.set()
    for thread, _ in (held, queued):
        thread.join(10)
    scheduler.stop()


def test_a_batch_whose_every_task_timed_out_in_the_queue_is_resource_exhausted():
    run = HeldRun()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=1, max_execution_batch_size=8, max_enqueued_batches=10
    )
    held = run_async(scheduler, [np.ones((1, 1))])
    time.sleep(0.05)
    late = run_async(scheduler, [np.ones((1, 1))], timeout_ms=1)
    wait_queued(scheduler, 1)
    time.sleep(0.05)
    run.release.set()
    for thread, _ in (held, late):
        thread.join(10)
    assert late[1]["error"].code == errors.RESOURCE_EXHAUSTED
    assert late[1]["error"].message == QUEUE_TIMEOUT_TEXT
    assert run.batches == [1]
    scheduler.stop()


def test_a_failing_batch_fails_its_tasks_and_the_next_batch_runs():
    run = HeldRun(fail_on_rows=3)
    run.release.set()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=1, max_execution_batch_size=8, max_enqueued_batches=10
    )
    with pytest.raises(errors.InternalError, match="^Failed to invoke TfLite interpreter$"):
        scheduler.schedule([0], [np.ones((3, 1))], [1], 0)
    assert scheduler.schedule([0], [np.ones((2, 1))], [1], 0)[0].tolist() == [[2.0], [2.0]]
    scheduler.stop()


def test_stop_fails_what_is_queued_and_ends_the_threads():
    run = HeldRun()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=1, max_execution_batch_size=8, max_enqueued_batches=10
    )
    held = run_async(scheduler, [np.ones((1, 1))])
    time.sleep(0.05)
    queued = run_async(scheduler, [np.ones((1, 1))])
    wait_queued(scheduler, 1)
    stopper = threading.Thread(target=scheduler.stop)
    stopper.start()
    queued[0].join(5)
    assert queued[1]["error"].code == errors.UNAVAILABLE
    run.release.set()
    stopper.join(10)
    held[0].join(5)
    assert "value" in held[1]
    assert not any(t.is_alive() for t in scheduler._threads)
    with pytest.raises(errors.UnavailableError):
        scheduler.schedule([0], [np.ones((1, 1))], [1], 0)


def test_a_scalar_input_runs_unbatched():
    run = HeldRun()
    run.release.set()
    scheduler = TfLiteBatchScheduler(
        run, num_batch_threads=1, max_execution_batch_size=8, max_enqueued_batches=10
    )
    calls = []
    scheduler._run_batch = lambda i, v, o: calls.append(v) or [v[0]]
    assert scheduler.schedule([0], [np.float32(3.0)], [1], 0)[0] == 3.0
    assert len(calls) == 1 and scheduler.batches_run == 0
    scheduler.stop()
