"""TF's static input shapes declared to onnxruntime (``Signature.shapes``): its NCHWc pass then
needs no 5-D reshapes around a branch sum; an input that breaks them (TF's C++ Session does not
check feeds against static shapes) compiles the cluster again with no dims declared, and every
answer equals the native kernels'."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from runtime import Graph, Session
from runtime.onnx import DelegationOptions, convert_subgraph, delegate, runner_of
from runtime.onnx.converter import Signature
from runtime.onnx.interface import declared_shapes
from runtime.onnx.options import CPU, cpu_channel_block
from runtime.tensor_util import conforms
from tests.runtime.onnx.test_channel_blocks import FETCHES, F, _close, cell

RNG = np.random.default_rng(11)


def _shaped_cell(shape):
    """The NASNet-like cell of ``test_channel_blocks`` with ``x`` of TF's static ``shape``."""
    graph_def = cell()
    x = next(n for n in graph_def.node if n.name == "x")
    for size in shape:
        x.attr["shape"].shape.dim.add(size=size)
    return graph_def


def _optimized_types(model, tmp_path) -> collections.Counter:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), so, providers=[CPU])
    return collections.Counter(n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node)


def test_declared_dims_spare_onnxruntime_its_reshapes(tmp_path):
    block = cpu_channel_block()
    if block == 0:
        pytest.skip("onnxruntime has no blocked (NCHWc) kernels on this CPU")
    undeclared = convert_subgraph(cell(), ["x"], FETCHES, Signature((F,), (4,)), channel_block=block)
    declared = convert_subgraph(
        cell(), ["x"], FETCHES, Signature((F,), (4,), ((None, 8, 8, 3),)), channel_block=block
    )
    dims = [d.dim_value or None for d in declared.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [None, 8, 8, 3]
    # Unknown sizes: onnxruntime cannot show the sum's operands alike and reshapes each to 5-D.
    assert _optimized_types(undeclared, tmp_path)["Reshape"] == 3
    assert _optimized_types(declared, tmp_path)["Reshape"] == 0


def test_declared_shapes_follow_what_the_input_conforms_to():
    x = np.zeros((2, 8, 8, 3), np.float32)
    assert declared_shapes([(None, 8, 8, 3)], [x]) == ((None, 8, 8, 3),)
    assert declared_shapes([(None, 9, 8, 3)], [x]) == (None,)  # the first input breaks it
    assert declared_shapes([None], [x]) == (None,)
    assert conforms(None, (5,)) and conforms((None, 8, 8, 3), (1, 8, 8, 3))
    assert not conforms((None, 8, 8, 3), (1, 8, 8)) and not conforms((2, 8, 8, 3), (1, 8, 8, 3))


def _input_dims(session: Session) -> list:
    (runner,) = [runner_of(op) for op in session.graph.get_operations() if runner_of(op)]
    return [entry.get_inputs()[0].shape for entry in runner._compiled.values()]


@pytest.mark.parametrize("static", [(-1, 8, 8, 3), (2, 8, 8, 3)])
def test_an_input_breaking_the_static_shape_compiles_again(static, caplog):
    """8x8 runs with the dims declared; 16x16 (or another batch, where TF fixed it) runs too,
    as TF's C++ Session runs it, after one compile with nothing declared; then 8x8 again."""
    graph_def = _shaped_cell(static)
    # (as the loader's Sessions: TF's C++ feed semantics, no static shape check on feeds)
    delegated = Session(graph=Graph.from_graph_def(graph_def), check_feed_shapes=False)
    report = delegate(delegated, DelegationOptions(min_cluster_ops=1), [(["x:0"], FETCHES)])
    inputs = [
        RNG.standard_normal((2, 8, 8, 3)).astype(np.float32),
        RNG.standard_normal((3, 16, 16, 3) if static[0] < 0 else (3, 8, 8, 3)).astype(np.float32),
        RNG.standard_normal((2, 8, 8, 3)).astype(np.float32),
    ]
    seen = []
    with Session(graph=Graph.from_graph_def(graph_def), check_feed_shapes=False) as native:
        for x in inputs:
            for _ in range(2):  # a first run (compile, validate), then the hot path
                for got, want in zip(delegated.run(FETCHES, {"x:0": x}), native.run(FETCHES, {"x:0": x})):
                    _close(got, want, rtol=1e-4)
            seen.append(_input_dims(delegated))
    declared = [None if static[0] < 0 else 2, 8, 8, 3]
    assert [[d if isinstance(d, int) else None for d in dims] for (dims,) in seen] == [
        declared,
        [None] * 4,
        [None] * 4,
    ]
    assert not report.fallbacks, report.summary()
    assert "ran natively" not in caplog.text  # compiled again, not a failure
