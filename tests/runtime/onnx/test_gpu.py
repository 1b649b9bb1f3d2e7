"""The GPU path: with onnxruntime-gpu and a visible GPU, clusters run on the CUDA execution
provider; without one they run on the CPU provider, and this test says so (it never skips)."""

from __future__ import annotations

import dataclasses

import numpy as np

from runtime import Session
from runtime.onnx import DelegationOptions, gpu_available, runner_of
from tests.runtime.onnx.test_partition import mlp


def _first_cluster_providers(options: DelegationOptions) -> tuple[list[str], np.ndarray]:
    session = Session(graph=mlp())
    session.delegate(dataclasses.replace(options, min_cluster_ops=1))
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    result = session.run("tanh:0", {"x:0": x})
    with Session(graph=mlp()) as native:
        np.testing.assert_allclose(result, native.run("tanh:0", {"x:0": x}), rtol=1e-5, atol=1e-6)
    runner = runner_of(session.graph.get_operation_by_name("ort_cluster_0"))
    assert not session.delegation_report.fallbacks, session.delegation_report.summary()
    return runner.providers, result


def test_cuda_provider_where_a_gpu_is_present(capsys):
    providers, _ = _first_cluster_providers(DelegationOptions(log_device_placement=True))
    if gpu_available():
        assert providers[0] == "CUDAExecutionProvider", providers
        message = "GPU present: clusters ran on the CUDA execution provider"
    else:
        assert providers == ["CPUExecutionProvider"], providers
        message = "no GPU: CPU provider used (onnxruntime-gpu and a visible GPU would enable CUDA)"
    with capsys.disabled():
        print(f"\n[onnx GPU path] {message}")


def test_use_gpu_false_and_cpu_pinned_clusters_stay_on_the_cpu():
    providers, _ = _first_cluster_providers(DelegationOptions(use_gpu=False))
    assert providers == ["CPUExecutionProvider"]
