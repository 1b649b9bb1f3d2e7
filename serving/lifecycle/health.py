"""Whether this server should get traffic: ``Readiness``, read by gRPC health and REST's /readyz.

``Readiness`` is the one answer: ready while the server is serving (from the end of the initial
load until shutdown, or a lame-duck phase, calls ``set_not_serving``) and every model of the
current config has an available version. gRPC health (``ModelHealth``) and ``GET /readyz``
(``serving.rest_api.server``) both read it, so a load balancer and a Kubernetes probe never disagree.

grpc.health.v1.Health, as ``ModelHealth`` keeps it (what Kubernetes probes and grpcurl ask):

- ``""`` (the whole server), ``tensorflow.serving.PredictionService`` /
  ``tensorflow.serving.ModelService`` and TF Serving's short names ``PredictionService`` /
  ``ModelService``: SERVING while ``Readiness`` says ready, NOT_SERVING otherwise, and for good
  from the moment shutdown starts.
- each model name: SERVING while at least one of its versions is available, NOT_SERVING
  otherwise; unknown names answer NOT_FOUND, as the standard service does.

Updated from the manager's state events; thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from grpc_health.v1 import health, health_pb2

from serving.lifecycle.servable import ManagerState, ServableId

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

SERVICE_NAMES = (
    "",
    "tensorflow.serving.PredictionService",
    "tensorflow.serving.ModelService",
    "PredictionService",
    "ModelService",
)


class Readiness:
    """Ready = serving and every configured model has an available version. ``reason()`` says
    why not (None when ready). Listeners (``add_listener``) are called, without arguments, after
    anything that may change the answer: serving turned on or off, a version's state changed,
    a config reloaded.
    Thread-safe; listeners run on the thread that made the change."""

    def __init__(self, core) -> None:
        self._core = core
        self._serving = False
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        core.add_state_listener(self._on_state)
        core.add_config_listener(self._notify)

    def add_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def set_serving(self) -> None:
        """The initial models are loaded and the ports are open."""
        self._set(True)

    def set_not_serving(self) -> None:
        """Take no more traffic (shutdown, lame duck): requests still in flight are answered."""
        self._set(False)

    @property
    def serving(self) -> bool:
        return self._serving

    def reason(self) -> str | None:
        """Why this server is not ready; None when it is."""
        if not self._serving:
            return "The server is not serving (starting or shutting down)."
        missing = [n for n in self._core.configured_model_names() if not self._core.has_available_version(n)]
        if missing:
            return "No version of these models is available: " + ", ".join(missing)
        return None

    def ready(self) -> bool:
        return self.reason() is None

    def _set(self, serving: bool) -> None:
        self._serving = serving
        self._notify()

    def _on_state(self, servable_id: ServableId, state: ManagerState) -> None:
        if state in (ManagerState.AVAILABLE, ManagerState.UNLOADING, ManagerState.END):
            self._notify()

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()


class ModelHealth:
    """Keeps a ``grpc_health`` HealthServicer in step with a ServerCore and its ``Readiness``
    (its own unless one is given: ``readiness``)."""

    def __init__(self, core, readiness: Readiness | None = None) -> None:
        self._core = core
        self.readiness = readiness or Readiness(core)
        self.servicer = health.HealthServicer()
        for name in SERVICE_NAMES:
            self.servicer.set(name, NOT_SERVING)
        core.add_state_listener(self._on_state)
        self.readiness.add_listener(self._update_server)
        for name in core.model_names():  # models loaded before this reporter existed
            self._update(name)

    def _on_state(self, servable_id: ServableId, state: ManagerState) -> None:
        if state in (ManagerState.AVAILABLE, ManagerState.UNLOADING, ManagerState.END):
            self._update(servable_id.name)

    def _update(self, name: str) -> None:
        self.servicer.set(name, SERVING if self._core.has_available_version(name) else NOT_SERVING)

    def _update_server(self) -> None:
        status = SERVING if self.readiness.ready() else NOT_SERVING
        for name in SERVICE_NAMES:
            self.servicer.set(name, status)

    def set_serving(self) -> None:
        self.readiness.set_serving()

    def shutdown(self) -> None:
        """Every name reports NOT_SERVING from now on (and Watch streams are told)."""
        self.readiness.set_not_serving()
        self.servicer.enter_graceful_shutdown()
