"""serving.lifecycle.memory_budget and the manager under --model_memory_budget_bytes: loads on first
request, least-recently-used idle evictions, never a model in use, waits bounded by deadline."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from runtime import errors
from serving.lifecycle import memory_budget
from serving.lifecycle.manager import AspiredVersionsManager
from serving.lifecycle.memory_budget import Resident, Room, over_budget, plan_room
from serving.lifecycle.servable import ManagerState
from serving.lifecycle.source import AspiredVersion
from serving.observability import metrics
from tests.serving.test_manager import FakeLoader, make_version, states, wait_until

MB = 1 << 20

# -- the pure planner ------------------------------------------------------------------------


def test_fits_loads_now():
    assert plan_room(100, "a", 30, [Resident("b", 50, 1.0, True)]) == Room(True)


def test_alone_loads_even_if_larger_than_the_budget():
    assert plan_room(100, "a", 300, []) == Room(True)
    assert plan_room(100, "a", 300, [Resident("a", 80, 1.0, False)]) == Room(True)


def test_evicts_least_recently_used_idle_first_and_only_what_is_needed():
    residents = [
        Resident("old", 30, 1.0, True),
        Resident("busy", 30, 0.5, False),  # older, but serving a request
        Resident("new", 30, 3.0, True),
        Resident("mid", 30, 2.0, True),
    ]
    assert plan_room(120, "a", 30, residents) == Room(False, ("old",))
    assert plan_room(120, "a", 60, residents) == Room(False, ("old", "mid"))


def test_memory_on_its_way_out_is_not_evicted_for_twice():
    residents = [Resident("going", 40, 1.0, False, leaving=40), Resident("idle", 40, 2.0, True)]
    assert plan_room(100, "a", 30, residents) == Room(False, ())


def test_over_budget_keeps_the_model_just_loaded():
    residents = [Resident("a", 90, 9.0, True), Resident("b", 20, 1.0, True), Resident("c", 20, 2.0, True)]
    assert over_budget(100, residents, keep="a") == ("b", "c")
    assert over_budget(200, residents, keep="a") == ()


def test_planner_property_never_evicts_busy_and_fits_when_it_can():
    rng = random.Random(7)
    for _ in range(2000):
        budget, need = rng.randint(10, 200), rng.randint(1, 80)
        residents = [
            Resident(f"m{i}", rng.randint(0, 60), rng.random(), rng.random() < 0.7)
            for i in range(rng.randint(0, 8))
        ]
        room = plan_room(budget, "a", need, residents)
        by_name = {r.name: r for r in residents}
        assert all(by_name[n].evictable for n in room.evict)
        held = sum(r.bytes for r in residents)
        if room.load_now:
            assert held + need <= budget or held == 0
            assert room.evict == ()
        else:
            freed = sum(by_name[n].bytes for n in room.evict)
            idle = sum(r.bytes for r in residents if r.evictable)
            assert held - freed + need <= budget or freed == idle  # fits, or all it could
            kept = [r for r in residents if r.evictable and r.bytes and r.name not in room.evict]
            if room.evict and kept:  # the least recently used ones
                assert max(by_name[n].last_used for n in room.evict) <= min(r.last_used for r in kept)


# -- the manager with a budget -------------------------------------------------------------------


class Sized(FakeLoader):
    """Each model's bundle holds ``sizes[name]`` bytes; records loads and unloads, and the most
    bytes ever held at once."""

    def __init__(self, sizes, delay=0.01):
        super().__init__(delay)
        self.sizes = sizes
        self.held = 0
        self.peak = 0
        self.loads: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, path, servable_id):
        with self.lock:
            self.held += self.sizes[servable_id.name]
            self.peak = max(self.peak, self.held)
        bundle = super().__call__(path, servable_id)
        bundle.name = servable_id.name
        self.loads.append(servable_id.name)
        return bundle

    def unload(self, bundle):
        with self.lock:
            self.held -= self.sizes[bundle.name]
        bundle.session.close()


def budget_manager(loader, budget, tmp_path, names, estimate=None, **kwargs):
    manager = AspiredVersionsManager(
        loader,
        unload_fn=loader.unload,
        max_num_load_retries=0,
        memory_budget_bytes=budget,
        size_fn=lambda servable: loader.sizes[servable.name],
        estimate_fn=estimate or (lambda path: loader.sizes[os.path.basename(os.path.dirname(path))]),
        **kwargs,
    )
    for name in names:
        manager.set_aspired_versions(name, [AspiredVersion(1, make_version(tmp_path / name, 1))])
    return manager


def test_nothing_loads_until_asked_and_versions_read_available_not_resident(tmp_path):
    loader = Sized({"a": 30 * MB, "b": 30 * MB})
    manager = budget_manager(loader, 100 * MB, tmp_path, ["a", "b"])
    time.sleep(0.1)
    assert loader.loads == []
    state = manager.version_states("a")[1]
    assert (state.state, state.resident) == (ManagerState.AVAILABLE, False)
    assert manager.available_versions("a") == [1]  # readiness and labels count it
    with manager.pin("a") as servable:
        assert servable.name == "a" and servable.version == 1
    assert loader.loads == ["a"]
    state = manager.version_states("a")[1]
    assert (state.state, state.resident) == (ManagerState.AVAILABLE, True)
    manager.stop()


def test_least_recently_used_idle_model_is_evicted_and_comes_back(tmp_path):
    loader = Sized({n: 30 * MB for n in "abcd"})
    evictions = metrics.model_evictions.labels("c")._value.get()
    manager = budget_manager(loader, 100 * MB, tmp_path, list("abcd"))
    for name in "abc":
        with manager.pin(name):
            pass
    with manager.pin("a"):  # a is now the most recently used: b goes first
        pass
    with manager.pin("d"):
        pass
    wait_until(lambda: not manager.version_states("b")[1].resident)
    assert [n for n in "abcd" if manager.version_states(n)[1].resident] == ["a", "c", "d"]
    assert manager.version_states("b")[1].state is ManagerState.AVAILABLE
    with manager.pin("b") as servable:  # loads again
        assert servable.bundle.session.closed is False
    assert loader.loads == ["a", "b", "c", "d", "b"]
    assert loader.peak <= 100 * MB
    assert metrics.model_evictions.labels("c")._value.get() == evictions + 1  # c (least recent) went for b
    manager.stop()


def test_a_model_larger_than_its_estimate_makes_room_once_measured(tmp_path):
    loader = Sized({n: 30 * MB for n in "abcd"})
    manager = budget_manager(loader, 100 * MB, tmp_path, list("abcd"), estimate=lambda path: 10 * MB)
    for name in "abcd":  # d's estimate fits beside a, b and c; once loaded it does not
        with manager.pin(name):
            pass
    wait_until(lambda: not manager.version_states("a")[1].resident)
    assert [n for n in "abcd" if manager.version_states(n)[1].resident] == ["b", "c", "d"]
    manager.stop()


def test_a_model_serving_a_request_is_never_evicted(tmp_path):
    loader = Sized({n: 40 * MB for n in "abc"})
    manager = budget_manager(loader, 100 * MB, tmp_path, list("abc"))
    held_a = manager.pin("a")  # a request in flight on a (the least recently used)
    with manager.pin("b"):
        pass
    with manager.pin("c"):  # room comes from b, not from a
        assert manager.version_states("a")[1].resident
    assert not manager.version_states("b")[1].resident
    held_a.unpin()
    manager.stop()


def test_a_load_waits_for_a_busy_model_to_become_idle(tmp_path):
    loader = Sized({n: 60 * MB for n in "ab"})
    manager = budget_manager(loader, 100 * MB, tmp_path, list("ab"))
    held_a = manager.pin("a")
    got = []
    thread = threading.Thread(target=lambda: got.append(manager.pin("b", wait=5.0)))
    thread.start()
    time.sleep(0.3)
    assert got == [] and loader.loads == ["a"]  # b would not fit beside a, which is busy
    held_a.unpin()
    thread.join(5)
    assert got and got[0].name == "b"
    got[0].unpin()
    assert loader.peak <= 100 * MB
    manager.stop()


def test_the_wait_is_bounded_by_the_deadline(tmp_path):
    loader = Sized({n: 60 * MB for n in "ab"})
    manager = budget_manager(loader, 100 * MB, tmp_path, list("ab"))
    held_a = manager.pin("a")
    start = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match=r"Timed out waiting for Latest\(b\) to load"):
        manager.pin("b", wait=0.2)
    assert 0.2 <= time.monotonic() - start < 2.0
    held_a.unpin()
    manager.stop()


def test_room_given_back_goes_to_the_longest_wait(tmp_path):
    """z (sorted last) waits for room held by a busy model; b, asked for later, would fit now
    but would take z's room: it waits behind z, so z cannot starve behind models asked later."""
    loader = Sized({"a": 60 * MB, "b": 30 * MB, "z": 60 * MB})
    manager = budget_manager(loader, 100 * MB, tmp_path, ["a", "b", "z"])
    held_a = manager.pin("a")
    got = {}

    def ask(name):
        with manager.pin(name, wait=10.0) as servable:
            got[name] = servable.name

    z = threading.Thread(target=ask, args=("z",))
    z.start()
    wait_until(lambda: "z" in manager._wanted)
    b = threading.Thread(target=ask, args=("b",))
    b.start()
    time.sleep(0.3)
    assert loader.loads == ["a"]  # b fits beside a, yet waits behind z
    held_a.unpin()
    z.join(10)
    b.join(10)
    assert got == {"z": "z", "b": "b"}
    assert loader.loads == ["a", "z", "b"]
    assert loader.peak <= 100 * MB
    manager.stop()


def test_a_failed_load_answers_its_error_and_unknown_models_are_not_found(tmp_path):
    loader = Sized({"a": MB})
    manager = AspiredVersionsManager(
        loader, unload_fn=loader.unload, max_num_load_retries=0, memory_budget_bytes=100 * MB
    )
    manager.set_aspired_versions("a", [AspiredVersion(1, make_version(tmp_path / "a", 1, broken=True))])
    with pytest.raises(errors.DataLossError, match="corrupt export"):
        manager.pin("a")
    assert states(manager, "a") == {1: ManagerState.END}
    with pytest.raises(errors.NotFoundError, match=r"Servable not found for request: Latest\(zzz\)"):
        manager.pin("zzz")
    with pytest.raises(errors.NotFoundError, match=r"Specific\(a, 7\)"):
        manager.pin("a", 7)
    manager.stop()


def test_new_versions_of_a_resident_model_swap_in_and_idle_ones_wait(tmp_path):
    loader = Sized({"a": MB, "b": MB})
    manager = budget_manager(loader, 100 * MB, tmp_path, ["a", "b"])
    with manager.pin("a"):
        pass
    manager.set_aspired_versions("a", [AspiredVersion(2, make_version(tmp_path / "a", 2))])
    manager.set_aspired_versions("b", [AspiredVersion(2, make_version(tmp_path / "b", 2))])
    wait_until(lambda: manager.available_versions("a") == [2] and 2 in manager.version_states("a"))
    wait_until(lambda: manager.version_states("a")[2].resident)
    assert loader.loads == ["a", "a"]  # b's new version waits for b's first request
    assert manager.version_states("b")[2].resident is False
    manager.stop()


def test_many_models_under_load_stay_within_the_budget(tmp_path):
    """20 models of 3-12 MB, a budget for about 5, 6 threads asking for random models: every
    request gets its model, and the most held at once (loader-side) stays within the budget."""
    rng = random.Random(3)
    sizes = {f"m{i}": rng.randint(3, 12) * MB for i in range(20)}
    loader = Sized(sizes, delay=0.002)
    budget = 40 * MB
    manager = budget_manager(loader, budget, tmp_path, sorted(sizes))
    wrong, done = [], []

    def client(seed):
        r = random.Random(seed)
        for _ in range(60):
            name = r.choice(sorted(sizes))
            with manager.pin(name, wait=10.0) as servable:
                if servable.name != name or servable.bundle.session.closed:
                    wrong.append(name)
                time.sleep(r.random() * 0.002)
            done.append(name)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)  # (each unload collects the heap: seconds in all on a busy machine)
    assert not any(t.is_alive() for t in threads)
    assert len(done) == 360 and wrong == []
    assert loader.peak <= budget
    assert len(loader.loads) > 20  # evicted ones came back
    manager.stop()


def test_disk_bytes_sums_a_version_directory(tmp_path):
    (tmp_path / "variables").mkdir()
    (tmp_path / "variables" / "variables.data-00000-of-00001").write_bytes(b"x" * 1000)
    (tmp_path / "saved_model.pb").write_bytes(b"y" * 24)
    assert memory_budget.disk_bytes(str(tmp_path)) == 1024


def test_the_flag_reaches_the_manager_and_a_negative_budget_is_refused(tmp_path):
    from serving import server
    from serving.options import ServerOptions
    from serving.server_core import ServerCore

    options = ServerOptions(model_base_path=str(tmp_path), model_memory_budget_bytes=-1)
    with pytest.raises(errors.InvalidArgumentError, match="--model_memory_budget_bytes"):
        server.check_options(options)
    core = ServerCore(ServerOptions(model_memory_budget_bytes=64 * MB), load_fn=Sized({"m": MB}))
    assert core.manager._budget == 64 * MB
    core.stop()
