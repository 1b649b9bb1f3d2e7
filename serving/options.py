"""ServerOptions: every tensorflow_model_server flag, in one frozen value.

The field names are TF Serving's flag names (``main.cc``), the defaults are its defaults
(``server.h``'s ``Server::Options``). ``serving.cli`` is the only place that reads flags; every
other module receives these values as constructor arguments.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field


def schedulable_cpus() -> int:
    """TF's ``NumSchedulableCPUs``: the CPUs this process may run on (a container's or
    taskset's share), not all the machine has."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ServerOptions:
    """tensorflow_model_server's flags. Immutable; safe to share between threads."""

    # gRPC
    port: int = 8500
    grpc_socket_path: str = ""
    grpc_channel_arguments: str = ""
    grpc_max_threads: int = field(default_factory=lambda: 4 * schedulable_cpus())
    grpc_bind_address: str = "0.0.0.0"  # extension; TF Serving always uses 0.0.0.0
    # HTTP/REST
    rest_api_port: int = 0
    rest_api_num_threads: int = field(default_factory=lambda: 4 * schedulable_cpus())
    rest_api_timeout_in_ms: int = 30000
    rest_api_enable_cors_support: bool = False
    auth_token_file: str = ""  # extension: bearer tokens (serving/resources/auth.py)
    auth_metrics: bool = True
    access_log: str = ""  # extension: "stderr" or a path (serving/observability/access_log.py)
    access_log_sampling_rate: float = 1.0
    rest_api_cors_allowed_origins: str = ""  # extension: CORS for these origins only
    rest_api_ssl_config_file: str = ""  # extension: HTTPS on the REST port (an SSLConfig file)
    rest_api_max_body_bytes: int = 64 << 20  # extension: larger bodies are answered 413
    # extension: the bytes of large requests in flight (serving/resources/request_bytes.py); -1: a
    # sixteenth of the memory the process may use, 0: no limit
    max_request_bytes_in_flight: int = -1
    # extension: the Open Inference Protocol (KServe V2) on both ports
    enable_open_inference_protocol: bool = True
    # Models
    model_name: str = "default"
    model_base_path: str = ""
    model_config_file: str = ""
    model_config_file_poll_wait_seconds: int = 0
    file_system_poll_wait_seconds: int = 1
    flush_filesystem_caches: bool = True
    saved_model_tags: str = "serve"
    num_load_threads: int = 0
    num_unload_threads: int = 0
    max_num_load_retries: int = 5
    # extension: availability_preserving (TF Serving's) or resource_preserving, for every model
    # and then name=policy for some (serving/lifecycle/policy.py)
    aspired_version_policy: str = ""
    # extension: models load on first request and idle ones are evicted to stay within this
    # many bytes (serving/lifecycle/memory_budget.py); 0: every model loads at start-up
    model_memory_budget_bytes: int = 0
    load_retry_interval_micros: int = 60 * 1000 * 1000
    allow_version_labels_for_unavailable_models: bool = False
    # Batching
    enable_batching: bool = False
    enable_per_model_batching_parameters: bool = False
    batching_parameters_file: str = ""
    adaptive_batch_timeout: bool = False  # extension: each queue picks its batch timeout
    # Session
    tensorflow_session_parallelism: int = 0
    tensorflow_session_config_file: str = ""
    tensorflow_intra_op_parallelism: int = 0
    tensorflow_inter_op_parallelism: int = 0
    per_process_gpu_memory_fraction: float = 0.0
    platform_config_file: str = ""
    enable_model_warmup: bool = True
    num_request_iterations_for_warmup: int = 0
    remove_unused_fields_from_bundle_metagraph: bool = True
    enable_signature_method_name_check: bool = False
    enable_serialization_as_tensor_content: bool = False
    mixed_precision: str = ""
    thread_pool_factory_config_file: str = ""
    # Security, monitoring, misc
    use_alts_credentials: bool = False
    ssl_config_file: str = ""
    monitoring_config_file: str = ""
    enable_profiler: bool = True
    enable_grpc_healthcheck_service: bool = False
    prefer_tflite_model: bool = False
    use_tflite_model: bool = False
    num_tflite_pools: int = field(default_factory=schedulable_cpus)
    num_tflite_interpreters_per_pool: int = 1
    xla_cpu_compilation_enabled: bool = False
    xla_gpu_compilation_enabled: bool = False
    skip_initialize_tpu: bool = False
    onnx_delegation: bool = True  # extension: onnxruntime delegation (runtime/onnx); false turns it off
    onnx_cluster_cache_dir: str = ""  # extension: the cluster cache's directory (empty: none)
    remote_model_cache_dir: str = ""  # extension: where s3:// / gs:// versions are read to; "": a temp dir
    # Set by the CLI from TF's S3 variables (S3_ENDPOINT, S3_USE_HTTPS, S3_VERIFY_SSL), per URL
    # scheme: fsspec storage options. Never logged (they may hold endpoints of private stores).
    remote_storage_options: dict = field(default_factory=dict, repr=False)
    file_system_settle_seconds: float = (
        0.0  # extension: serving/lifecycle/source.py; 0 takes a version at once
    )
    request_log_dir: str = ""  # extension: serving/observability/request_log.py
    request_log_sampling_rate: float = 0.1
    request_log_max_bytes: int = 64 << 20
    lame_duck_seconds: float = (
        5.0  # extension: serving/resources/drain.py; Kubernetes' endpoint removal takes seconds
    )
    num_workers: int = 1  # extension: serving/supervisor.py; N processes share the ports
    version: bool = False

    def replace(self, **changes) -> ServerOptions:
        return dataclasses.replace(self, **changes)

    @property
    def saved_model_tag_set(self) -> frozenset[str]:
        """``--saved_model_tags`` split on commas, as TF Serving's ``str_util::Split``."""
        return frozenset(self.saved_model_tags.split(","))
