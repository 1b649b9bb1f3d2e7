"""A cluster's onnxruntime session gets one intra-op thread where its work at batch 1 is too small
to pay for a thread pool's hand-offs, in all or per matmul and convolution; otherwise
onnxruntime's default pool, unless the options or the Session's ConfigProto set a count."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import Session
from runtime.onnx import DelegationOptions, runner_of
from runtime.onnx.options import session_options, single_threaded
from tests.runtime.onnx.test_partition import F, const, delegated_session, graph, node

OPTIONS = DelegationOptions()


@pytest.mark.parametrize(
    ("flops", "heavy_ops", "one"),
    [
        (None, 0, False),  # unknown: onnxruntime's default
        (1e6, 0, True),  # a small cluster
        (1e6, 50, True),
        (2.3e7, 357, True),  # NASNetMobile: 65 kFLOPs per convolution
        (9.2e6, 71, False),  # RegNetY002: 130 kFLOPs per convolution
        (1.6e8, 54, False),  # ResNet50
        (1e7, 0, False),  # no matmul or convolution to average over
    ],
)
def test_single_threaded_by_cluster_and_kernel_size(flops, heavy_ops, one):
    assert single_threaded(OPTIONS, flops, heavy_ops) is one
    threads = session_options(OPTIONS, flops, heavy_ops).intra_op_num_threads
    assert threads == (1 if one else 0)


def test_a_thread_count_set_in_the_options_wins():
    options = DelegationOptions(intra_op_threads=3)
    assert session_options(options, 1e3, 10).intra_op_num_threads == 3
    assert session_options(options, 1e9, 10).intra_op_num_threads == 3


def _batch_of(width: int, n):
    """``n`` with TF's static output shape [?, width]: FLOPs are estimated at batch 1."""
    shape = n.attr["_output_shapes"].list.shape.add()
    for size in (-1, width):
        shape.dim.add(size=size)
    return n


def _matmul_chain(width: int, depth: int):
    rng = np.random.default_rng(0)
    nodes, previous = [_batch_of(width, node("x", "Placeholder", dtype=F))], "x"
    for i in range(depth):
        nodes.append(const(f"w{i}", rng.normal(size=(width, width)) / np.sqrt(width)))
        nodes.append(_batch_of(width, node(f"m{i}", "MatMul", previous, f"w{i}", T=F)))
        nodes.append(_batch_of(width, node(f"r{i}", "Relu", f"m{i}", T=F)))
        previous = f"r{i}"
    return graph(*nodes), f"{previous}:0"


@pytest.mark.parametrize(
    ("width", "depth", "threads"),
    [
        (220, 24, 1),  # 2.3 MFLOPs at batch 1, 97 kFLOPs per MatMul: one thread
        (512, 4, 0),  # 2.1 MFLOPs at batch 1, 524 kFLOPs per MatMul: the default pool
    ],
)
def test_a_cluster_of_many_small_matmuls_runs_on_one_thread(width, depth, threads):
    g, fetch = _matmul_chain(width, depth)
    session = delegated_session(g)
    x = np.random.default_rng(1).normal(size=(3, width)).astype(np.float32)
    got = session.run(fetch, {"x:0": x})
    want = Session(graph=_matmul_chain(width, depth)[0]).run(fetch, {"x:0": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    (runner,) = [runner_of(op) for op in session.graph.get_operations() if runner_of(op)]
    (compiled,) = runner._compiled.values()
    assert compiled.get_session_options().intra_op_num_threads == threads
    (summary,) = session.delegation_report.clusters
    assert summary.flops > OPTIONS.small_cluster_flops
