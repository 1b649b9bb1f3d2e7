"""``DelegationOptions``: one frozen options object -> onnxruntime ``SessionOptions`` and providers.

Threads follow the TF Session's ``ConfigProto`` (``intra_op_parallelism_threads`` /
``inter_op_parallelism_threads``, which TF Serving's ``--tensorflow_intra_op_parallelism`` /
``--tensorflow_inter_op_parallelism`` set) unless given here. The CUDA execution provider is used
when onnxruntime-gpu is installed and a GPU is visible. Ops pinned to a CPU (``tf.device``) then
form clusters of their own (``partition.propose_clusters``' ``split_cpu_pinned``), which stay on
the CPU provider, as TF's placer keeps them on the CPU; ops pinned to a GPU that is not there run
on the CPU (TF's soft placement). Without a GPU everything runs on the CPU, and pins split
nothing; placement is logged with ``log_device_placement``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import platform
from dataclasses import dataclass

import onnxruntime as ort

from runtime.graph.device import pinned_to_cpu

logger = logging.getLogger(__name__)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@dataclass(frozen=True)
class DelegationOptions:
    """How a Session delegates to onnxruntime. ``enabled=False`` keeps every op native."""

    enabled: bool = True
    intra_op_threads: int | None = None  # None: the Session's ConfigProto, else onnxruntime's default
    inter_op_threads: int | None = None
    graph_optimization_level: str = "all"  # disable | basic | extended | all
    enable_mem_arena: bool = True
    allow_spinning: bool = False  # spinning pools steal cores from concurrent requests
    small_cluster_flops: float = 2e6  # below this (at batch 1), a cluster runs on one thread
    small_kernel_flops: float = 1e5  # ... as does one whose matmuls and convolutions average below this
    use_gpu: bool = True  # the CUDA provider where onnxruntime-gpu and a GPU are present
    log_device_placement: bool = False
    validate: bool = True  # compare each cluster's first run with the native kernels
    rtol: float = 1e-4
    atol: float = 1e-5
    freeze_variables: bool = True  # variable reads become initializers when nothing writes them
    min_cluster_ops: int = 6  # smaller clusters stay native: a call costs ~ a few interpreter steps
    heavy_cluster_flops: float = 1e5  # ... unless a matmul/conv makes it this big at batch 1
    align_channels: bool = True  # convolutions' widths padded to the NCHWc block (channel_blocks.py)

    def __post_init__(self):
        if self.graph_optimization_level not in _LEVELS:
            raise ValueError(
                f"graph_optimization_level {self.graph_optimization_level!r}: one of {sorted(_LEVELS)}"
            )

    def with_config(self, config) -> DelegationOptions:
        """These options with unset thread counts taken from a TF ``ConfigProto``."""
        changes = {}
        if self.intra_op_threads is None and config is not None and config.intra_op_parallelism_threads:
            changes["intra_op_threads"] = config.intra_op_parallelism_threads
        if self.inter_op_threads is None and config is not None and config.inter_op_parallelism_threads:
            changes["inter_op_threads"] = config.inter_op_parallelism_threads
        if config is not None and config.log_device_placement:
            changes["log_device_placement"] = True
        return dataclasses.replace(self, **changes) if changes else self


def session_options(
    options: DelegationOptions, flops: float | None = None, heavy_ops: int = 0
) -> ort.SessionOptions:
    """onnxruntime's options for one cluster; its ``flops`` and the number of its matmuls and
    convolutions (``heavy_ops``), estimated at batch 1, size its threads (``single_threaded``)."""
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if options.intra_op_threads:
        so.intra_op_num_threads = options.intra_op_threads
    elif single_threaded(options, flops, heavy_ops):
        so.intra_op_num_threads = 1
    if options.inter_op_threads:
        so.inter_op_num_threads = options.inter_op_threads
    so.graph_optimization_level = _LEVELS[options.graph_optimization_level]
    so.enable_cpu_mem_arena = options.enable_mem_arena
    so.log_severity_level = 4  # its warnings and run errors reach our report and log instead
    if not options.allow_spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return so


def single_threaded(options: DelegationOptions, flops: float | None, heavy_ops: int = 0) -> bool:
    """Whether a cluster's work at batch 1 is too small to pay for a thread pool's hand-offs, with
    spinning off a wake-up per parallel kernel: in all (``small_cluster_flops``), or per matmul
    and convolution (``small_kernel_flops``: NASNetMobile's 357 average 65 kFLOPs, a few µs each).
    One thread then also leaves the other cores to concurrent requests."""
    if flops is None:
        return False
    return flops < options.small_cluster_flops or (
        heavy_ops > 0 and flops / heavy_ops < options.small_kernel_flops
    )


def channel_block(options: DelegationOptions, providers: list[str]) -> int:
    """The NCHWc block convolutions' widths are padded to on these providers: onnxruntime's CPU
    block (``cpu_channel_block``) where ``ORT_ENABLE_ALL`` lets it run its blocked kernels, else
    0 (none: padding would only add work)."""
    if not options.align_channels or options.graph_optimization_level != "all" or providers != [CPU]:
        return 0
    return cpu_channel_block()


@functools.cache
def cpu_channel_block() -> int:
    """onnxruntime's NCHWc block on this CPU (``nchwc_block``)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:  # (not Linux: the x86-64 baseline)
        flags = []
    return nchwc_block(platform.machine(), flags)


def nchwc_block(machine: str, cpu_flags: list[str]) -> int:
    """onnxruntime's NCHWc block as its MLAS library picks it: 16 channels with AVX-512, 8 on
    any other x86-64; 0 elsewhere (no blocked kernels)."""
    if machine.lower() not in ("x86_64", "amd64"):
        return 0
    return 16 if "avx512f" in cpu_flags else 8


@functools.cache
def gpu_available() -> bool:
    """Whether onnxruntime has the CUDA provider and a GPU it can use (tried once, on a tiny model)."""
    if CUDA not in ort.get_available_providers():
        return False
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=[CUDA, CPU])
    except Exception:  # noqa: BLE001 - no usable GPU is an answer, not an error
        return False
    return CUDA in session.get_providers()


def uses_gpu(options: DelegationOptions) -> bool:
    """Whether clusters may run on the CUDA provider (then none mixes CPU-pinned ops with others)."""
    return options.use_gpu and gpu_available()


def providers(options: DelegationOptions, device: str = "") -> list[str]:
    """Execution providers for a cluster placed on ``device`` (its members' common tf.device)."""
    chosen = [CUDA, CPU] if uses_gpu(options) and not pinned_to_cpu(device) else [CPU]
    if options.log_device_placement:
        logger.info("onnxruntime cluster on %s (tf.device %r)", chosen[0], device or "unset")
    return chosen
