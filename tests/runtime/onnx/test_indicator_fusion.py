"""indicator_fusion: est_wide_deep's indicator column (SparseToDense -> OneHot -> Sum) becomes one
``_IndicatorCounts`` giving what the three ops gave, on many SparseTensors (batch 0, 1 and 32,
repeated and out-of-range ids, default-filled cells), failing as SparseToDense failed; nothing
fuses when an intermediate is fed, fetched or read elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from loader import load_saved_model
from runtime import Graph, errors
from runtime.execution.interpreter import run_plan
from runtime.execution.planner import build_plan
from runtime.kernels import load_all
from runtime.kernels.feature_column_ops import INDICATOR_OP_TYPE, indicator_counts
from runtime.onnx.indicator_fusion import fuse_indicator_columns
from tests.oracle import corpus

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

PREFIX = "dnn/input_from_feature_columns/input_layer/color_indicator_1/"
FEEDS = (
    "ParseExample/ParseExampleV2:1",
    "ParseExample/ParseExampleV2:7",
    PREFIX + "hash_table_Lookup/LookupTableFindV2:0",
)


@pytest.fixture(scope="module")
def model():
    manifest = corpus.load_manifest("est_wide_deep")
    bundle = load_saved_model(manifest["export_path"], manifest["cases"][0]["tags"], delegation=False)
    bundle.close()
    return bundle.session.graph, bundle.session.resources


def _region(graph: Graph) -> set[str]:
    return {op.name for op in graph.get_operations()}


def _fused(graph: Graph, fetched=frozenset(), fed=frozenset()) -> Graph | None:
    graph_def = fuse_indicator_columns(graph, _region(graph), set(fetched), set(fed))
    if graph_def is None:
        return None
    fused = Graph(functions=graph.functions)
    fused.import_graph_def(graph_def)
    return fused


def _outcome(graph: Graph, resources, inputs):
    feeds = [graph.get_tensor_by_name(name) for name in FEEDS]
    fetches = [graph.get_tensor_by_name(PREFIX + "Sum:0")]
    plan = build_plan(feeds, fetches, (), resources, graph.functions)
    try:
        return run_plan(plan, list(inputs))
    except errors.InvalidArgumentError as exc:
        return exc


def _sparse(rows: int, width: int, ids, cells=None):
    cells = [(r, c) for r in range(rows) for c in range(width)] if cells is None else cells
    indices = np.array(cells, np.int64).reshape(-1, 2)
    return indices, np.array([rows, width], np.int64), np.array(ids, np.int64).reshape(-1)


rng = np.random.default_rng(0)
# (indices, dense_shape, ids): batch 0, 1 and 32; repeated ids in a row; ids outside [0, depth)
# and negative; rows and cells left to default_value (-1); out-of-bounds, repeated and unsorted
# indices (SparseToDense's errors); values of the wrong length.
INPUTS = [
    _sparse(0, 1, []),
    _sparse(1, 1, [2]),
    _sparse(32, 1, np.arange(32) % 5),
    _sparse(32, 3, rng.integers(-3, 7, 96)),
    _sparse(4, 3, [1, 1, 1, 0, 2, 2], [(0, 0), (0, 1), (0, 2), (2, 0), (2, 2), (3, 1)]),
    _sparse(3, 2, [2**40, -(2**40), 1], [(0, 0), (1, 1), (2, 0)]),
    _sparse(2, 1, [0, 1], [(0, 0), (2, 0)]),
    _sparse(2, 2, [0, 1], [(0, 1), (0, 1)]),
    _sparse(2, 2, [0, 1], [(1, 0), (0, 1)]),
    _sparse(2, 2, [0, 1], [(0, -1), (1, 0)]),
    (np.zeros((2, 2), np.int64), np.array([2, 2], np.int64), np.zeros(3, np.int64)),
]


def _same(a, b) -> None:
    if isinstance(a, Exception) or isinstance(b, Exception):
        # The same error; the node it names is the fused op, under the Sum's name.
        assert type(a) is type(b) and str(a).split("\n\t [[")[0] == str(b).split("\n\t [[")[0], (a, b)
        return
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_the_column_fuses_and_gives_what_the_subgraph_gave(model):
    graph, resources = model
    fused = _fused(graph)
    assert fused is not None
    op = fused.get_operation_by_name(PREFIX + "Sum")
    assert op.type == INDICATOR_OP_TYPE and INDICATOR_OP_TYPE in KERNELS
    assert [t.name for t in op.inputs][:3] == list(FEEDS)
    for inputs in INPUTS:
        _same(_outcome(fused, resources, inputs), _outcome(graph, resources, inputs))


@pytest.mark.parametrize(
    "how", ["fed SparseToDense", "fed OneHot", "fetched SparseToDense", "fetched OneHot", "read elsewhere"]
)
def test_nothing_fuses_when_an_intermediate_is_seen(model, how):
    graph, _ = model
    inner = PREFIX + ("SparseToDense" if how.endswith("SparseToDense") else "one_hot")
    if how.startswith("fed"):
        assert _fused(graph, fed={inner}) is None
    elif how.startswith("fetched"):
        assert _fused(graph, fetched={inner + ":0"}) is None
    else:
        graph_def = graph.as_graph_def()
        node = graph_def.node.add()
        node.name, node.op = "extra_reader", "Identity"
        node.input.append(PREFIX + "one_hot:0")
        node.attr["T"].type = 1
        extra = Graph(functions=graph.functions)
        extra.import_graph_def(graph_def)
        assert _fused(extra) is None


@pytest.mark.parametrize("dtype", [1, 2, 3, 9])
@pytest.mark.parametrize("index", range(len(INPUTS)))
def test_kernel_equals_the_three_kernels(index, dtype):
    indices, shape, ids = INPUTS[index]
    default = np.int64(-1)
    np_dtype = {1: np.float32, 2: np.float64, 3: np.int32, 9: np.int64}[dtype]

    def unfused():
        dense = KERNELS["SparseToDense"].fn(indices, shape, ids, default)
        hot = KERNELS["OneHot"].fn(dense, np.int32(5), np_dtype(1), np_dtype(0))
        return [KERNELS["Sum"].fn(hot, np.int32(-2))]

    def fused():
        return [indicator_counts(indices, shape, ids, default, depth=5, T=dtype)]

    def run(fn):
        try:
            return fn()
        except errors.InvalidArgumentError as exc:
            return exc

    _same(run(fused), run(unfused))
