"""BatchingSession: a Session whose calls are batched, against a recording fake Session
(the batch each call ran in, its timeout) and TF Serving's rules for deadlines and errors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from apis.tensorflow.core.protobuf import config_pb2
from runtime import errors
from serving.batching import session as batching_session
from serving.batching.parameters import QueueOptions, SchedulerOptions
from serving.batching.scheduler import SharedBatchScheduler
from serving.batching.session import BatchingSession, tensor_signature


class FakeSession:
    """Outputs computed from the feeds, per tensor name; each run recorded as (rows fed,
    timeout_ms). ``gate``: every run waits for it."""

    OUTPUTS = {
        "double:0": lambda f: f["x:0"] * 2,
        "sum:0": lambda f: f["x:0"].sum(axis=1) + f["y:0"][:, 0],
        "scalar:0": lambda f: np.float32(1),
        "first:0": lambda f: f["x:0"][:1],
        "refuse:0": lambda f: (_ for _ in ()).throw(ValueError("cannot feed that")),
    }

    def __init__(self):
        self.runs: list[tuple[int, int]] = []
        self.gate: threading.Event | None = None
        self.started = threading.Event()
        self.closed = False
        self.graph = "the wrapped session's graph"

    def make_callable(self, fetches, feed_list, accept_options=False):
        fetches, feeds = list(fetches), list(feed_list)
        for name in fetches:
            if name not in self.OUTPUTS:
                raise KeyError(name)

        def call(*values, options=None, timeout_ms=0):
            return self._run(fetches, dict(zip(feeds, values)), timeout_ms)

        return call

    def run(self, fetches, feed_dict, options=None, run_metadata=None):
        return self._run(list(fetches), feed_dict, options.timeout_in_ms if options else 0)

    def _run(self, fetches, feeds, timeout_ms):
        self.runs.append((next(iter(feeds.values())).shape[0], timeout_ms))
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        return [self.OUTPUTS[name](feeds) for name in fetches]

    def close(self):
        self.closed = True


SIGNATURES = [
    tensor_signature(["x:0"], ["double:0"]),
    tensor_signature(["x:0", "y:0"], ["sum:0", "double:0"]),
]


@pytest.fixture
def make():
    schedulers = []

    def build(threads: int = 1, **options) -> tuple[BatchingSession, FakeSession]:
        scheduler = SharedBatchScheduler(SchedulerOptions(threads))
        schedulers.append(scheduler)
        fake = FakeSession()
        return BatchingSession(fake, scheduler, QueueOptions(**options), SIGNATURES, "m"), fake

    yield build
    for scheduler in schedulers:
        scheduler.stop(5)


def in_threads(fn, items):
    out: list = [None] * len(items)

    def call(i):
        try:
            out[i] = fn(items[i])
        except Exception as e:  # noqa: BLE001
            out[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return out


def rows(n: int, start: float = 0.0) -> np.ndarray:
    return (np.arange(n * 2, dtype=np.float32) + start).reshape(n, 2)


def test_concurrent_calls_run_as_one_batch_and_each_gets_its_rows(make):
    session, fake = make(batch_timeout_micros=2_000_000, input_batch_size_limit=6, max_execution_batch_size=6)
    call = session.make_callable(["double:0"], ["x:0"], accept_options=True)
    inputs = [rows(1, 10 * i) for i in range(3)] + [rows(3, 100)]
    results = in_threads(lambda x: call(x), inputs)
    for x, got in zip(inputs, results):
        np.testing.assert_array_equal(got[0], x * 2)
    assert fake.runs == [(6, 0)]


def test_feed_and_fetch_orders_are_the_callers(make):
    session, fake = make(batch_timeout_micros=1_000_000, input_batch_size_limit=2, max_execution_batch_size=2)
    x, y = rows(1), np.array([[5.0]], np.float32)
    call = session.make_callable(["sum:0", "double:0"], ["y:0", "x:0"], accept_options=True)
    other = session.make_callable(["double:0", "sum:0"], ["x:0", "y:0"], accept_options=True)
    first, second = in_threads(lambda f: f(), [lambda: call(y, x), lambda: other(x, y + 1)])
    np.testing.assert_array_equal(first[0], [6.0])
    np.testing.assert_array_equal(first[1], x * 2)
    np.testing.assert_array_equal(second[0], x * 2)
    np.testing.assert_array_equal(second[1], [7.0])
    assert fake.runs == [(2, 0)]  # one queue for one set of tensors, whatever the order
    got = session.run(["double:0"], {"x:0": x})
    np.testing.assert_array_equal(got[0], x * 2)
    np.testing.assert_array_equal(session.run("double:0", {"x:0": x}), x * 2)


def test_padding_to_an_allowed_batch_size_is_dropped_from_the_results(make):
    session, fake = make(
        batch_timeout_micros=1_000_000,
        input_batch_size_limit=4,
        max_execution_batch_size=4,
        allowed_batch_sizes=(4,),
    )
    call = session.make_callable(["double:0"], ["x:0"], accept_options=True)
    a, b = rows(1), rows(2, 50)
    session_stats = session.queues()[0].stats
    got_a, got_b = in_threads(lambda x: call(x), [a, b])
    assert fake.runs == [(4, 0)]
    np.testing.assert_array_equal(got_a[0], a * 2)
    np.testing.assert_array_equal(got_b[0], b * 2)
    assert (session_stats.batches, session_stats.rows, session_stats.padding_rows) == (1, 3, 1)


def test_a_deadline_passed_in_the_queue_is_resource_exhausted_and_the_batch_runs_the_rest(make):
    session, fake = make(threads=1)
    fake.gate = threading.Event()
    call = session.make_callable(["double:0"], ["x:0"], accept_options=True)
    results: dict[str, object] = {}
    blocker = threading.Thread(target=lambda: results.setdefault("blocker", call(rows(1))))
    blocker.start()
    assert fake.started.wait(5)  # the one batch thread is busy; what comes next queues

    def run(name, timeout_ms):
        try:
            results[name] = call(rows(1), timeout_ms=timeout_ms)
        except errors.OpError as e:
            results[name] = e

    waiting = [threading.Thread(target=run, args=args) for args in (("short", 50), ("long", 20_000))]
    for t in waiting:
        t.start()
    time.sleep(0.3)  # "short" expires in the queue
    fake.gate.set()
    for t in [blocker, *waiting]:
        t.join(10)
    expired = results["short"]
    assert isinstance(expired, errors.ResourceExhaustedError)
    assert expired.message == "Run() timeout exceeded while waiting in batching queue"
    np.testing.assert_array_equal(results["long"][0], rows(1) * 2)
    (rows_run, timeout_ms) = fake.runs[1]
    assert rows_run == 1  # the expired task was dropped from the batch
    assert 18_000 < timeout_ms <= 20_000  # the latest deadline left, as the batch's timeout
    assert session.queues()[0].stats.expired == 1


def test_a_batch_without_deadlines_runs_without_timeout_and_options_give_one(make):
    session, fake = make()
    call = session.make_callable(["double:0"], ["x:0"], accept_options=True)
    call(rows(1))
    options = config_pb2.RunOptions(timeout_in_ms=30_000)
    call(rows(1), options=options)
    session.run(["double:0"], {"x:0": rows(1)}, options=options)
    assert fake.runs[0][1] == 0
    assert 29_000 < fake.runs[1][1] <= 30_000 and 29_000 < fake.runs[2][1] <= 30_000


@pytest.mark.parametrize(
    "value, error, message",
    [
        (
            np.float32(1),
            errors.InvalidArgumentError,
            "Batching Run() input tensors must have at least one dimension",
        ),
        (
            np.zeros((2, 2), np.float32),
            errors.InvalidArgumentError,
            "Task size 2 is larger than maximum input batch size 1",
        ),
    ],
)
def test_refused_tasks(make, value, error, message):
    session, _ = make(input_batch_size_limit=1, max_execution_batch_size=1)
    with pytest.raises(error) as raised:
        session.run(["double:0"], {"x:0": value})
    assert raised.value.message == message


def test_unequal_input_sizes_are_refused(make):
    session, _ = make()
    with pytest.raises(errors.InvalidArgumentError) as raised:
        session.run(["sum:0"], {"x:0": rows(2), "y:0": rows(3)})
    assert raised.value.message == "Batching Run() input tensors must have equal 0th-dimension size"


def test_target_nodes_are_refused(make):
    session, _ = make()
    with pytest.raises(errors.PermissionDeniedError) as raised:
        session.run(["double:0", "init_op"], {"x:0": rows(1)})
    assert raised.value.message == "BatchingSession does not support target nodes"


def test_a_run_feeding_nothing_is_refused(make):
    session, _ = make()
    with pytest.raises(errors.InvalidArgumentError) as raised:
        session.run(["double:0"], {})
    assert raised.value.message == "Batching Run() must have at least one input tensor"


@pytest.mark.parametrize(
    "fetch, message",
    [
        ("scalar:0", "Batched output tensor has 0 dimensions"),
        (
            "first:0",
            "Batched output tensor's 0th dimension does not equal the sum of the 0th dimension sizes of the "
            "input tensors",
        ),
    ],
)
def test_outputs_not_batched_fail_every_task_and_the_next_batch_runs(make, fetch, message):
    session, _ = make(batch_timeout_micros=1_000_000, input_batch_size_limit=2, max_execution_batch_size=2)
    results = in_threads(lambda x: session.run([fetch], {"x:0": x}), [rows(1), rows(1, 5)])
    assert all(isinstance(r, errors.FailedPreconditionError) and r.message == message for r in results)
    got = in_threads(lambda x: session.run(["double:0"], {"x:0": x}), [rows(1), rows(1, 5)])
    np.testing.assert_array_equal(got[1][0], rows(1, 5) * 2)


def test_a_session_error_reaches_each_caller_as_its_own_exception(make):
    session, _ = make(batch_timeout_micros=1_000_000, input_batch_size_limit=2, max_execution_batch_size=2)
    results = in_threads(lambda x: session.run(["refuse:0"], {"x:0": x}), [rows(1), rows(1)])
    assert all(isinstance(r, ValueError) and str(r) == "cannot feed that" for r in results)
    assert results[0] is not results[1]


def test_other_tensor_sets_get_queues_of_their_own_up_to_a_bound(make, monkeypatch):
    monkeypatch.setattr(batching_session, "MAX_CUSTOM_QUEUES", 1)
    session, fake = make()
    assert len(session.queues()) == 2
    session.run(["sum:0"], {"x:0": rows(1), "y:0": rows(1)})  # a subset of a signature's outputs
    assert len(session.queues()) == 3
    session.run(["sum:0", "double:0", "first:0"], {"x:0": rows(1), "y:0": rows(1)})
    assert len(session.queues()) == 3  # past the bound: run unbatched, by the wrapped session
    assert len(fake.runs) == 2


def test_the_wrapped_session_shows_through_and_close_closes_it(make):
    session, fake = make(batch_timeout_micros=60_000_000)
    assert session.graph == "the wrapped session's graph"
    queues = session.queues()
    pending = threading.Thread(target=lambda: session.run(["double:0"], {"x:0": rows(1)}))
    pending.start()
    time.sleep(0.1)
    session.close()  # runs the queued call at once, then removes the queues
    pending.join(5)
    assert not pending.is_alive() and fake.runs == [(1, 0)]
    assert fake.closed and all(q not in session._scheduler.queues() for q in queues)


def test_an_adaptive_queue_runs_unbatched_on_the_callers_thread_as_a_batch_of_one(make):
    """The adaptive choice of not batching (a lone caller here): each call runs on its own
    thread, not a batch thread, gets its outputs and errors as a batch of one would (an
    output that is not batched is refused alike), shows in the queue's stats, and ``stop``
    waits for it."""
    session, fake = make(adaptive_batch_timeout=True, input_batch_size_limit=8, max_execution_batch_size=8)
    call = session.make_callable(["double:0"], ["x:0"], accept_options=True)
    threads = []
    real = fake._run

    def recording(*args):
        threads.append(threading.current_thread())
        return real(*args)

    fake._run = recording
    np.testing.assert_array_equal(call(rows(3), timeout_ms=500)[0], rows(3) * 2)
    assert threads == [threading.current_thread()] and fake.runs == [(3, 500)]
    (queue,) = [q for q in session.queues() if q.stats.name.endswith("outputs: double:0}")]
    assert queue.stats.tasks == 1 and queue.stats.batches == 1
    scalar = session.make_callable(["scalar:0"], ["x:0"], accept_options=True)
    with pytest.raises(errors.FailedPreconditionError, match="Batched output tensor has 0 dimensions"):
        scalar(rows(1))
    refuse = session.make_callable(["refuse:0"], ["x:0"], accept_options=True)
    with pytest.raises(ValueError, match="cannot feed that"):
        refuse(rows(1))
    fake.gate = threading.Event()
    fake.started.clear()
    running = threading.Thread(target=call, args=(rows(2),))
    running.start()
    assert fake.started.wait(5)
    stopped = []
    stopper = threading.Thread(target=lambda: stopped.append(session._scheduler.stop(10)))
    stopper.start()
    time.sleep(0.2)
    assert not stopped  # the unbatched run is in flight: stop waits for it
    fake.gate.set()
    running.join(5)
    stopper.join(5)
    assert stopped == [True]
