"""What a server observes about itself, assembled once per server.

- ``--monitoring_config_file`` (text ``MonitoringConfig``): with ``prometheus_config { enable:
  true }`` the Prometheus page (``serving.observability.metrics.page``) is served on the REST port at its
  ``path`` (default ``/monitoring/prometheus/metrics``), as TF Serving serves it (a path that
  is not it: 400 "Unexpected path"; no REST port: logged, nothing served).
- ``functions(entrypoint)``: the request functions each transport calls, wrapped once
  (``serving.inference.request_functions.instrument``) with the request metrics and the request log.
- The request log (``serving.observability.request_log``): ``--request_log_dir`` and each model's
  ``logging_config``, updated when the model config is reloaded.
- Model version states and load failures, from the manager's state events.
"""

from __future__ import annotations

import logging

from apis.tensorflow_serving.config import monitoring_config_pb2
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions, instrument
from serving.lifecycle import model_config
from serving.observability import metrics
from serving.observability.request_log import RequestLogger, model_logging
from serving.rest_api.routes import Reply

logger = logging.getLogger(__name__)


def read_monitoring_config(path: str) -> monitoring_config_pb2.MonitoringConfig:
    """The MonitoringConfig of ``--monitoring_config_file`` (empty when none is given)."""
    config = monitoring_config_pb2.MonitoringConfig()
    if path:
        model_config.read_text_proto_file(path, config)
    return config


class Monitoring:
    """A server's metrics page, instrumented request functions and request log."""

    def __init__(self, options, core) -> None:
        self._options, self._core = options, core
        self.config = read_monitoring_config(options.monitoring_config_file)
        self.request_logger = RequestLogger(options.request_log_max_bytes)
        core.add_state_listener(self._on_state)
        for name in core.model_names():  # versions that reached a state before this existed
            for state in core.manager.version_states(name).values():
                metrics.version_state(name, state.version, state.state.name)
        core.add_config_listener(self._update_logging)
        self._update_logging()

    def functions(self, entrypoint: str) -> RequestFunctions:
        return instrument(DEFAULT_FUNCTIONS, entrypoint, self.request_logger)

    def add_page(self, rest_server) -> None:
        """Serves the Prometheus page on ``rest_server`` where the config enables it."""
        prometheus = self.config.prometheus_config
        if not prometheus.enable:
            return
        if rest_server is None:
            logger.warning("Prometheus monitoring is enabled but --rest_api_port is not: no page is served")
            return
        path = prometheus.path or metrics.DEFAULT_PATH
        rest_server.add_route(
            "GET",
            path,
            lambda request: _page(request, path),
            public=not self._options.auth_metrics,  # (--auth_metrics=false: scrapers need no token)
        )
        logger.info("Prometheus metrics at %s on the REST port", path)

    def close(self) -> None:
        self.request_logger.close()

    def _update_logging(self) -> None:
        options, models = self._options, {}
        config = self._core.config
        for model in config.model_config_list.config:
            logging_config = model.logging_config if model.HasField("logging_config") else None
            found = model_logging(
                model.name, logging_config, options.request_log_dir, options.request_log_sampling_rate
            )
            if found is not None:
                models[model.name] = found
        self.request_logger.update(models)

    def _on_state(self, servable_id, state) -> None:
        metrics.version_state(servable_id.name, servable_id.version, state.name)


def _page(request, path: str) -> Reply:
    if request.path.partition("?")[0] != path:  # (only an exact path reaches here today)
        return Reply(
            400, f"Unexpected path: {request.path}. Should be {path}".encode(), content_type="text/plain"
        )
    return Reply(200, metrics.page(), content_type="text/plain")  # TF Serving's
