"""serving.lifecycle.manager: loads, availability-preserving swaps, pins, retries, ServerCore resolution."""

from __future__ import annotations

import gc
import os
import threading
import time

import pytest

from apis.tensorflow_serving.apis import model_pb2
from runtime import errors
from serving.lifecycle import model_config
from serving.lifecycle import policy as policy_lib
from serving.lifecycle.manager import AspiredVersionsManager
from serving.lifecycle.servable import ManagerState
from serving.lifecycle.source import AspiredVersion
from serving.options import ServerOptions
from serving.server_core import ServerCore


class FakeSession:
    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


class FakeBundle:
    def __init__(self, path):
        self.path = path
        self.session = FakeSession()


class FakeLoader:
    """load_fn: fails while ``<dir>/BROKEN`` exists or the dir lacks ``saved_model.pb``."""

    def __init__(self, delay=0.0):
        self.calls: list[str] = []
        self.delay = delay
        self.bundles: dict[str, FakeBundle] = {}

    def __call__(self, path, servable_id):
        self.calls.append(path)
        time.sleep(self.delay)
        if os.path.exists(os.path.join(path, "BROKEN")):
            raise errors.DataLossError(None, None, f"corrupt export at {path}")
        if not os.path.exists(os.path.join(path, "saved_model.pb")):
            raise errors.NotFoundError(None, None, f"Could not find SavedModel .pb or .pbtxt at {path}")
        bundle = FakeBundle(path)
        self.bundles[path] = bundle
        return bundle


def make_version(base, version, broken=False):
    path = os.path.join(base, str(version))
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "saved_model.pb"), "w") as f:
        f.write(f"v{version}")
    if broken:
        open(os.path.join(path, "BROKEN"), "w").close()
    return path


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.005)
    raise AssertionError("condition not reached")


def states(manager, name):
    return {v: s.state for v, s in manager.version_states(name).items()}


@pytest.fixture
def loader():
    return FakeLoader()


@pytest.fixture
def manager(loader):
    m = AspiredVersionsManager(loader, max_num_load_retries=0, load_retry_interval_seconds=0)
    yield m
    m.stop()


def test_loads_and_resolves(manager, tmp_path):
    manager.set_aspired_versions("m", [AspiredVersion(3, make_version(tmp_path, 3))])
    wait_until(lambda: manager.available_versions("m") == [3])
    with manager.get_servable("m", None) as servable:
        assert (servable.name, servable.version) == ("m", 3)
        assert servable.bundle.path.endswith("3")
    assert manager.get_servable("m", 3).version == 3
    with pytest.raises(errors.NotFoundError) as e:
        manager.get_servable("m", 4)
    assert e.value.message == "Servable not found for request: Specific(m, 4)"
    with pytest.raises(errors.NotFoundError) as e:
        manager.get_servable("other", None)
    assert e.value.message == "Servable not found for request: Latest(other)"


def test_hot_swap_never_loses_availability(loader, tmp_path):
    loader.delay = 0.05
    manager = AspiredVersionsManager(loader, max_num_load_retries=0)
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    failures, seen, done = [], set(), threading.Event()

    def client():
        while not done.is_set():
            try:
                seen.add(manager.get_servable("m", None).version)
            except errors.NotFoundError as e:
                failures.append(e)

    thread = threading.Thread(target=client)
    thread.start()
    manager.set_aspired_versions("m", [AspiredVersion(2, make_version(tmp_path, 2))])
    wait_until(lambda: states(manager, "m") == {2: ManagerState.AVAILABLE, 1: ManagerState.END})
    wait_until(lambda: 2 in seen)  # the client thread may be slow to run on a busy machine
    done.set()
    thread.join()
    manager.stop()
    assert failures == []
    assert seen == {1, 2}
    assert loader.bundles[os.path.join(str(tmp_path), "1")].session.closed


def test_resource_preserving_swap_unloads_before_it_loads(loader, tmp_path):
    """--aspired_version_policy=resource_preserving: the old version's bundle is closed before
    the new one's load starts (one bundle at a time); another model keeps the default."""
    loader.delay = 0.05
    events = []
    load = loader.__call__

    def recording_load(path, servable_id):
        events.append(("load", servable_id.name, servable_id.version))
        bundle = load(path, servable_id)
        bundle.id = (servable_id.name, servable_id.version)
        return bundle

    def recording_unload(bundle):
        events.append(("unload", *bundle.id))
        bundle.session.close()

    policies = {"m": policy_lib.RESOURCE}
    manager = AspiredVersionsManager(
        recording_load,
        unload_fn=recording_unload,
        max_num_load_retries=0,
        swap_policy=lambda name: policies.get(name, policy_lib.AVAILABILITY),
    )
    for name in ("m", "n"):
        manager.set_aspired_versions(name, [AspiredVersion(1, make_version(tmp_path / name, 1))])
        wait_until(lambda name=name: manager.available_versions(name) == [1])
    for name in ("m", "n"):
        manager.set_aspired_versions(name, [AspiredVersion(2, make_version(tmp_path / name, 2))])
    for name in ("m", "n"):
        wait_until(
            lambda name=name: states(manager, name) == {2: ManagerState.AVAILABLE, 1: ManagerState.END}
        )
    manager.stop()
    m_events = [e for e in events if e[1] == "m"]
    n_events = [e for e in events if e[1] == "n"]
    assert m_events == [("load", "m", 1), ("unload", "m", 1), ("load", "m", 2)]
    assert n_events == [("load", "n", 1), ("load", "n", 2), ("unload", "n", 1)]


def test_unload_waits_for_pinned_handles(manager, loader, tmp_path):
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    handle = manager.get_servable("m", None)
    manager.set_aspired_versions("m", [AspiredVersion(2, make_version(tmp_path, 2))])
    wait_until(lambda: states(manager, "m").get(1) == ManagerState.UNLOADING)
    time.sleep(0.05)
    assert states(manager, "m")[1] == ManagerState.UNLOADING
    assert not handle.bundle.session.closed
    assert manager.get_servable("m", None).version == 2  # new requests already go to v2
    with pytest.raises(errors.NotFoundError):
        manager.get_servable("m", 1)
    del handle
    gc.collect()
    wait_until(lambda: states(manager, "m").get(1) == ManagerState.END)


def test_unload_waits_for_a_pin_until_its_with_block_ends(manager, loader, tmp_path):
    """The request paths' pin (``manager.pin``, no handle object) holds its version like a handle."""
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    with manager.pin("m") as servable, manager.pin("m", 1):
        manager.set_aspired_versions("m", [AspiredVersion(2, make_version(tmp_path, 2))])
        wait_until(lambda: states(manager, "m").get(1) == ManagerState.UNLOADING)
        time.sleep(0.05)
        assert states(manager, "m")[1] == ManagerState.UNLOADING
        assert servable.version == 1 and not servable.bundle.session.closed
        with manager.pin("m") as newer:
            assert newer.version == 2
        with pytest.raises(errors.NotFoundError, match=r"Specific\(m, 1\)"):
            manager.pin("m", 1)
    wait_until(lambda: states(manager, "m").get(1) == ManagerState.END)
    assert servable.bundle.session.closed


def test_a_pin_on_a_version_retired_meanwhile_takes_the_new_one(manager, loader, tmp_path):
    """A request that read the tables just before a version's unload began (the unload then
    sees no pin of it) lets go of it and looks again, finding the version now served."""
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    old = manager._latest
    manager.set_aspired_versions("m", [AspiredVersion(2, make_version(tmp_path, 2))])
    wait_until(lambda: states(manager, "m").get(1) == ManagerState.END)
    current = manager._latest

    class ReadJustBeforeTheSwap(dict):
        def get(self, name, default=None):
            manager._latest = current  # the swap happens right after this read
            return old.get(name, default)

    manager._latest = ReadJustBeforeTheSwap(old)
    with manager.pin("m") as servable:
        assert servable.version == 2
    assert not old["m"].pins and not current["m"].pins


def test_failed_load_keeps_serving_old_version(loader, tmp_path):
    manager = AspiredVersionsManager(loader, max_num_load_retries=2, load_retry_interval_seconds=0.01)
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    bad = make_version(tmp_path, 2, broken=True)
    manager.set_aspired_versions("m", [AspiredVersion(2, bad)])
    wait_until(lambda: states(manager, "m").get(2) == ManagerState.END)
    assert loader.calls.count(bad) == 3  # the first try and two retries
    status = manager.version_states("m")[2]
    assert isinstance(status.error, errors.DataLossError)
    assert states(manager, "m")[1] == ManagerState.AVAILABLE
    assert manager.get_servable("m", None).version == 1
    manager.stop()


def test_half_written_version_loads_once_complete(manager, loader, tmp_path):
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    partial = tmp_path / "2"
    partial.mkdir()
    (partial / "variables").mkdir()
    manager.set_aspired_versions("m", [AspiredVersion(2, str(partial))])
    wait_until(lambda: states(manager, "m").get(2) == ManagerState.END)
    manager.set_aspired_versions("m", [AspiredVersion(2, str(partial))])  # a poll, nothing changed
    time.sleep(0.05)
    assert states(manager, "m")[2] == ManagerState.END
    make_version(tmp_path, 2)  # the copy completes
    manager.set_aspired_versions("m", [AspiredVersion(2, str(partial))])  # the next poll
    wait_until(lambda: states(manager, "m") == {2: ManagerState.AVAILABLE, 1: ManagerState.END})


def test_a_version_written_to_while_it_loads_is_not_served_until_a_load_sees_it_still(tmp_path):
    """A load during which the directory changed read half of two states: it counts as failed
    (its bundle released), the old version keeps serving, and the next poll loads it again."""
    written = threading.Event()

    class WrittenDuringLoad(FakeLoader):
        def __call__(self, path, servable_id):
            bundle = super().__call__(path, servable_id)
            if servable_id.version == 2 and not written.is_set():
                with open(os.path.join(path, "variables.data"), "w") as f:  # the copy goes on
                    f.write("more")
                written.set()
            return bundle

    loader = WrittenDuringLoad()
    manager = AspiredVersionsManager(loader, max_num_load_retries=5, load_retry_interval_seconds=60)
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    path = make_version(tmp_path, 2)
    manager.set_aspired_versions("m", [AspiredVersion(2, path)])
    wait_until(lambda: manager._harnesses["m"][2].waiting_retry)
    first = loader.bundles[path]
    assert first.session.closed  # released, never served
    assert manager.available_versions("m") == [1]
    manager.set_aspired_versions("m", [AspiredVersion(2, path)])  # the next poll sees the change
    wait_until(lambda: manager.available_versions("m") == [2])
    assert loader.calls.count(path) == 2 and not loader.bundles[path].session.closed
    manager.stop()


def test_retry_wait_ends_early_when_directory_changes(loader, tmp_path):
    manager = AspiredVersionsManager(loader, max_num_load_retries=1, load_retry_interval_seconds=60)
    partial = tmp_path / "1"
    partial.mkdir()
    manager.set_aspired_versions("m", [AspiredVersion(1, str(partial))])
    wait_until(lambda: manager._harnesses["m"][1].waiting_retry)
    make_version(tmp_path, 1)
    manager.set_aspired_versions("m", [AspiredVersion(1, str(partial))])
    wait_until(lambda: manager.available_versions("m") == [1], timeout=5)
    manager.stop()


def test_unaspired_models_unload(manager, tmp_path):
    manager.set_aspired_versions("m", [AspiredVersion(1, make_version(tmp_path, 1))])
    wait_until(lambda: manager.available_versions("m") == [1])
    manager.set_aspired_versions("m", [])
    wait_until(lambda: states(manager, "m") == {1: ManagerState.END})
    with pytest.raises(errors.NotFoundError):
        manager.get_servable("m", None)


def test_all_policy_loads_every_version(manager, tmp_path):
    versions = [AspiredVersion(v, make_version(tmp_path, v)) for v in (3, 2, 1)]
    manager.set_aspired_versions("m", versions)
    wait_until(lambda: manager.available_versions("m") == [3, 2, 1])
    manager.set_aspired_versions("m", versions[:1])
    wait_until(lambda: manager.available_versions("m") == [3])


def test_wait_for_models_reports_failures(manager, tmp_path):
    since = manager.current_seq()
    manager.set_aspired_versions("good", [AspiredVersion(1, make_version(tmp_path / "g", 1))])
    manager.set_aspired_versions("bad", [AspiredVersion(1, make_version(tmp_path / "b", 1, broken=True))])
    reached = manager.wait_for_models({"good", "bad"}, since)
    assert reached["good"].state == ManagerState.AVAILABLE
    assert reached["bad"].state == ManagerState.END
    assert isinstance(reached["bad"].error, errors.DataLossError)


# -- ServerCore ----------------------------------------------------------------------------------


def options(**kw):
    defaults = dict(file_system_poll_wait_seconds=0, max_num_load_retries=0, load_retry_interval_micros=0)
    return ServerOptions(**{**defaults, **kw})


def config_for(models):
    config = model_config.ModelServerConfig()
    for name, base, *extra in models:
        model = config.model_config_list.config.add(
            name=name, base_path=str(base), model_platform="tensorflow"
        )
        for label, version in (extra[0] if extra else {}).items():
            model.version_labels[label] = version
    return config


def spec(name, version=None, label=None):
    s = model_pb2.ModelSpec(name=name)
    if version is not None:
        s.version.value = version
    if label is not None:
        s.version_label = label
    return s


def test_server_core_initial_load_and_resolution(loader, tmp_path):
    make_version(tmp_path / "a", 1)
    make_version(tmp_path / "a", 2)
    core = ServerCore(options(), load_fn=loader)
    core.reload_config(config_for([("a", tmp_path / "a")]))
    assert core.servable_handle(spec("a")).version == 2
    with pytest.raises(errors.NotFoundError) as e:
        core.servable_handle(spec("a", 1))
    assert e.value.message == "Servable not found for request: Specific(a, 1)"
    with pytest.raises(errors.InvalidArgumentError) as e:
        core.servable_handle(spec(""))
    assert e.value.message == "ModelSpec has no name specified."
    with pytest.raises(errors.InvalidArgumentError) as e:
        core.servable_handle(spec("a", label="nope"))
    assert e.value.message == "Unrecognized servable version label: nope"
    assert [s.version for s in core.model_status("a")] == [2]
    with pytest.raises(errors.NotFoundError) as e:
        core.model_status("a", 7)
    assert e.value.message == "Could not find version 7 of model a"
    with pytest.raises(errors.NotFoundError) as e:
        core.model_status("zzz")
    assert e.value.message == "Could not find any versions of model zzz"
    core.stop()


def test_server_core_initial_load_failure_message(loader, tmp_path):
    make_version(tmp_path / "a", 5, broken=True)
    core = ServerCore(options(), load_fn=loader)
    with pytest.raises(errors.UnknownError) as e:
        core.reload_config(config_for([("a", tmp_path / "a")]))
    assert e.value.message.startswith(
        "1 servable(s) did not become available: {{{name: a version: 5} due to error: DATA_LOSS: corrupt export"
    )
    core.stop()


def test_server_core_reload_adds_and_removes_models(loader, tmp_path):
    for name in ("a", "b"):
        make_version(tmp_path / name, 1)
    core = ServerCore(options(), load_fn=loader)
    core.reload_config(config_for([("a", tmp_path / "a")]))
    core.reload_config(config_for([("a", tmp_path / "a"), ("b", tmp_path / "b")]))
    assert core.servable_handle(spec("b")).version == 1  # new models are ready when reload returns
    a_session = core.servable_handle(spec("a")).bundle.session
    core.reload_config(config_for([("b", tmp_path / "b")]))
    wait_until(lambda: not core.has_available_version("a"))
    wait_until(lambda: a_session.closed)
    assert core.servable_handle(spec("b")).version == 1
    assert loader.calls.count(str(tmp_path / "b" / "1")) == 1  # unchanged model not reloaded
    core.stop()


def test_server_core_version_labels(loader, tmp_path):
    for v in (1, 2):
        make_version(tmp_path / "a", v)
    core = ServerCore(options(allow_version_labels_for_unavailable_models=True), load_fn=loader)
    config = config_for([("a", tmp_path / "a", {"stable": 1, "canary": 2})])
    config.model_config_list.config[0].model_version_policy.all.SetInParent()
    core.reload_config(config)
    wait_until(lambda: core.manager.available_versions("a") == [2, 1])
    assert core.servable_handle(spec("a", label="stable")).version == 1
    assert core.servable_handle(spec("a", label="canary")).version == 2
    core.stop()


def test_server_core_labels_in_first_config_need_the_flag(loader, tmp_path):
    make_version(tmp_path / "a", 1)
    core = ServerCore(options(), load_fn=loader)
    with pytest.raises(errors.FailedPreconditionError):
        core.reload_config(config_for([("a", tmp_path / "a", {"stable": 1})]))
    core.stop()


def test_server_core_rejects_bad_transitions(loader, tmp_path):
    make_version(tmp_path / "a", 1)
    core = ServerCore(options(), load_fn=loader)
    core.reload_config(config_for([("a", tmp_path / "a")]))
    custom = model_config.ModelServerConfig()
    custom.custom_model_config.type_url = "x"
    with pytest.raises(errors.FailedPreconditionError) as e:
        core.reload_config(custom)
    assert "It is only legal to transition from one ModelConfigList to another." in e.value.message
    with pytest.raises(errors.FailedPreconditionError):
        core.reload_config(model_config.ModelServerConfig())
    core.stop()


def test_states_while_loading_and_load_threads(tmp_path):
    gate = threading.Event()
    started = []

    def slow_load(path, servable_id):
        started.append(servable_id.version)
        gate.wait(5)
        return FakeBundle(path)

    manager = AspiredVersionsManager(slow_load, num_load_threads=0)
    manager.set_aspired_versions("m", [AspiredVersion(v, make_version(tmp_path, v)) for v in (1, 2)])
    wait_until(lambda: started == [2])
    time.sleep(0.05)
    assert started == [2]  # --num_load_threads=0: one load at a time, highest first
    assert states(manager, "m") == {2: ManagerState.LOADING, 1: ManagerState.START}
    gate.set()
    wait_until(lambda: manager.available_versions("m") == [2, 1])
    manager.stop()


def test_version_removed_while_retrying_stops_retrying(loader, tmp_path):
    manager = AspiredVersionsManager(loader, max_num_load_retries=5, load_retry_interval_seconds=60)
    bad = make_version(tmp_path, 1, broken=True)
    manager.set_aspired_versions("m", [AspiredVersion(1, bad)])
    wait_until(lambda: manager._harnesses["m"][1].waiting_retry)
    manager.set_aspired_versions("m", [])
    wait_until(lambda: states(manager, "m") == {1: ManagerState.END})
    assert loader.calls.count(bad) == 1
    manager.stop()


def test_a_failing_model_waiting_to_retry_does_not_hold_up_another(loader, tmp_path):
    """One load slot (--num_load_threads=0): model "bad" fails and waits a minute to retry;
    model "good" loads meanwhile, and "bad" still retries when its directory changes."""
    manager = AspiredVersionsManager(
        loader, num_load_threads=0, max_num_load_retries=5, load_retry_interval_seconds=60
    )
    bad = make_version(tmp_path / "bad", 1, broken=True)
    manager.set_aspired_versions("bad", [AspiredVersion(1, bad)])
    wait_until(lambda: manager._harnesses["bad"][1].waiting_retry)
    manager.set_aspired_versions("good", [AspiredVersion(1, make_version(tmp_path / "good", 1))])
    wait_until(lambda: manager.available_versions("good") == [1], timeout=5)
    assert states(manager, "bad") == {1: ManagerState.LOADING}
    os.remove(os.path.join(bad, "BROKEN"))  # fixed on disk: the next poll retries at once
    manager.set_aspired_versions("bad", [AspiredVersion(1, bad)])
    wait_until(lambda: manager.available_versions("bad") == [1], timeout=5)
    assert manager._loads_in_flight == 0
    manager.stop()


def test_a_retry_waits_for_a_free_load_slot(tmp_path):
    """A retry takes its slot back before loading: with one slot busy, it waits."""
    gate, calls = threading.Event(), []

    def load(path, servable_id):
        calls.append(servable_id)
        if servable_id.name == "slow":
            gate.wait(5)
        elif len([c for c in calls if c.name == "bad"]) == 1:
            raise errors.DataLossError(None, None, "first try fails")
        return FakeBundle(path)

    manager = AspiredVersionsManager(
        load, num_load_threads=0, max_num_load_retries=1, load_retry_interval_seconds=0.05
    )
    manager.set_aspired_versions("bad", [AspiredVersion(1, make_version(tmp_path / "bad", 1))])
    wait_until(lambda: manager._harnesses["bad"][1].waiting_retry)
    manager.set_aspired_versions("slow", [AspiredVersion(1, make_version(tmp_path / "slow", 1))])
    wait_until(lambda: any(c.name == "slow" for c in calls))
    time.sleep(0.2)  # the retry interval has passed; the slot is the slow load's
    assert [c.name for c in calls] == ["bad", "slow"]
    gate.set()
    wait_until(lambda: manager.available_versions("bad") == [1] and manager.available_versions("slow") == [1])
    assert manager._loads_in_flight == 0
    manager.stop()


def test_session_config_from_flags():
    from serving.inference.bundles import session_config

    config = session_config(ServerOptions(tensorflow_session_parallelism=3))
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (3, 3)
    config = session_config(
        ServerOptions(tensorflow_intra_op_parallelism=2, tensorflow_inter_op_parallelism=5)
    )
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (2, 5)
    with pytest.raises(errors.InvalidArgumentError) as e:
        session_config(
            ServerOptions(
                tensorflow_session_parallelism=1,
                tensorflow_intra_op_parallelism=1,
                tensorflow_inter_op_parallelism=1,
            )
        )
    assert "You cannot configure all." in e.value.message
    assert ServerOptions(saved_model_tags="serve,gpu").saved_model_tag_set == {"serve", "gpu"}
