"""serving.worker_pool: the contract grpc's server relies on (calls run, each done callback runs
once), threads started on demand and capped, idle threads reused, and threads that end."""

from __future__ import annotations

import gc
import logging
import threading
import time

import pytest

from serving.worker_pool import WorkerPool


def _wait_until(predicate, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_calls_run_with_their_arguments_and_callbacks_run_once():
    pool = WorkerPool(2, thread_name_prefix="t")
    results, seen = [], []
    done = threading.Event()
    work = pool.submit(lambda a, b: results.append(a + b), 2, 3)
    work.add_done_callback(lambda w: (seen.append(w), done.set()))
    assert done.wait(5)
    assert results == [5] and seen == [work]
    late = []
    work.add_done_callback(late.append)  # added after the call returned: runs at once, here
    assert late == [work] and seen == [work]
    pool.shutdown()


def test_callbacks_race_the_worker_and_each_runs_exactly_once():
    pool = WorkerPool(4)
    counts: list[int] = []
    lock = threading.Lock()
    works = []
    for _ in range(2000):
        work = pool.submit(lambda: None)
        works.append(work)
        cell = [0]
        counts.append(cell)

        def bump(_w, cell=cell):
            with lock:
                cell[0] += 1

        work.add_done_callback(bump)
    _wait_until(lambda: all(w.done for w in works) and all(c[0] for c in counts))
    assert {c[0] for c in counts} == {1}
    pool.shutdown()


def test_threads_start_on_demand_up_to_max_workers():
    pool = WorkerPool(3, thread_name_prefix="cap")
    release = threading.Event()
    running = []
    for _ in range(5):
        pool.submit(lambda: (running.append(threading.current_thread().name), release.wait(5)))
    _wait_until(lambda: len(running) == 3)
    time.sleep(0.05)
    assert len(running) == 3  # two calls wait for a thread
    assert sorted(running) == ["cap_0", "cap_1", "cap_2"]
    release.set()
    _wait_until(lambda: len(running) == 5)
    pool.shutdown()
    assert len(pool._threads) == 3


def test_an_idle_thread_is_reused_before_a_new_one_starts():
    pool = WorkerPool(8)
    names = set()
    for _ in range(20):
        done = threading.Event()
        pool.submit(lambda done=done: (names.add(threading.current_thread().name), done.set()))
        assert done.wait(5)
        _wait_until(lambda: pool._idle)  # the thread is back waiting
    assert len(names) == 1 and len(pool._threads) == 1
    pool.shutdown()


def test_a_failing_call_is_logged_and_its_thread_goes_on(caplog):
    pool = WorkerPool(1)
    done = threading.Event()
    with caplog.at_level(logging.ERROR, logger="serving.worker_pool"):
        failed = pool.submit(lambda: 1 / 0)
        failed.add_done_callback(lambda _w: done.set())
        assert done.wait(5)
        after = threading.Event()
        pool.submit(after.set)
        assert after.wait(5)
    assert "Exception in a gRPC worker call" in caplog.text and "ZeroDivisionError" in caplog.text
    pool.shutdown()


def test_shutdown_ends_the_threads_after_queued_calls_and_refuses_new_ones():
    pool = WorkerPool(2)
    ran = []
    for i in range(10):
        pool.submit(ran.append, i)
    pool.shutdown(wait=True)
    assert sorted(ran) == list(range(10))
    assert not any(thread.is_alive() for thread in pool._threads)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(print)


def test_threads_end_once_the_pool_is_garbage():
    pool = WorkerPool(2)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(5)
    threads = list(pool._threads)
    del pool
    gc.collect()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()


def test_max_workers_must_be_positive():
    with pytest.raises(ValueError):
        WorkerPool(0)
