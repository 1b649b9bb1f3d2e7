"""The adaptive batch timeout: its choices as tables, its climb against made-up throughput curves."""

from __future__ import annotations

import pytest

from serving.batching import adaptive
from serving.batching.adaptive import AdaptiveTimeout, Climb


@pytest.mark.parametrize(
    "cap, timeouts",
    [
        (0.010, (0.0, 500e-6, 1e-3, 2e-3, 4e-3, 8e-3, 0.010)),
        (0.002, (0.0, 500e-6, 1e-3, 0.002)),
        (0.0003, (0.0, 0.0003)),
        (0.0, (0.0,)),
    ],
)
def test_timeouts_up_to_the_cap(cap, timeouts):
    assert adaptive.timeouts_up_to(cap) == timeouts


@pytest.mark.parametrize(
    "rates, chosen",
    [
        ({}, 0),
        ({0: 100.0}, 0),
        ({0: 100.0, 1: 200.0}, 1),
        ({0: 100.0, 1: 104.0}, 0),  # a longer timeout must gain more than MARGIN
        ({2: 300.0, 3: 310.0, 4: 290.0}, 2),
        ({1: 100.0, 2: 300.0, 3: 500.0}, 3),
    ],
)
def test_choose_the_shortest_timeout_near_the_best_rate(rates, chosen):
    assert adaptive.choose(rates) == chosen


def climb(curve, windows: int, size: int = 7) -> list[int]:
    """The timeout indices a climb visits, when index i gives the rate curve[i]."""
    state = Climb(size)
    visited = []
    for _ in range(windows):
        visited.append(state.index)
        state.window_done(curve[state.index])
    return visited


def test_climb_finds_the_peak_and_stays_there_between_rare_probes():
    curve = [100, 130, 170, 220, 200, 150, 120]  # closed-loop clients: best at index 3
    visited = climb(curve, 60)
    assert visited[:5] == [0, 1, 2, 3, 4]  # each winning probe leads to the next
    hold = adaptive.HOLD
    assert visited[5 : 5 + hold] == [3] * hold  # the lost probe holds HOLD windows
    assert visited[5 + hold] == 2  # then the other side is probed
    settled = visited[6 + hold :]
    assert settled.count(3) >= 0.8 * len(settled)
    assert set(settled) <= {2, 3, 4}


def test_climb_prefers_no_wait_where_the_rate_does_not_depend_on_it():
    visited = climb([500] * 7, 60)  # clients send at their own rate
    assert visited[:2] == [0, 1]
    assert visited[1:].count(0) >= 0.85 * len(visited[1:])


def test_climb_holds_longer_after_each_lost_probe():
    visited = climb([100, 50, 40, 30, 20, 10, 5], 80)  # a lone client: waiting only costs
    probes = [i for i, index in enumerate(visited) if index != 0]
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert gaps == sorted(gaps) and gaps[0] == adaptive.HOLD + 1 and gaps[-1] == adaptive.MAX_HOLD + 1
    assert len(probes) <= 80 // adaptive.MAX_HOLD + 2


def test_climb_follows_a_moving_peak():
    state = Climb(7)
    for _ in range(40):
        state.window_done([100, 130, 170, 220, 200, 150, 120][state.index])
    assert state.index in (2, 3, 4)
    for _ in range(200):
        state.window_done([100, 150, 200, 250, 300, 350, 400][state.index])
    assert state.index == 6


def test_no_wait_while_tasks_find_their_queue_idle():
    timeout = AdaptiveTimeout(0.010)
    assert timeout.timeout == 0.0  # nothing measured
    now = 0.0
    for _ in range(10_000):  # a lone client, or light traffic: each task finds its queue idle
        now += 0.0001
        timeout.arrival(now, 1, busy=False)
    assert timeout.timeout == 0.0 and timeout.unbatched
    assert timeout._climb.window == 0  # the climb does not even measure


def test_waiting_climbs_once_tasks_find_their_queue_busy():
    timeout = AdaptiveTimeout(0.010)
    now = 0.0
    for i in range(10_000):  # a row every 0.1 ms for 1 s, most finding others queued
        now += 0.0001
        timeout.arrival(now, 1, busy=i % 4 != 0)
    assert timeout._climb.window >= 2
    index = timeout._climb.index  # 0: unbatched, i: the i-th timeout
    assert timeout.unbatched == (index == 0)
    assert timeout.timeout == (0.0 if index == 0 else adaptive.timeouts_up_to(0.010)[index - 1])
    for _ in range(200):  # the traffic thins out: tasks find the queue idle again
        now += 0.0001
        timeout.arrival(now, 1, busy=False)
    assert timeout.timeout == 0.0 and timeout.unbatched


def test_the_climb_runs_unbatched_until_batching_earns_more_throughput():
    """Index 0 is not batching: where batching's rates are lower, or within MARGIN, the queue
    stays unbatched (between probes); where they are higher it batches."""
    for rates in ([100, 80, 70, 60, 50, 40, 30, 20], [100] * 8):
        state = Climb(8)
        for _ in range(60):
            state.window_done(rates[state.index])
        assert state.index == 0 or state.probing, rates
    state = Climb(8)
    for _ in range(60):
        state.window_done([100, 130, 170, 220, 200, 150, 120, 110][state.index])
    assert state.index in (2, 3, 4)
    timeout = AdaptiveTimeout(0.010)
    timeout._busy, timeout._climb.index = 1.0, 1
    assert not timeout.unbatched and timeout.timeout == 0.0  # batching, without waiting
    timeout._climb.index = 0
    assert timeout.unbatched


def test_an_idle_pause_drops_the_window_it_falls_in():
    timeout = AdaptiveTimeout(0.010)
    now = 0.0
    for _ in range(3000):
        now += 0.0001
        timeout.arrival(now, 1, busy=True)
    windows = timeout._climb.window
    assert windows >= 1
    now += adaptive.IDLE_SECONDS + 1  # no traffic, then a task: not a window of low rate
    timeout.arrival(now, 1, busy=True)
    assert timeout._climb.window == windows
