"""serving.resources.drain: the phases' order and their ends (quiet, the cap, a second signal)."""

from __future__ import annotations

import threading
import time

from serving.resources import drain as drain_lib
from serving.resources.drain import Drain


def test_health_turns_first_and_refusal_follows_the_lame_duck():
    drain, seen = Drain(), []

    def not_serving():
        seen.append(("not serving", drain.refusing))

    drain.run(not_serving, lame_duck_seconds=0.05, grace_seconds=1)
    assert seen == [("not serving", False)]
    assert drain.refusing


def test_refusal_ends_when_nobody_has_been_refused_for_the_quiet_time():
    drain = Drain()
    started = time.monotonic()
    drain.run(lambda: None, 0, 1)
    assert drain_lib.QUIET_SECONDS <= time.monotonic() - started < drain_lib.MAX_REFUSAL_SECONDS


def test_refusal_lasts_while_clients_keep_coming_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(drain_lib, "MAX_REFUSAL_SECONDS", 0.5)
    drain, done = Drain(), threading.Event()

    def hammer():
        while not done.is_set():
            if drain.refusing:
                drain.refused()
            time.sleep(0.01)

    thread = threading.Thread(target=hammer)
    thread.start()
    started = time.monotonic()
    drain.run(lambda: None, 0, 1)
    elapsed = time.monotonic() - started
    done.set()
    thread.join()
    assert 0.5 <= elapsed < 5


def test_the_drain_waits_for_the_calls_it_admitted():
    drain = Drain()
    drain.admitted.append(None)  # a call running
    started = time.monotonic()
    threading.Timer(0.3, drain.admitted.pop).start()
    assert drain.run(lambda: None, 0, grace_seconds=10)
    assert time.monotonic() - started >= 0.29  # (the timer's own clock may round down)


def test_the_grace_period_bounds_the_wait():
    drain = Drain()
    drain.admitted.append(None)  # a call that never ends
    assert not drain.run(lambda: None, 0, grace_seconds=0.2)
