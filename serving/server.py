"""The ModelServer: builds ServerCore, opens the ports, serves until SIGTERM/SIGINT.

Order of events, as in TF Serving's ``Server::BuildAndStart``: check the options, read the
model config, load the initial models (blocking), then open ``--port`` (and
``--grpc_socket_path``) with PredictionService, ModelService, health and reflection, then
``--rest_api_port`` (``serving.rest_api.server``). So a client that can connect can be served. On SIGTERM
or SIGINT the server drains (``serving/resources/drain.py``): health and /readyz turn NOT_SERVING, the
lame duck on SIGTERM, refusal with UNAVAILABLE (503 over REST); then both servers stop and
every call received is answered (up to a grace period); exit status 0.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import threading
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from apis.tensorflow_serving.apis import model_service_pb2_grpc
from runtime import errors
from runtime.kernels.blas import set_blas_threads
from serving.grpc_api import handlers as grpc_handlers
from serving.grpc_api import open_inference
from serving.grpc_api import services as grpc_service
from serving.grpc_api.services import ModelServiceServicer
from serving.inference.bundles import blas_threads, session_config
from serving.inference.request_functions import DEFAULT_FUNCTIONS, RequestFunctions
from serving.inference.tflite import require_litert
from serving.lifecycle import model_config
from serving.lifecycle.health import ModelHealth
from serving.lifecycle.manager import status_string
from serving.lifecycle.policy import swap_policies
from serving.monitoring import Monitoring
from serving.observability import access_log, metrics, tracing
from serving.options import ServerOptions
from serving.resources import auth, request_bytes, tls
from serving.resources.drain import Drain, exit_process
from serving.rest_api.server import start_rest_server
from serving.server_core import ServerCore
from serving.worker_pool import WorkerPool

logger = logging.getLogger(__name__)

MAX_MESSAGE_SIZE = 2**31 - 1  # TF Serving: SetMaxMessageSize(INT32_MAX), both directions
SHUTDOWN_GRACE_SECONDS = 30.0
_INT32_RE = re.compile(r"\s*[+-]?\d+\s*")

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
MODEL_SERVICE = "tensorflow.serving.ModelService"
HEALTH_SERVICE = "grpc.health.v1.Health"


def parse_channel_arguments(text: str) -> list[tuple[str, int | str]]:
    """``"k=v,k2=v2"`` -> grpc options; a value that parses as int32 is passed as an int."""
    arguments: list[tuple[str, int | str]] = []
    for item in text.split(","):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            logger.warning("Ignoring gRPC channel argument without a value: %s", item)
            continue
        if _INT32_RE.fullmatch(value) and -(2**31) <= int(value) < 2**31:
            arguments.append((key, int(value)))
        else:
            arguments.append((key, value))
    return arguments


def server_options(options: ServerOptions) -> list[tuple[str, int | str]]:
    """gRPC server options: 2 GiB - 1 messages, then --grpc_channel_arguments (which win)."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_SIZE),
        ("grpc.max_receive_message_length", MAX_MESSAGE_SIZE),
        *parse_channel_arguments(options.grpc_channel_arguments),
    ]


def check_options(options: ServerOptions) -> None:
    """TF Serving's start-up checks, with its texts."""
    if options.port == 0 and not options.grpc_socket_path:
        raise errors.InvalidArgumentError(
            None,
            None,
            "At least one of server_options.grpc_port or server_options.grpc_socket_path must be set.",
        )
    if options.use_alts_credentials and options.ssl_config_file:
        raise errors.InvalidArgumentError(
            None, None, "Either use_alts_credentials must be false or ssl_config_file must be empty."
        )
    if not options.model_base_path and not options.model_config_file:
        raise errors.InvalidArgumentError(
            None, None, "Both server_options.model_base_path and server_options.model_config_file are empty!"
        )
    if not 0.0 <= options.access_log_sampling_rate <= 1.0:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"--access_log_sampling_rate must be in [0, 1], not {options.access_log_sampling_rate}",
        )
    if options.rest_api_ssl_config_file and options.rest_api_port:
        tls.read_ssl_config(options.rest_api_ssl_config_file, "rest_api_ssl_config_file")
    if options.batching_parameters_file and not options.enable_batching:
        raise errors.InvalidArgumentError(
            None,
            None,
            "server_options.batching_parameters_file is set without setting server_options.enable_batching to true.",
        )
    session_config(options)  # parallelism flags
    if options.prefer_tflite_model or options.use_tflite_model:
        require_litert()  # the tflite extra: one clear error at start-up, not one per version
    swap_policies(options.aspired_version_policy)
    if options.model_memory_budget_bytes < 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"--model_memory_budget_bytes must be 0 (none) or more, not {options.model_memory_budget_bytes}",
        )


def initial_config(options: ServerOptions):
    if options.model_config_file:
        return model_config.read_model_server_config(options.model_config_file)
    return model_config.build_single_model_config(options.model_name, options.model_base_path)


def credentials(options: ServerOptions) -> grpc.ServerCredentials | None:
    """None for an insecure port; ALTS or TLS (from an SSLConfig file) otherwise."""
    if options.use_alts_credentials:
        logger.info("Using ALTS credentials")
        return grpc.alts_server_credentials()
    if not options.ssl_config_file:
        logger.info("Using InsecureServerCredentials")
        return None
    config = tls.SslConfigFile(options.ssl_config_file, "ssl_config_file")
    logger.info("Using SSL credentials")

    def certificate(material: tls.TlsMaterial):
        return grpc.ssl_server_certificate_configuration(
            [(material.server_key, material.server_cert)], root_certificates=material.custom_ca
        )

    def fetch():  # at each handshake: a changed file's certificate, else None (keep the current)
        return certificate(config.material) if config.refresh() else None

    return grpc.dynamic_ssl_server_credentials(
        certificate(config.material), fetch, require_client_authentication=config.material.client_verify
    )


def grpc_pool(options: ServerOptions) -> WorkerPool:
    """The threads that run the server's calls: --grpc_max_threads of them."""
    return WorkerPool(max(1, options.grpc_max_threads), thread_name_prefix="grpc")


def build_server(
    options: ServerOptions,
    core: ServerCore,
    pool: WorkerPool | None = None,
    drain: Drain | None = None,
    functions: RequestFunctions = DEFAULT_FUNCTIONS,
) -> tuple[grpc.Server, ModelHealth]:
    """A started-ready (not yet started) grpc.Server with every service registered, its calls
    run by ``pool`` (by default a ``grpc_pool`` of its own); PredictionService calls
    ``functions``; PredictionService and ModelService refuse calls while ``drain`` refuses
    (health and reflection keep answering)."""
    server = grpc.server(pool or grpc_pool(options), options=server_options(options))
    # Every service through grpc_handlers: requests parsed in our handlers, never by grpc.
    grpc_service.add_to_server(core, server, drain, functions)
    model_service = ModelServiceServicer(core)
    grpc_handlers.add_service(
        server,
        lambda target: model_service_pb2_grpc.add_ModelServiceServicer_to_server(model_service, target),
        drain,
    )
    model_health = ModelHealth(core)
    grpc_handlers.add_service(
        server, lambda target: health_pb2_grpc.add_HealthServicer_to_server(model_health.servicer, target)
    )
    services = (PREDICTION_SERVICE, MODEL_SERVICE, HEALTH_SERVICE, reflection.SERVICE_NAME)
    if options.enable_open_inference_protocol:
        open_inference.add_to_server(core, server, model_health.readiness, drain, functions)
        services += (open_inference.SERVICE,)
    grpc_handlers.add_service(server, lambda target: reflection.enable_server_reflection(services, target))
    creds = credentials(options)
    addresses = []
    if options.port != 0:
        addresses.append(f"{options.grpc_bind_address}:{options.port}")
    if options.grpc_socket_path:
        addresses.append(f"unix:{options.grpc_socket_path}")
    for address in addresses:
        try:
            bound = server.add_secure_port(address, creds) if creds else server.add_insecure_port(address)
        except RuntimeError as e:
            raise errors.InvalidArgumentError(
                None, None, f"Failed to BuildAndStart gRPC server: {e}"
            ) from None
        if bound == 0:
            raise errors.InvalidArgumentError(None, None, "Failed to BuildAndStart gRPC server")
    return server, model_health


def log_models_served(core: ServerCore) -> None:
    """One line per model with the versions it serves: with the port lines above, what an
    operator reads in ``docker logs`` to see that a server serves what it should."""
    for name in sorted(core.model_names()):
        versions = sorted(core.manager.available_versions(name))
        shown = ", ".join(str(v) for v in versions) if versions else "none available yet"
        logger.info("Serving model %s version%s %s", name, "s" if len(versions) > 1 else "", shown)


class ConfigFilePoller:
    """Re-reads --model_config_file every N seconds and reloads it (TF Serving's poll thread)."""

    def __init__(self, core: ServerCore, path: str, wait_seconds: int):
        self._core, self._path, self._wait = core, path, wait_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="Server_fs_model_config_poll_thread", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._wait):
            try:
                config = model_config.read_model_server_config(self._path)
            except errors.OpError as e:
                logger.error("Failed to read ModelServerConfig file: %s", e.message)
                continue
            try:
                self._core.reload_config(config)
            except errors.OpError as e:
                logger.error("PollFilesystemAndReloadConfig failed to ReloadConfig: %s", e.message)
            except Exception:
                logger.exception("PollFilesystemAndReloadConfig failed")


def fail_to_start(error: errors.OpError) -> int:
    """TF Serving's failed start: the status on stdout, exit status 255."""
    sys.stdout.write(f"Failed to start server. Error: {status_string(error)}\n")
    sys.stdout.flush()
    return 255


def run_server(options: ServerOptions, on_serving: Callable[[], None] | None = None) -> int:
    """Runs the model server until SIGTERM/SIGINT; returns the process exit status.
    ``on_serving()`` is called once the ports are open and health says SERVING (a worker of
    ``--num_workers`` tells its supervisor so)."""
    stop = threading.Event()
    state: dict[str, object] = {}

    def on_signal(signum, frame):
        if stop.is_set() or "server" not in state:
            logger.info("Received signal %d; exiting now", signum)
            raise SystemExit(0)
        logger.info("Received signal %d; shutting down", signum)
        state["signal"] = signum
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _serve(options, stop, state, on_serving)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(options: ServerOptions, stop: threading.Event, state: dict, on_serving=None) -> int:
    try:
        check_options(options)
        access_log.configure(options.access_log, options.access_log_sampling_rate)
        auth.configure(options.auth_token_file)
        tracing.configure()
        set_blas_threads(blas_threads(options))
        config = initial_config(options)
        core = ServerCore(options)
        metrics.add_memory_source(core.memory_samples)
        core.reload_config(config)
        pool = grpc_pool(options)
        drain = Drain(request_bytes=request_bytes.from_flag(options.max_request_bytes_in_flight))
        monitoring = Monitoring(options, core)
        server, model_health = build_server(options, core, pool, drain, monitoring.functions("GRPC"))
    except errors.OpError as e:
        return fail_to_start(e)
    poller = None
    if options.model_config_file and options.model_config_file_poll_wait_seconds > 0:
        poller = ConfigFilePoller(
            core, options.model_config_file, options.model_config_file_poll_wait_seconds
        )
        poller.start()
    server.start()
    state["server"] = server
    # REST (--rest_api_port) starts before readiness turns on, so that a client that sees
    # SERVING can use either port; it shares the drain and the readiness with gRPC.
    rest_server = start_rest_server(
        options,
        core,
        model_health.readiness,
        options.grpc_bind_address,
        drain,
        reuse_port=on_serving is not None,  # a worker of --num_workers shares the port
        functions=monitoring.functions("REST"),
    )
    monitoring.add_page(rest_server)
    model_health.set_serving()
    if options.port != 0:
        logger.info("Running gRPC ModelServer at %s:%d ...", options.grpc_bind_address, options.port)
    if options.grpc_socket_path:
        logger.info("Running gRPC ModelServer at UNIX socket %s ...", options.grpc_socket_path)
    log_models_served(core)
    if on_serving is not None:
        on_serving()
    while not stop.wait(1.0):
        pass
    # SIGTERM (Kubernetes, docker stop) gets the lame duck; SIGINT (a terminal) stops at once.
    lame_duck = options.lame_duck_seconds if state.get("signal") == signal.SIGTERM else 0.0
    drain.run(model_health.shutdown, lame_duck, SHUTDOWN_GRACE_SECONDS)  # gRPC's calls answered
    if poller is not None:
        poller.stop()
    if rest_server is not None:  # REST answers what it received, then closes its connections
        rest_server.stop(SHUTDOWN_GRACE_SECONDS)
    if core.batching is not None:  # the calls admitted ran their batches: nothing is left queued
        core.batching.stop(SHUTDOWN_GRACE_SECONDS)
    core.stop()
    monitoring.close()
    tracing.shutdown()  # the spans still queued are exported
    logger.info("Server stopped")
    # Not grpcio's server.stop(): it would cancel the calls still arriving (serving/resources/drain.py).
    exit_process(0)
    return 0
