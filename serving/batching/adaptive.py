"""Adaptive batch timeout (ours, beyond TF Serving; ``--adaptive_batch_timeout``).

TF Serving's users find that batching does nothing for them until ``batch_timeout_micros`` is
tuned to their model and traffic (its guide: start at 0, then try 1 to 10 ms): at 0 an idle
batch thread takes every task alone, too long and every request waits for nothing. The best
value moves with the load. Here each queue picks its own timeout from the arrival rate it
observes, by hill climbing over not batching at all and the timeouts:

- time is cut into windows (at least ``WINDOW_SECONDS`` and ``WINDOW_ROWS`` rows); each gives
  the arrival rate (rows per second) under the timeout in force;
- the choice in force is the first of: running each task unbatched on its caller's thread
  (as without ``--enable_batching``), then ``TIMEOUTS`` (up to the cap: ``batch_timeout_micros``,
  or 10 ms when that is 0), whose recent rate is within ``MARGIN`` of the best recent rate:
  batching must earn its cost (a queue, a batch thread, merging and splitting) with more
  throughput, and a longer timeout its latency;
- after a probe that won, the next neighbour is probed at once; after one that lost, the
  queue stays at its best for ``HOLD`` windows, twice as long after each further loss (up to
  ``MAX_HOLD``), before probing the other side: a settled queue rarely pays for a probe.

Under a closed loop of clients (each waits for its answer before asking again) the arrival rate
is the throughput, so the climb finds the timeout that serves them fastest; where clients send at
a rate of their own, no timeout changes it and the climb settles on not batching. Where tasks
mostly find their queue idle (a lone client, light traffic) they run unbatched.
``choose`` and ``Climb`` are pure; ``AdaptiveTimeout`` feeds them the queue's arrivals (called
under the scheduler's lock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TIMEOUTS = (0.0, 500e-6, 1e-3, 2e-3, 4e-3, 8e-3, 16e-3, 32e-3)  # seconds
WINDOW_SECONDS = 0.25
WINDOW_ROWS = 20
IDLE_SECONDS = 1.0
MARGIN = 0.05
HOLD = 2  # windows at the best timeout after a probe that lost
MAX_HOLD = 8
MEMORY = 2 * MAX_HOLD  # windows after which a rate measured at a timeout is forgotten


def timeouts_up_to(cap_seconds: float) -> tuple[float, ...]:
    """The timeouts a queue may pick: ``TIMEOUTS`` up to the cap, the cap included."""
    steps = tuple(t for t in TIMEOUTS if t < cap_seconds)
    return (*steps, cap_seconds) if cap_seconds > 0 else (0.0,)


def choose(rates: dict[int, float]) -> int:
    """The smallest timeout index whose rate is within ``MARGIN`` of the best rate."""
    if not rates:
        return 0
    best = max(rates.values())
    return min(i for i, rate in rates.items() if rate >= (1 - MARGIN) * best)


@dataclass
class Climb:
    """The hill climb's state: rates measured per timeout index, and what it tries next."""

    size: int  # how many timeouts there are
    index: int = 0  # in force
    rates: dict[int, float] = field(default_factory=dict)
    measured: dict[int, int] = field(default_factory=dict)  # index -> window number
    window: int = 0
    hold: int = 0  # windows left before the next probe
    backoff: int = HOLD  # the hold after the next probe that loses
    probe_up: bool = True
    probing: bool = False  # the index in force is a probe

    def window_done(self, rate: float) -> int:
        """Records the rate of the window just ended; returns the timeout index for the next."""
        self.window += 1
        measured = self.index
        self.rates[measured], self.measured[measured] = rate, self.window
        for i in [i for i, w in self.measured.items() if self.window - w > MEMORY]:
            del self.rates[i], self.measured[i]
        best = choose(self.rates)
        if self.probing:
            self.probing = False
            if measured != best:  # the probe lost: stay a while, then try the other side
                self.probe_up = measured < best
                self.hold, self.backoff = self.backoff, min(2 * self.backoff, MAX_HOLD)
            else:  # it won: the next neighbour at once
                self.backoff = HOLD
        self.index = best
        if self.hold > 0 or self.size == 1:
            self.hold = max(0, self.hold - 1)
            return best
        step = 1 if self.probe_up else -1
        if not 0 <= best + step < self.size:
            step = -step
        self.index, self.probing = best + step, True
        return self.index


class AdaptiveTimeout:
    """One queue's choice: the climb's (index 0: unbatched; i: ``timeouts[i - 1]``), while tasks
    arrive to a busy queue.

    Batching gains nothing for a lone client (its next task comes only once this one is
    answered) nor for light traffic: while fewer than ``BUSY_SHARE`` of the tasks (a moving
    average) arrive to find others of their queue queued or running, tasks run unbatched and
    the climb pauses. A window with a pause of ``IDLE_SECONDS`` between two tasks is dropped."""

    __slots__ = ("_timeouts", "_climb", "_window_start", "_window_rows", "_last", "_busy")

    def __init__(self, cap_seconds: float) -> None:
        self._timeouts = timeouts_up_to(cap_seconds)
        self._climb = Climb(1 + len(self._timeouts))
        self._window_start: float | None = None
        self._window_rows = 0
        self._last: float | None = None  # the last arrival
        self._busy = 0.0  # share of arrivals that found the queue busy, a moving average

    @property
    def unbatched(self) -> bool:
        """Whether a task arriving now runs alone on its caller's thread, not queued."""
        return self._busy < BUSY_SHARE or self._climb.index == 0

    @property
    def timeout(self) -> float:
        """Seconds the open batch waits for more tasks, now."""
        if self.unbatched:
            return 0.0
        return self._timeouts[self._climb.index - 1]

    def arrival(self, now: float, size: int, busy: bool) -> None:
        """A task of ``size`` rows arrived at ``now`` (``time.monotonic()``); ``busy``: its
        queue held or ran other tasks then."""
        self._busy += _WEIGHT * (busy - self._busy)
        last, self._last = self._last, now
        start = self._window_start
        idle = last is None or now - last >= IDLE_SECONDS
        if start is None or idle or self._busy < BUSY_SHARE:
            self._window_start, self._window_rows = now, 0  # a new window; an idle one is dropped
            return
        self._window_rows += size
        if now - start >= WINDOW_SECONDS and self._window_rows >= WINDOW_ROWS:
            self._climb.window_done(self._window_rows / (now - start))
            self._window_start, self._window_rows = now, 0


BUSY_SHARE = 0.25
_WEIGHT = 1 / 16  # of a new sample in the moving average
