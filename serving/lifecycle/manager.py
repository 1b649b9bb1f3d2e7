"""AspiredVersionsManager: which model versions are loaded, and pinned handles to them.

``FileSystemStoragePathSource`` -> ``AspiredVersionsManager.set_aspired_versions`` -> each
model's ``policy`` (availability- or resource-preserving) -> loads and unloads on worker threads. ``ServerCore``
(``serving/server_core.py``) owns the configuration and drives this manager.

Guarantees:

- Thread-safe throughout; one lock guards the manager's tables, loads and unloads run
  outside it. Requests take no lock: they read tables that are replaced whole.
- A pin holds its version: an unload waits until every pin taken before it is released
  (``with`` block end, or a ``get_servable`` handle dropped), so requests never see a
  bundle being torn down. New pins stop resolving to a version as soon as its unload
  starts.
- A failed load is retried ``max_num_load_retries`` times, ``load_retry_interval`` apart,
  then recorded (state END with the error) without touching the versions being served.
  Beyond TF Serving: a failed or retrying version whose directory changes on disk (e.g. a
  half-copied export being completed) is tried again on the next poll; a load during which
  its directory changed counts as failed (what it read may be half of two states), and a version waiting
  to retry holds no load slot (``num_load_threads``), so one model's failing load never holds
  up another's.
- With a memory budget (``serving.lifecycle.memory_budget``), models load on their first request and
  idle ones are evicted, least recently used first, to make room: ``pin`` then waits for a
  model that is not resident instead of failing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime import errors
from serving.lifecycle import memory_budget
from serving.lifecycle import policy as policy_lib
from serving.lifecycle.harness import (
    NONE,
    Handle,
    Harness,
    Pinned,
    VersionState,
    as_op_error,
    now,
    request_text,
    status_string,
)
from serving.lifecycle.on_demand import OnDemandLoading
from serving.lifecycle.policy import HarnessState
from serving.lifecycle.servable import ManagerState, Servable, ServableId, fingerprint
from serving.lifecycle.source import AspiredVersion
from serving.observability import metrics
from serving.resources import memory

__all__ = [
    "AspiredVersionsManager",
    "LoadFn",
    "StateListener",
    "VersionState",
    "as_op_error",
    "status_string",
]

logger = logging.getLogger(__name__)

LoadFn = Callable[[str, ServableId], Any]  # (version directory, id) -> bundle
StateListener = Callable[[ServableId, ManagerState], None]


class AspiredVersionsManager(OnDemandLoading):
    """Loads the versions a source aspires to, unloads the rest, and hands out pinned Servables."""

    def __init__(
        self,
        load_fn: LoadFn,
        *,
        unload_fn: Callable[[Any], None] | None = None,
        warmup_fn: Callable[[Servable], None] | None = None,
        num_load_threads: int = 0,
        max_num_load_retries: int = 5,
        load_retry_interval_seconds: float = 60.0,
        swap_policy: Callable[[str], str] = lambda name: policy_lib.AVAILABILITY,
        memory_budget_bytes: int = 0,
        size_fn: Callable[[Servable], int] | None = None,
        estimate_fn: Callable[[str], int] = memory_budget.disk_bytes,
        rss_fn: Callable[[], int] | None = None,
    ):
        self._load_fn = load_fn
        self._swap_policy = swap_policy  # model name -> policy_lib.AVAILABILITY or RESOURCE
        self._unload_fn = unload_fn or _close_bundle
        self._warmup_fn = warmup_fn
        self._max_loads = max(1, num_load_threads)
        self._max_retries = max(0, max_num_load_retries)
        self._retry_interval = max(0.0, load_retry_interval_seconds)
        self._lock = threading.RLock()  # the request path takes no lock at all
        self._cv = threading.Condition(self._lock)
        self._harnesses: dict[str, dict[int, Harness]] = {}
        # What requests read: never changed in place, replaced whole (by ``_set_available``), so
        # that a request finds its version with one lookup and no lock.
        self._available: dict[str, dict[int, Pinned]] = {}
        self._latest: dict[str, Pinned] = {}  # the highest available version of each model
        self._states: dict[str, dict[int, VersionState]] = {}  # the ServableStateMonitor
        self._seq = 0
        self._loads_in_flight = 0
        self._listeners: list[StateListener] = []
        self._source_errors: dict[str, errors.OpError] = {}  # model -> why its base path fails
        self._stopped = False
        # The memory budget (0: none, every aspired version loads at once).
        self._budget = max(0, memory_budget_bytes)
        self._size_fn = size_fn or _footprint_bytes
        self._estimate_fn = estimate_fn
        # budget: models whose aspired versions are to be resident, in the order they were first
        # asked for (their loads wait for room in this order: none starves behind later ones)
        self._wanted: dict[str, None] = {}
        self._waiters: dict[str, int] = {}  # budget: requests waiting for each model's load
        self._last_size: dict[str, int] = {}  # budget: what each model's last load held
        self._rss_fn = rss_fn  # budget: the process's RSS, against which the sizes are scaled
        self._baseline: int | None = None  # budget: the RSS before the first load on demand

    # -- configuration -------------------------------------------------------------------

    def set_num_load_threads(self, n: int) -> None:
        with self._cv:
            self._max_loads = max(1, n)
            self._reconcile()
            self._cv.notify_all()  # retries waiting for a load slot

    def add_state_listener(self, listener: StateListener) -> None:
        """``listener(servable_id, state)`` runs on every state change, under the manager's lock."""
        with self._cv:
            self._listeners.append(listener)

    # -- the source's target --------------------------------------------------------------

    def set_aspired_versions(self, name: str, versions: list[AspiredVersion]) -> None:
        """The complete list of versions of ``name`` to serve from now on."""
        changed = self._changed_on_disk(name, versions)
        with self._cv:
            if self._stopped:
                return
            table = self._harnesses.setdefault(name, {})
            wanted = {v.version: v for v in versions}
            for version, h in table.items():
                if version not in wanted and h.is_aspired:
                    h.is_aspired = False
                    h.cancel.set()
                    h.retry_now.set()
            for version, aspired in wanted.items():
                h = table.get(version)
                if h is None or (not h.is_aspired and h.state in (HarnessState.NEW, HarnessState.ERROR)):
                    table[version] = Harness(ServableId(name, version), aspired.path)
                    self._publish(table[version], ManagerState.START)
                elif not h.is_aspired:
                    h.is_aspired = True  # re-aspired while still loaded or unloading
                    h.cancel.clear()
                elif version in changed and h.state is HarnessState.ERROR:
                    logger.info("Servable version %s changed on disk after a failed load; retrying", h.id)
                    table[version] = Harness(h.id, aspired.path)
                    self._publish(table[version], ManagerState.START)
                elif version in changed and h.waiting_retry:
                    h.retry_now.set()
            self._reconcile()

    def _changed_on_disk(self, name: str, versions: list[AspiredVersion]) -> set[int]:
        with self._cv:
            table = self._harnesses.get(name, {})
            suspects = {
                v.version: table[v.version].fingerprint
                for v in versions
                if v.version in table
                and (table[v.version].state is HarnessState.ERROR or table[v.version].waiting_retry)
            }
        paths = {v.version: v.path for v in versions}
        return {version for version, fp in suspects.items() if fingerprint(paths[version]) != fp}

    # -- lookups ----------------------------------------------------------------------------

    def get_servable(self, name: str, version: int | None, wait: float | None = None) -> Servable:
        """A pinned handle to ``version`` (None: the highest available), released by its
        ``with`` block or when it is dropped."""
        return Handle(self.pin(name, version, wait))

    def pin(self, name: str, version: int | None = None, wait: float | None = None) -> Servable:
        """``version`` (None: the highest available) pinned until the ``with`` block it opens
        ends; only for ``with``: there is no per-request object to release it otherwise.
        The request paths' lookup: one dict lookup and a list append. With a memory budget, a
        model that is not resident is loaded and waited for, ``wait`` seconds at most (None:
        ``memory_budget.WAIT_SECONDS``)."""
        while True:
            if version is None:
                pinned = self._latest.get(name)
            else:
                pinned = self._available.get(name, NONE).get(version)
            if pinned is None:
                if self._budget:
                    return self._pin_on_demand(name, version, wait)
                raise errors.NotFoundError(
                    None, None, f"Servable not found for request: {request_text(name, version)}"
                )
            pins = pinned.pins
            pins.append(None)
            if not pinned.retired:
                pinned.used = now()
                return pinned
            pins.pop()  # retired after our lookup: the tables no longer hold it, look again

    def _set_available(self, h: Harness, available: bool) -> None:
        """Adds or removes ``h`` among the versions requests can pin (called with the manager's
        lock): new tables, swapped in whole; a removed version is retired once they are."""
        versions = dict(self._available.get(h.id.name, {}))
        if available:
            h.pinned = versions[h.id.version] = Pinned(h)
        else:
            versions.pop(h.id.version, None)
        table, latest = dict(self._available), dict(self._latest)
        if versions:
            table[h.id.name], latest[h.id.name] = versions, versions[max(versions)]
        else:
            table.pop(h.id.name, None)
            latest.pop(h.id.name, None)
        self._available, self._latest = table, latest
        if not available and h.pinned is not None:
            h.pinned.retired = True

    def available_versions(self, name: str) -> list[int]:
        """The versions requests can use, highest first (with a budget, those not resident too)."""
        with self._cv:
            idle = [v for v, h in self._harnesses.get(name, {}).items() if h.idle and h.is_aspired]
            return sorted({*self._available.get(name, {}), *idle}, reverse=True)

    def version_states(self, name: str) -> dict[int, VersionState]:
        """Every version the manager has seen of ``name``, highest first (END ones included)."""
        with self._cv:
            states = self._states.get(name, {})
            return {v: states[v] for v in sorted(states, reverse=True)}

    def model_names(self) -> list[str]:
        with self._cv:
            return sorted(self._states)

    def set_source_error(self, name: str, error: errors.OpError | None) -> None:
        """Why the source cannot read model ``name``'s base path (None: it can again). A model
        with such an error counts as reached in ``wait_for_models``, so it holds nothing up."""
        with self._cv:
            if error is None:
                self._source_errors.pop(name, None)
            else:
                self._source_errors[name] = error
            self._cv.notify_all()

    def source_error(self, name: str) -> errors.OpError | None:
        with self._cv:
            return self._source_errors.get(name)

    def current_seq(self) -> int:
        with self._cv:
            return self._seq

    def wait_for_models(self, names: set[str], since_seq: int) -> dict[str, VersionState]:
        """Blocks until each model has a version that became AVAILABLE or END after ``since_seq``,
        or its base path cannot be read (``set_source_error``: version 0, END, that error).

        Returns, per model, the first such state (TF's ``WaitUntilServablesReachState``).
        """
        reached: dict[str, VersionState] = {}
        with self._cv:
            while True:
                for name in names - reached.keys():
                    hits = [
                        s
                        for s in self._states.get(name, {}).values()
                        if s.seq > since_seq and s.state in (ManagerState.AVAILABLE, ManagerState.END)
                    ]
                    if hits:
                        reached[name] = min(hits, key=lambda s: s.seq)
                    elif name in self._source_errors:
                        reached[name] = VersionState(0, ManagerState.END, self._source_errors[name])
                if reached.keys() >= names or self._stopped:
                    return reached
                self._cv.wait(1.0)

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            for table in self._harnesses.values():
                for h in table.values():
                    h.cancel.set()
                    h.retry_now.set()
            self._cv.notify_all()

    # -- the manager's work ------------------------------------------------------------------

    def _publish(
        self, h: Harness, state: ManagerState, error: errors.OpError | None = None, resident: bool = True
    ) -> None:
        self._seq += 1
        self._states.setdefault(h.id.name, {})[h.id.version] = VersionState(
            h.id.version, state, error, self._seq, resident
        )
        for listener in self._listeners:
            try:
                listener(h.id, state)
            except Exception:
                logger.exception("Servable state listener failed")
        self._cv.notify_all()

    def _reconcile(self) -> None:
        """Applies the policy until every model is up to date or the load threads are busy."""
        if self._stopped:
            return
        room_awaited = False  # budget: an earlier model waits for room that later ones would take
        for name in self._reconcile_order():
            table = self._harnesses[name]
            policy = self._swap_policy(name)
            for version, h in list(table.items()):
                if (
                    h.is_aspired and h.state is HarnessState.DISABLED
                ):  # re-aspired while unloading, or evicted
                    table[version] = Harness(h.id, h.path, idle=h.evicted)
                    if not h.evicted:
                        self._publish(table[version], ManagerState.START)
                elif not h.is_aspired and h.state in (
                    HarnessState.NEW,
                    HarnessState.ERROR,
                    HarnessState.DISABLED,
                ):
                    del table[version]
                    if h.state is HarnessState.NEW:
                        self._publish(h, ManagerState.END)
            on_demand = self._budget and name not in self._wanted
            if on_demand:
                self._mark_idle(table)
            while True:
                snapshots = [policy_lib.VersionSnapshot(v, h.state, h.is_aspired) for v, h in table.items()]
                action = policy_lib.next_action(snapshots, policy)
                if action is None:
                    break
                h = table[action.version]
                if action.action is policy_lib.Action.UNLOAD:
                    self._start_unload(h)
                elif on_demand or room_awaited or self._loads_in_flight >= self._max_loads:
                    break
                elif self._budget and not self._make_room(h):
                    room_awaited = True
                    break
                else:
                    self._start_load(h)

    def _reconcile_order(self) -> list[str]:
        """The models in the order their loads are considered: with a budget, those asked for
        first come first (``_wanted``'s order), so that room given back goes to the longest wait."""
        if not self._budget:
            return list(self._harnesses)
        wanted = [n for n in self._wanted if n in self._harnesses]
        return wanted + [n for n in self._harnesses if n not in self._wanted]

    def _start_load(self, h: Harness) -> None:
        h.state = HarnessState.LOADING
        self._loads_in_flight += 1
        logger.info("Approving load for servable version %s", h.id)
        if not h.idle:  # a load on demand stays AVAILABLE (not resident) until it is
            self._publish(h, ManagerState.LOADING)
        threading.Thread(
            target=self._load, args=(h,), name=f"load-{h.id.name}-{h.id.version}", daemon=True
        ).start()

    def _load(self, h: Harness) -> None:
        logger.info("Loading servable version %s", h.id)
        attempt, bundle, error, fp = 0, None, None, None
        while True:
            fp = fingerprint(h.path)
            try:
                bundle = self._load_and_warm_up(h)
                if fingerprint(h.path) != fp:  # written to while it was read: not what is on disk now
                    self._unload_fn(bundle)
                    bundle = None
                    raise errors.FailedPreconditionError(
                        None, None, f"{h.path} changed while it was being loaded. Is it still being written?"
                    )
                error = None
                break
            except Exception as e:  # any loader failure is a failed load, never a crash
                error = as_op_error(e)
                metrics.model_load_failures.labels(h.id.name).inc()
                logger.error("Loading servable: %s failed: %s", h.id, status_string(error))
            attempt += 1
            if attempt > self._max_retries:
                logger.info(
                    "Retrying of Loading servable: %s exhausted max_num_retries: %d", h.id, self._max_retries
                )
                break
            if h.cancel.is_set():
                break
            with self._cv:  # a retry wait holds no load slot: other models load meanwhile
                h.waiting_retry, h.fingerprint = True, fp
                self._loads_in_flight -= 1
                self._reconcile()
                self._cv.notify_all()
            h.retry_now.wait(self._retry_interval)
            h.retry_now.clear()
            with self._cv:
                h.waiting_retry = False
                while self._loads_in_flight >= self._max_loads and not (self._stopped or h.cancel.is_set()):
                    self._cv.wait()
                self._loads_in_flight += 1
            if h.cancel.is_set():
                logger.info("Retrying of Loading servable: %s was cancelled.", h.id)
                break
            logger.info("Retrying of Loading servable: %s retry: %d", h.id, attempt)
        with self._cv:
            self._loads_in_flight -= 1
            if error is None:
                h.bundle, h.state, h.idle = bundle, HarnessState.READY, False
                self._set_available(h, True)
                logger.info("Successfully loaded servable version %s", h.id)
                metrics.model_loads.labels(h.id.name).inc()
                self._publish(h, ManagerState.AVAILABLE)
            else:
                h.state, h.error, h.fingerprint, h.idle = HarnessState.ERROR, error, fp, False
                logger.info("Encountered an error for servable version %s: %s", h.id, status_string(error))
                self._publish(h, ManagerState.END, error)
            self._reconcile()
        if error is None:
            self._measure(h)

    def _measure(self, h: Harness) -> None:
        """What a loaded version holds: logged, and with a budget, room made for it if it
        holds more than its estimate (outside the lock: a walk)."""
        pinned = self._available.get(h.id.name, {}).get(h.id.version)
        if pinned is None:
            return
        try:
            size = self._size_fn(pinned)
        except Exception:  # noqa: BLE001 - a figure, never a failed load
            logger.exception("Measuring servable version %s", h.id)
            return
        if self._budget:
            with self._cv:
                h.size = self._last_size[h.id.name] = size
                residents = self._residents()
                for name in memory_budget.over_budget(
                    self._scaled_budget(residents), residents, keep=h.id.name
                ):
                    self._evict(name)
                self._reconcile()
        if hasattr(pinned.bundle, "session"):  # (walked once: the size above is this walk's, cached)
            held = memory.model_footprint(pinned)
            logger.info(
                "Servable version %s holds %s (arrays: variables and constants %s; onnxruntime %s so far)",
                h.id,
                memory.mib(held.total),
                memory.mib(held.arrays),
                memory.mib(held.onnxruntime),
            )

    def loaded(self) -> list[Servable]:
        """Every available version (unpinned: for reading what it holds, not for running it)."""
        return [pinned for versions in self._available.values() for pinned in versions.values()]

    def _load_and_warm_up(self, h: Harness) -> Any:
        """The bundle of ``h``, warmed up (``warmup_fn``) before any request can pin it: the
        warmup's Servable shares the version's cache, so what it builds is what requests find.
        A failing warmup is a failed load; the bundle is released."""
        bundle = self._load_fn(h.path, h.id)
        if self._warmup_fn is not None:
            try:
                self._warmup_fn(Servable(h.id.name, h.id.version, bundle, cache=h.cache))
            except BaseException:
                h.cache.clear()
                self._unload_fn(bundle)
                raise
        return bundle

    def _start_unload(self, h: Harness) -> None:
        h.state = HarnessState.UNLOADING
        self._set_available(h, False)
        if h.evicted:
            self._publish(h, ManagerState.AVAILABLE, resident=False)
        else:
            self._publish(h, ManagerState.UNLOADING)
        threading.Thread(
            target=self._unload, args=(h,), name=f"unload-{h.id.name}-{h.id.version}", daemon=True
        ).start()

    def _unload(self, h: Harness) -> None:
        logger.info("Quiescing servable version %s", h.id)
        pins = h.pinned.pins if h.pinned is not None else []
        started = warned = time.monotonic()
        delay = 0.0005
        while pins:  # requests release their pins without signalling: poll, backing off
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            now = time.monotonic()
            if now - warned >= 10.0:
                warned = now
                logger.warning(
                    "Servable version %s: still %d request(s) in flight after %.0fs",
                    h.id,
                    len(pins),
                    now - started,
                )
        logger.info("Done quiescing servable version %s", h.id)
        logger.info("Unloading servable version %s", h.id)
        try:
            self._unload_fn(h.bundle)
        except Exception:
            logger.exception("Unloading servable version %s raised", h.id)
        metrics.model_unloads.labels(h.id.name).inc()
        with self._cv:
            h.bundle, h.cache, h.pinned, h.state = None, {}, None, HarnessState.DISABLED
            logger.info("Done unloading servable version %s", h.id)
            if not h.evicted:
                self._publish(h, ManagerState.END)
        memory.release_freed()  # its cycles, now, and before the next load is approved
        with self._cv:
            self._reconcile()


def _footprint_bytes(servable: Servable) -> int:
    """What a loaded version holds (``memory.model_footprint``; 0 for a bundle without a Session)."""
    if not hasattr(servable.bundle, "session"):
        return 0
    return memory.model_footprint(servable).total


def _close_bundle(bundle: Any) -> None:
    session = getattr(bundle, "session", None)
    close = getattr(session, "close", None)
    if callable(close):
        close()
