"""grpc.health.v1.Health for this server: what Kubernetes probes and grpcurl ask.

- ``""`` (the whole server): SERVING once the initial models are loaded (the port only opens
  then anyway); NOT_SERVING from the moment shutdown starts.
- ``tensorflow.serving.PredictionService`` / ``tensorflow.serving.ModelService`` and TF
  Serving's short names ``PredictionService`` / ``ModelService``: as the whole server.
- each model name: SERVING while at least one of its versions is available, NOT_SERVING
  otherwise; unknown names answer NOT_FOUND, as the standard service does.

Updated from the manager's state events; thread-safe.
"""

from __future__ import annotations

from grpc_health.v1 import health, health_pb2

from serving.servable import ManagerState, ServableId

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

SERVICE_NAMES = (
    "",
    "tensorflow.serving.PredictionService",
    "tensorflow.serving.ModelService",
    "PredictionService",
    "ModelService",
)


class ModelHealth:
    """Keeps a ``grpc_health`` HealthServicer in step with a ServerCore."""

    def __init__(self, core) -> None:
        self._core = core
        self.servicer = health.HealthServicer()
        for name in SERVICE_NAMES:
            self.servicer.set(name, NOT_SERVING)
        core.add_state_listener(self._on_state)
        for name in core.model_names():  # models loaded before this reporter existed
            self._update(name)

    def _on_state(self, servable_id: ServableId, state: ManagerState) -> None:
        if state in (ManagerState.AVAILABLE, ManagerState.UNLOADING, ManagerState.END):
            self._update(servable_id.name)

    def _update(self, name: str) -> None:
        self.servicer.set(name, SERVING if self._core.has_available_version(name) else NOT_SERVING)

    def set_serving(self) -> None:
        for name in SERVICE_NAMES:
            self.servicer.set(name, SERVING)

    def shutdown(self) -> None:
        """Every name reports NOT_SERVING from now on (and Watch streams are told)."""
        self.servicer.enter_graceful_shutdown()
