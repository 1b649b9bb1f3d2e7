"""``model_server``: tensorflow_model_server's command line.

Flags are parsed the way TensorFlow's ``tensorflow::Flags::Parse`` parses them, so that
TF Serving command lines start unchanged:

- ``--name=value`` for string, int and float flags; bools as ``--name``, ``--name=true`` or
  ``--name=false``. A value that does not parse prints the usage and exits 255 (TF's ``-1``).
- An argument that names no flag is left over: the server prints ``unknown argument: ...``
  and the usage, then starts anyway (TF Serving's ``main`` does exactly that).
- Also accepted, as extensions: ``--name value`` for non-bool flags,
  ``--grpc_bind_address`` (e.g. ``127.0.0.1``, for the gRPC and REST ports; TF Serving always
  listens on every address), ``--rest_api_max_body_bytes`` and the others marked "Extension".

This is the only module that reads flags or the process environment.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from serving import __version__, supervisor
from serving.options import ServerOptions
from serving.resources import heap

logger = logging.getLogger(__name__)

INT32, INT64, BOOL, STRING, FLOAT = "int32", "int64", "bool", "string", "float"


@dataclass(frozen=True)
class Flag:
    name: str
    type: str
    usage: str = ""


# In main.cc's order: the first flag whose name is a prefix of an argument claims it.
FLAGS: tuple[Flag, ...] = (
    Flag("port", INT32, "TCP port to listen on for gRPC/HTTP API. Disabled if port set to zero."),
    Flag("grpc_socket_path", STRING, "If non-empty, listen to a UNIX socket for gRPC API on the given path."),
    Flag(
        "rest_api_port",
        INT32,
        "Port to listen on for HTTP/REST API. If set to zero HTTP/REST API will not be exported. "
        "This port must be different than the one specified in --port.",
    ),
    Flag(
        "rest_api_num_threads",
        INT32,
        "Number of threads for HTTP/REST API processing. If not set, will be auto set based on number of CPUs.",
    ),
    Flag("rest_api_timeout_in_ms", INT32, "Timeout for HTTP/REST API calls."),
    Flag("rest_api_enable_cors_support", BOOL, "Enable CORS headers in response"),
    Flag(
        "auth_token_file",
        STRING,
        "A file of accepted bearer tokens, one per line, each optionally followed by the models it may "
        "call; checked on both ports (health and readiness probes exempt) and re-read when it changes.",
    ),
    Flag("auth_metrics", BOOL, "With --auth_token_file: the metrics page needs a token too (default true)."),
    Flag(
        "access_log",
        STRING,
        "Write one JSON line per request (both ports) to 'stderr' or to this file (appended); each "
        "answer carries the request's x-request-id (the caller's, or a new one).",
    ),
    Flag("access_log_sampling_rate", FLOAT, "The share of requests written to --access_log (0 to 1)."),
    Flag(
        "rest_api_cors_allowed_origins",
        STRING,
        "Comma-separated origins (scheme://host[:port]) allowed cross-origin calls: each answer to one "
        "of them carries the CORS headers with that origin, others none (a preflight from them is 403). "
        "Implies --rest_api_enable_cors_support, restricted to these origins.",
    ),
    Flag(
        "rest_api_ssl_config_file",
        STRING,
        "If non-empty, read an ascii SSLConfig protobuf (as --ssl_config_file) and serve HTTPS on "
        "--rest_api_port; with client_verify, clients must present a certificate signed by custom_ca. "
        "A changed file is picked up without a restart.",
    ),
    Flag("enable_batching", BOOL, "enable batching"),
    Flag(
        "allow_version_labels_for_unavailable_models",
        BOOL,
        "If true, allows assigning unused version labels to models that are not available yet.",
    ),
    Flag(
        "batching_parameters_file",
        STRING,
        "If non-empty, read an ascii BatchingParameters protobuf from the supplied file name and use "
        "the contained values instead of the defaults.",
    ),
    Flag(
        "enable_per_model_batching_parameters",
        BOOL,
        "Enables model specific batching params like batch sizes, timeouts, batching feature flags to "
        "be read from `batching_params.pbtxt` file present in SavedModel dir of the model. Only the "
        "threadpool (name and size) is taken from --batching_parameters_file.",
    ),
    Flag(
        "model_config_file", STRING, "If non-empty, read an ascii ModelServerConfig protobuf from this file."
    ),
    Flag(
        "model_config_file_poll_wait_seconds",
        INT32,
        "Interval in seconds between each poll of the filesystem for model_config_file. 0: no polling.",
    ),
    Flag("model_name", STRING, "name of model (ignored if --model_config_file flag is set)"),
    Flag("model_base_path", STRING, "path to export (ignored if --model_config_file flag is set)"),
    Flag("num_load_threads", INT32, "The number of threads used to load servables (0: one at a time)."),
    Flag("num_unload_threads", INT32, "The number of threads used to unload servables."),
    Flag("max_num_load_retries", INT32, "Maximum number of load retries after the first failure."),
    Flag("load_retry_interval_micros", INT64, "The interval, in microseconds, between each load retry."),
    Flag(
        "file_system_poll_wait_seconds",
        INT32,
        "Interval in seconds between each poll of the filesystem for new model versions.",
    ),
    Flag("flush_filesystem_caches", BOOL, "Accepted; nothing to flush here."),
    Flag("tensorflow_session_parallelism", INT64, "Number of threads to use for running a session."),
    Flag("tensorflow_session_config_file", STRING, "An ascii ConfigProto file (not active yet)."),
    Flag("tensorflow_intra_op_parallelism", INT64, "Threads to parallelize the execution of an op."),
    Flag("tensorflow_inter_op_parallelism", INT64, "Operators that can be executed simultaneously."),
    Flag("use_alts_credentials", BOOL, "Use Google ALTS credentials (not supported)."),
    Flag(
        "ssl_config_file",
        STRING,
        "If non-empty, read an ascii SSLConfig protobuf and serve over TLS. A changed file is picked "
        "up without a restart.",
    ),
    Flag("platform_config_file", STRING, "An ascii PlatformConfigMap file (not active yet)."),
    Flag("per_process_gpu_memory_fraction", FLOAT, "Accepted; there is no GPU memory to reserve."),
    Flag("saved_model_tags", STRING, "Comma-separated set of tags of the meta graph to load."),
    Flag(
        "grpc_channel_arguments",
        STRING,
        "Comma separated gRPC server arguments, e.g. grpc.max_connection_age_ms=2000",
    ),
    Flag("grpc_max_threads", INT32, "Max grpc server threads to handle grpc messages."),
    Flag(
        "enable_model_warmup",
        BOOL,
        "Enables model warmup, which triggers lazy initializations (such as TF optimizations) at load "
        "time, to reduce first request latency.",
    ),
    Flag("num_request_iterations_for_warmup", INT32, "Number of times a warmup request is replayed."),
    Flag("version", BOOL, "Display version"),
    Flag(
        "monitoring_config_file",
        STRING,
        "If non-empty, read an ascii MonitoringConfig protobuf from the supplied file name",
    ),
    Flag("remove_unused_fields_from_bundle_metagraph", BOOL, "Accepted."),
    Flag(
        "prefer_tflite_model",
        BOOL,
        "Prefer TensorFlow Lite model from `model.tflite` file in SavedModel directory, instead of the "
        "TensorFlow model from `saved_model.pb` file. If no TensorFlow Lite model found, fallback to "
        "TensorFlow model. Runs on LiteRT: pip install 'savedmodel-server[tflite]'.",
    ),
    Flag(
        "num_tflite_pools",
        INT32,
        "Number of TFLite interpreters in the interpreter pool of each TF Lite model version (at "
        "least 1). If not set, will be auto set based on number of CPUs.",
    ),
    Flag(
        "num_tflite_interpreters_per_pool",
        INT32,
        "Above 1, each TF Lite model version batches concurrent requests itself, as TF Serving does: "
        "one batch thread per interpreter, batches of up to ceil(500 / this) rows (or the model's "
        "fixed batch size). If not set, will be 1.",
    ),
    Flag("enable_signature_method_name_check", BOOL, "Enable method_name check for SignatureDef."),
    Flag("xla_cpu_compilation_enabled", BOOL, "Accepted; there is no XLA here."),
    Flag("xla_gpu_compilation_enabled", BOOL, "Accepted; there is no XLA here."),
    Flag("enable_profiler", BOOL, "Profiler service (not active yet)."),
    Flag("thread_pool_factory_config_file", STRING, "A ThreadPoolConfig file (not active yet)."),
    Flag("mixed_precision", STRING, "specify mixed_precision mode (not active yet)"),
    Flag("skip_initialize_tpu", BOOL, "Accepted; there is no TPU here."),
    Flag("enable_grpc_healthcheck_service", BOOL, "The gRPC health service is always on here."),
    Flag("enable_serialization_as_tensor_content", BOOL, "Serialize predict responses as tensor_content."),
    Flag("use_tflite_model", BOOL, "Older name of --prefer_tflite_model."),
    # Ours, not TF Serving's: TF Serving always listens on 0.0.0.0.
    Flag(
        "grpc_bind_address",
        STRING,
        "Extension: the address --port and --rest_api_port listen on (default 0.0.0.0).",
    ),
    Flag(
        "rest_api_max_body_bytes",
        INT64,
        "Extension: the largest HTTP/REST request body accepted (after gzip); larger ones are answered 413.",
    ),
    Flag(
        "aspired_version_policy",
        STRING,
        "Extension: how a model moves to a new version. availability_preserving (default, TF "
        "Serving's): load the new version, then unload the old (twice the memory for a moment). "
        "resource_preserving: unload, then load (half the peak; no version available between). "
        "A policy for every model, then model=policy for some: "
        "availability_preserving,big_model=resource_preserving.",
    ),
    Flag(
        "enable_open_inference_protocol",
        BOOL,
        "Extension: serve the Open Inference Protocol (KServe V2) beside TF Serving's API: "
        "/v2 on --rest_api_port and inference.GRPCInferenceService on --port (default true).",
    ),
    Flag(
        "model_memory_budget_bytes",
        INT64,
        "Extension: the bytes the models of this server (of each worker of --num_workers) may "
        "hold. With it, a model is loaded on its first request (which waits for the load, within "
        "its deadline) and the least recently used idle models are unloaded to make room; "
        "GetModelStatus reports those AVAILABLE with the status message 'Not resident'. "
        "0 (default): every model is loaded at start-up, as TF Serving does.",
    ),
    Flag(
        "max_request_bytes_in_flight",
        INT64,
        "Extension: the bytes of large requests (64 KiB or more; a JSON body counts 8 times its "
        "size) being answered at once, over gRPC and REST; a request that finds no room within 1 s "
        "is answered RESOURCE_EXHAUSTED (HTTP 429). -1 (default): a sixteenth of the memory the "
        "process may use, between 256 MiB and 4 GiB; 0: no limit.",
    ),
    Flag(
        "adaptive_batch_timeout",
        BOOL,
        "Extension: with --enable_batching, each batching queue picks its batch timeout from the "
        "arrival rate and batch run time it measures, up to batch_timeout_micros (10 ms when 0).",
    ),
    Flag(
        "onnx_delegation",
        BOOL,
        "Extension: run op clusters that map to ONNX in onnxruntime, validated against the numpy "
        "kernels on first run (default true; false runs every op on the numpy kernels).",
    ),
    Flag(
        "onnx_cluster_cache_dir",
        STRING,
        "Extension: a directory keeping each model's delegated graph and converted, validated "
        "clusters, keyed by its fingerprint, so a restart or another replica sharing it skips "
        "converting and validating (default: none).",
    ),
    Flag(
        "remote_model_cache_dir",
        STRING,
        "Extension: where versions of models on object storage (s3://, gs://) are read to before "
        "loading; kept across restarts (default: a temporary directory removed at exit).",
    ),
    Flag(
        "file_system_settle_seconds",
        FLOAT,
        "Extension: a new version directory is only loaded once nothing in it has changed for this "
        "many seconds (default 0: at once; a half-copied version fails to load and is retried).",
    ),
    Flag(
        "request_log_dir",
        STRING,
        "Extension: log sampled requests of every model as PredictionLog TFRecords under this "
        "directory (<dir>/<model>.NNNNN.tfrecord; each file is a valid warmup file). Empty: off.",
    ),
    Flag(
        "request_log_sampling_rate",
        FLOAT,
        "Extension: the fraction of requests --request_log_dir logs (a model's logging_config wins).",
    ),
    Flag(
        "request_log_max_bytes",
        INT64,
        "Extension: a request log file is closed at this size (or at 1000 records).",
    ),
    Flag(
        "lame_duck_seconds",
        FLOAT,
        "Extension: on SIGTERM, health reports NOT_SERVING and requests are still answered for this "
        "many seconds before the server stops accepting them (default 5; SIGINT: none).",
    ),
    Flag(
        "num_workers",
        INT32,
        "Extension: run this many server processes sharing --port and --rest_api_port "
        "(SO_REUSEPORT) under one supervisor that restarts them and drains them on SIGTERM "
        "(default 1: this process serves). One per core uses every core.",
    ),
)

_INT_RE = re.compile(r"\s*[+-]?\d+")
_RANGES = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}

# Flags whose capability is not built yet: logged when set to anything but the default.
_NOT_ACTIVE = (
    "platform_config_file",
    "tensorflow_session_config_file",
    "thread_pool_factory_config_file",
    "mixed_precision",
    "use_alts_credentials",
)


class FlagParseError(Exception):
    """A flag's value did not parse (TF: ``Couldn't interpret value ... for flag ...``)."""


def _convert(flag: Flag, text: str):
    if flag.type == STRING:
        return text
    if flag.type in (INT32, INT64):
        # sscanf("%d%c"): leading spaces and a sign are fine, anything after the digits is not.
        if not _INT_RE.fullmatch(text):
            raise FlagParseError(f"Couldn't interpret value {text} for flag {flag.name}.")
        value = int(text)
        low, high = _RANGES[flag.type]
        if not low <= value <= high:
            raise FlagParseError(f"Couldn't interpret value {text} for flag {flag.name}.")
        return value
    if flag.type == FLOAT:
        try:
            if "_" in text:
                raise ValueError(text)
            return float(text)
        except ValueError:
            raise FlagParseError(f"Couldn't interpret value {text} for flag {flag.name}.") from None
    raise AssertionError(flag.type)


def _match(flag: Flag, arg: str) -> tuple[bool, object]:
    """(claimed, value) for one argument, mirroring TF's per-type ``Parse*Flag``."""
    prefix = "--" + flag.name
    if not arg.startswith(prefix):
        return False, None
    rest = arg[len(prefix) :]
    if flag.type == BOOL:
        if rest in ("", "=true"):
            return True, True
        if rest == "=false":
            return True, False
        raise FlagParseError(f"Couldn't interpret value {rest} for flag {flag.name}.")
    if not rest.startswith("="):
        return False, None
    return True, _convert(flag, rest[1:])


def parse_flags(argv: list[str]) -> tuple[ServerOptions, list[str]]:
    """Parses ``argv`` (without the program name) into options and the arguments left over.

    Raises FlagParseError after looking at every argument, as TF does.
    """
    values: dict[str, object] = {}
    unknown: list[str] = []
    errors: list[str] = []
    by_name = {flag.name: flag for flag in FLAGS}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            unknown += argv[i - 1 :]
            break
        # Extension: "--name value" for flags that take a value.
        spaced = by_name.get(arg[2:]) if arg.startswith("--") else None
        if spaced is not None and spaced.type != BOOL and i < len(argv):
            try:
                values[spaced.name] = _convert(spaced, argv[i])
            except FlagParseError as e:
                errors.append(str(e))
            i += 1
            continue
        for flag in FLAGS:
            try:
                claimed, value = _match(flag, arg)
            except FlagParseError as e:
                errors.append(str(e))
                break
            if claimed:
                values[flag.name] = value
                break
        else:
            unknown.append(arg)
    if errors:
        raise FlagParseError("\n".join(errors))
    if unknown and unknown[0] == "--help":
        raise FlagParseError("")
    return ServerOptions(**values), unknown


def usage(program: str) -> str:
    defaults = ServerOptions()
    lines = [f"usage: {program}", "Flags:"]
    for flag in FLAGS:
        default = getattr(defaults, flag.name)
        if flag.type == BOOL:
            shown = f"--{flag.name}={'true' if default else 'false'}"
        elif flag.type == STRING:
            shown = f'--{flag.name}="{default}"'
        elif flag.type == FLOAT:
            shown = f"--{flag.name}={default:f}"
        else:
            shown = f"--{flag.name}={default}"
        lines.append(f"\t{shown:<33}\t{flag.type}\t{flag.usage}")
    return "\n".join(lines) + "\n"


def version_text() -> str:
    return (
        f"TensorFlow ModelServer: {__version__}-savedmodel-server\n"
        "TensorFlow Library: none (SavedModels run without TensorFlow)\n"
    )


def _log_inactive_flags(options: ServerOptions) -> None:
    defaults = ServerOptions()
    for name in _NOT_ACTIVE:
        value = getattr(options, name)
        if value != getattr(defaults, name):
            shown = str(value).lower() if isinstance(value, bool) else value
            logger.warning("--%s=%s accepted; this capability is not active yet.", name, shown)


def configure_logging() -> None:
    # TF's own knob: TF_CPP_MIN_LOG_LEVEL=0 (INFO, default), 1 (WARNING), 2 (ERROR), 3 (FATAL).
    levels = {"0": logging.INFO, "1": logging.WARNING, "2": logging.ERROR, "3": logging.CRITICAL}
    worker = os.environ.get(supervisor.WORKER_ENV)  # a worker of --num_workers says which
    tag = f"worker {worker} pid %(process)d: " if worker else ""
    logging.basicConfig(
        level=levels.get(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"), logging.INFO),
        stream=sys.stderr,
        format=f"%(asctime)s.%(msecs)03d: %(levelname).1s %(name)s] {tag}%(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``model_server`` and ``python -m serving``; returns the exit status."""
    program = sys.argv[0] if sys.argv and sys.argv[0] else "model_server"
    if program.endswith("__main__.py"):
        program = "python -m serving"
    argv = sys.argv[1:] if argv is None else argv
    heap.limit_arenas()
    configure_logging()
    try:
        options, unknown = parse_flags(argv)
    except FlagParseError as e:
        if str(e):
            logger.error("%s", e)
        sys.stdout.write(usage(program))
        sys.stdout.flush()
        return 255
    if options.version:
        sys.stdout.write(version_text())
        sys.stdout.flush()
        return 0
    if unknown:
        sys.stdout.write(f"unknown argument: {unknown[0]}\n{usage(program)}")
        sys.stdout.flush()
        logger.warning("Ignoring unknown arguments: %s", " ".join(unknown))
    _log_inactive_flags(options)
    options = options.replace(remote_storage_options=storage_options(os.environ))
    if options.num_workers != 1:
        return supervisor.run_supervisor(options, supervisor.worker_args(argv, unknown), dict(os.environ))

    from serving.server import run_server  # grpc is imported only when a server runs

    return run_server(options, on_serving=_worker_role())


def _worker_role() -> Callable[[], None] | None:
    """In a worker of ``--num_workers`` (its environment says so): follow the supervisor out
    when it dies, and return the call that tells it this worker is serving. None otherwise."""
    if not os.environ.get(supervisor.WORKER_ENV):
        return None
    supervisor.die_with_parent(int(os.environ[supervisor.PARENT_PID_ENV]))
    ready_fd = int(os.environ.pop(supervisor.READY_FD_ENV))

    def serving() -> None:
        os.write(ready_fd, b"serving")
        os.close(ready_fd)

    return serving


def storage_options(environ) -> dict:
    """fsspec options, per URL scheme, from TensorFlow's S3 variables: ``S3_ENDPOINT`` (host[:port]
    or a URL), ``S3_USE_HTTPS``, ``S3_VERIFY_SSL`` (TF's default for both: 1). botocore reads
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` and ``AWS_ENDPOINT_URL``
    itself, and the latter wins over ``S3_ENDPOINT``."""
    endpoint = environ.get("S3_ENDPOINT", "")
    if not endpoint or environ.get("AWS_ENDPOINT_URL"):
        return {}
    if "://" not in endpoint:
        scheme = "http" if environ.get("S3_USE_HTTPS", "1") == "0" else "https"
        endpoint = f"{scheme}://{endpoint}"
    options: dict = {"endpoint_url": endpoint}
    if environ.get("S3_VERIFY_SSL", "1") == "0":
        options["client_kwargs"] = {"verify": False}
    return {"s3": options, "s3a": options}
