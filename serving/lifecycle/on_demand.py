"""Loading on demand within a memory budget: the part of ``AspiredVersionsManager`` that
``--model_memory_budget_bytes`` turns on (``serving.lifecycle.memory_budget`` decides, this carries it out).

A mixin of the manager, on its tables and under its lock (``_cv``): with a budget, a model
joins ``_wanted`` on its first request (``pin`` -> ``_pin_on_demand``), the manager's
``_reconcile`` then loads its aspired versions once ``_make_room`` says they fit, and
``_evict`` unloads idle models, keeping them aspired and reported AVAILABLE (not resident).
"""

from __future__ import annotations

import logging

from runtime import errors
from serving.lifecycle import memory_budget
from serving.lifecycle.harness import HOLDING, NONE, Harness, now, request_text
from serving.lifecycle.policy import HarnessState
from serving.lifecycle.servable import ManagerState, Servable
from serving.observability import metrics

logger = logging.getLogger(__name__)


class OnDemandLoading:
    """The manager's methods for its memory budget (see the module docstring)."""

    def _mark_idle(self, table: dict[int, Harness]) -> None:
        """Reports a model's aspired versions that wait for a first request as AVAILABLE, not
        resident (so the initial wait, readiness and labels take them as servable)."""
        for h in table.values():
            if h.is_aspired and h.state is HarnessState.NEW and not h.idle:
                h.idle = True
                self._publish(h, ManagerState.AVAILABLE, resident=False)

    def _pin_on_demand(self, name: str, version: int | None, wait: float | None) -> Servable:
        """``pin`` of a model that is not resident: asks for its load and waits for it (under
        the manager's lock, woken by every state change and every 50 ms, when an idle model
        may have become evictable)."""
        end = now() + (memory_budget.WAIT_SECONDS if wait is None else max(0.0, wait))
        self._refresh_sizes()
        with self._cv:
            self._waiters[name] = self._waiters.get(name, 0) + 1
            try:
                while True:
                    table = self._available.get(name, NONE)
                    pinned = self._latest.get(name) if version is None else table.get(version)
                    if pinned is not None:  # (retired only under this lock: a pin here stays)
                        pinned.pins.append(None)
                        pinned.used = now()
                        return pinned
                    h = self._awaited(name, version)
                    if h is None or self._stopped:
                        raise errors.NotFoundError(
                            None, None, f"Servable not found for request: {request_text(name, version)}"
                        )
                    if h.state is HarnessState.ERROR and h.error is not None:
                        raise errors.error_for_code(h.error.code, h.error.message)
                    if name not in self._wanted:
                        logger.info("Loading model %s on its first request", name)
                        self._wanted[name] = None
                        if self._baseline is None and self._rss_fn is not None:
                            self._baseline = self._rss_fn()
                    self._reconcile()
                    left = end - now()
                    if left <= 0:
                        raise errors.DeadlineExceededError(
                            None, None, f"Timed out waiting for {request_text(name, version)} to load"
                        )
                    self._cv.wait(min(left, 0.05))
            finally:
                self._waiters[name] -= 1
                if not self._waiters[name]:
                    del self._waiters[name]

    def _awaited(self, name: str, version: int | None) -> Harness | None:
        """The aspired version a request waits for: ``version``, or the highest that has not
        failed (the highest failed one when all have); None if there is none."""
        table = self._harnesses.get(name, {})
        if version is not None:
            h = table.get(version)
            return h if h is not None and h.is_aspired else None
        aspired = sorted((v for v, h in table.items() if h.is_aspired), reverse=True)
        good = [v for v in aspired if table[v].state is not HarnessState.ERROR]
        return table[(good or aspired)[0]] if aspired else None

    def _refresh_sizes(self) -> None:
        """What each resident version holds now (it grows as onnxruntime compiles clusters on
        first use), measured outside the lock (``model_footprint`` is cached for seconds)."""
        sizes = {}
        for pinned in self.loaded():
            try:
                sizes[pinned.id] = self._size_fn(pinned)
            except Exception:  # noqa: BLE001 - the last figure stays
                logger.exception("Measuring servable version %s", pinned.id)
        with self._cv:
            for (name, version), size in sizes.items():
                h = self._harnesses.get(name, {}).get(version)
                if h is not None and h.state is HarnessState.READY:
                    h.size = size

    def _held(self, h: Harness) -> int:
        if h.size >= 0:
            return h.size
        if h.id.name in self._last_size:
            return self._last_size[h.id.name]
        h.size = self._estimate_fn(h.path)  # until it is measured once loaded
        return h.size

    def _residents(self) -> list[memory_budget.Resident]:
        residents = []
        for name, table in self._harnesses.items():
            holding = [h for h in table.values() if h.state in HOLDING]
            if not holding:
                continue
            ready = [h for h in holding if h.state is HarnessState.READY and h.pinned is not None]
            evictable = (
                name in self._wanted
                and not self._waiters.get(name)
                and len(ready) == len(holding)
                and not any(h.pinned.pins for h in ready)
            )
            last_used = max((h.pinned.used for h in ready), default=now())
            leaving = sum(self._held(h) for h in holding if h.state is HarnessState.UNLOADING)
            residents.append(
                memory_budget.Resident(
                    name, sum(self._held(h) for h in holding), last_used, evictable, leaving
                )
            )
        return residents

    def _make_room(self, h: Harness) -> bool:
        """Whether ``h`` may load now within the budget; evicts idle models for it if not."""
        residents = self._residents()
        room = memory_budget.plan_room(self._scaled_budget(residents), h.id.name, self._held(h), residents)
        for name in room.evict:
            self._evict(name)
        return room.load_now

    def _scaled_budget(self, residents: list[memory_budget.Resident]) -> int:
        """The budget in the units of the sizes measured (``memory_budget.scaled_budget``)."""
        if self._rss_fn is None or self._baseline is None:
            return self._budget
        return memory_budget.scaled_budget(self._budget, residents, self._rss_fn() - self._baseline)

    def _evict(self, name: str) -> None:
        """Unloads every loaded version of an idle model, keeping it aspired (its next request
        loads it again)."""
        logger.info("Evicting model %s to stay within %s", name, memory_budget.FLAG)
        self._wanted.pop(name, None)
        for h in self._harnesses.get(name, {}).values():
            if h.state is HarnessState.READY:
                metrics.model_evictions.labels(name).inc()
                h.evicted = h.idle = h.is_aspired
                self._start_unload(h)
