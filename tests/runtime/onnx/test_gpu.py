"""The GPU path: with onnxruntime-gpu and a visible GPU, clusters run on the CUDA execution
provider; without one they run on the CPU provider, and this test says so (it never skips).

Placement is also checked where no GPU is: with ``gpu_available`` made true, each cluster asks
onnxruntime for the providers it would get (recorded, then given the CPU provider), so the
decisions a GPU machine makes (tf.device pins honoured, clusters split by them, placement
logged) run on every machine."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import onnxruntime as ort
import pytest

from runtime import Session
from runtime.onnx import DelegationOptions, delegate, gpu_available, runner_of
from runtime.onnx import options as options_lib
from tests.runtime.onnx.test_partition import F, const, graph, mlp, node


def _first_cluster_providers(options: DelegationOptions) -> tuple[list[str], np.ndarray]:
    session = Session(graph=mlp())
    delegate(session, dataclasses.replace(options, min_cluster_ops=1))
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


def _placed(pins: bool = True):
    """y = exp(sigmoid(tanh(relu(x W)))) with tanh and sigmoid pinned to the CPU (two spellings),
    the MatMul and the Exp to a GPU, the Relu unpinned (``pins``; else nothing pinned)."""
    nodes = [
        node("x", "Placeholder", dtype=F),
        const("w", np.eye(3) * 2),
        node("mm", "MatMul", "x", "w", T=F),
        node("relu", "Relu", "mm", T=F),
        node("tanh", "Tanh", "relu", T=F),
        node("sigmoid", "Sigmoid", "tanh", T=F),
        node("y", "Exp", "sigmoid", T=F),
    ]
    devices = {
        "mm": "/job:localhost/replica:0/task:0/device:GPU:0",
        "tanh": "/device:CPU:0",
        "sigmoid": "/cpu:0",
        "y": "/device:GPU:0",
    }
    for n in nodes:
        n.device = devices.get(n.name, "") if pins else ""
    return graph(*nodes)


def _run_placed(
    monkeypatch, caplog, gpu: bool, use_gpu: bool = True, pins: bool = True
) -> tuple[Session, list[tuple[str, list[str]]]]:
    """The placed graph delegated and run as if a GPU were there (or not); each cluster's
    (tf.device, the providers it asked for). Each session runs on the CPU provider but says it
    has what it asked for, so a "CUDA" cluster takes the CUDA path of ours (onnxruntime's Python
    ``run``, which retries a failed GPU run on the CPU), run after run, with no fallback."""
    monkeypatch.setattr(options_lib, "gpu_available", lambda: gpu)
    asked = []

    class AsIfPlaced(ort.InferenceSession):
        def __init__(self, model, sess_options=None, providers=None, **kwargs):
            super().__init__(model, sess_options, providers=["CPUExecutionProvider"], **kwargs)
            self.asked = list(providers)
            asked.append(self.asked)

        def get_providers(self):
            return self.asked

    monkeypatch.setattr(ort, "InferenceSession", AsIfPlaced)
    session = Session(graph=_placed(pins))
    options = DelegationOptions(min_cluster_ops=1, log_device_placement=True, use_gpu=use_gpu)
    delegate(session, options, [(["x:0"], ["y:0"])])
    with Session(graph=_placed()) as native:
        for rows in (2, 2, 1, 3):
            x = np.linspace(-1, 1, 3 * rows, dtype=np.float32).reshape(rows, 3)
            np.testing.assert_allclose(
                session.run("y:0", {"x:0": x}), native.run("y:0", {"x:0": x}), rtol=1e-5
            )
    clusters = [op for op in session.graph.get_operations() if op.type == "_OrtCluster"]
    assert [runner_of(op).providers for op in clusters] == asked  # (in the order they first ran)
    assert not session.delegation_report.fallbacks
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]  # no run fell back
    return session, [(op.node_def.attr["device"].s.decode(), runner_of(op).providers) for op in clusters]


def test_with_a_gpu_cpu_pinned_ops_get_their_own_cluster_on_the_cpu(monkeypatch, caplog):
    """TF's placer keeps ops pinned to a CPU there and puts the rest on the GPU: a cluster
    never mixes the two, and each asks for its own providers."""
    caplog.set_level(logging.INFO, logger="runtime.onnx.options")
    session, placed = _run_placed(monkeypatch, caplog, gpu=True)
    cuda = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert placed == [("", cuda), ("/device:CPU:0", ["CPUExecutionProvider"]), ("/device:GPU:0", cuda)]
    assert [sorted(c.op_types) for c in session.delegation_report.clusters] == [
        ["MatMul", "Relu"],
        ["Sigmoid", "Tanh"],
        ["Exp"],
    ]
    logged = [r.getMessage() for r in caplog.records if r.name == "runtime.onnx.options"]
    assert logged == [
        "onnxruntime cluster on CUDAExecutionProvider (tf.device 'unset')",
        "onnxruntime cluster on CPUExecutionProvider (tf.device '/device:CPU:0')",
        "onnxruntime cluster on CUDAExecutionProvider (tf.device '/device:GPU:0')",
    ]


@pytest.mark.parametrize("use_gpu", [True, False])
def test_without_a_gpu_pins_split_nothing_and_gpu_pins_run_on_the_cpu(monkeypatch, caplog, use_gpu):
    """Soft placement, as TF Serving's sessions have it: ops pinned to a GPU that is not there
    run on the CPU, with no error; a pinned CPU changes nothing, so the model is one cluster."""
    # use_gpu=False: a GPU present, but delegation told not to use it; the same.
    session, placed = _run_placed(monkeypatch, caplog, gpu=not use_gpu, use_gpu=use_gpu)
    assert placed == [("", ["CPUExecutionProvider"])]
    assert len(session.delegation_report.clusters) == 1


def test_a_whole_model_on_the_gpu_runs_as_its_clusters_own_call(monkeypatch, caplog):
    session, placed = _run_placed(monkeypatch, caplog, gpu=True, pins=False)
    assert placed == [("", ["CUDAExecutionProvider", "CPUExecutionProvider"])]
    g = session.graph
    plan = session.plan([g.get_tensor_by_name("x:0")], [g.get_tensor_by_name("y:0")], [])
    assert plan.direct.__qualname__ == "ClusterRunner.plan_run.<locals>.plan_run"
