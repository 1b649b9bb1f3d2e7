"""embedding_fusion: each ``safe_embedding_lookup_sparse`` TF built in the oracle's feature-column
models becomes one ``_SafeEmbeddingLookupSparse`` giving what the subgraph gave on many ids (and
failing where it failed); a lookup whose intermediates something else reads, or whose table is a
variable, stays as it is."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from loader import load_saved_model
from runtime import Graph, errors
from runtime.execution.interpreter import run_plan
from runtime.execution.planner import build_plan
from runtime.kernels.embedding_ops import OP_TYPE
from runtime.onnx.embedding_fusion import fuse_embedding_lookups
from runtime.onnx.gather_folding import fold_gathers
from runtime.onnx.rewrite import served_region
from tests.oracle import corpus
from tests.runtime.test_embedding_ops import random_ids

# model -> {combiner: lookups}: every lookup of each model is fused.
EXPECTED = {
    "est_wide_deep": {"mean": 1, "sum": 4},
    "tf1_feature_columns_partitioned": {"mean": 2, "sqrtn": 1},
    "est_linear_regressor": {"sum": 1},
}


def folded_graph(name: str):
    """The model's graph with its variable lookups folded to constant tables, and its resources."""
    manifest = corpus.load_manifest(name)
    bundle = load_saved_model(manifest["export_path"], manifest["cases"][0]["tags"], delegation=False)
    graph = bundle.session.graph
    folded = Graph(functions=graph.functions)
    folded.import_graph_def(fold_gathers(graph, set(graph.get_operations()), bundle.session.resources))
    return folded, bundle


def served(graph: Graph, bundle) -> set[str]:
    """The ops the model's signatures need (a folded partitioned lookup leaves its shards' index
    math reading the ids, unserved)."""
    fetches = [
        info.name
        for key, signature in bundle.signature_defs.items()
        if not key.startswith("__")
        for info in signature.outputs.values()
    ]
    return {op.name for op in served_region(graph, fetches)}


def fused_graph(graph: Graph, region: set[str], **overrides) -> Graph | None:
    args = {"region": region, "fetched": set(), "fed": set()}
    args.update(overrides)
    graph_def = fuse_embedding_lookups(graph, **args)
    if graph_def is None:
        return None
    fused = Graph(functions=graph.functions)
    fused.import_graph_def(graph_def)
    return fused


def _outcome(graph: Graph, resources, node, feeds: list[np.ndarray]):
    tensors = [graph.get_tensor_by_name(name) for name in node.node_def.input[:3]]
    plan = build_plan(tensors, [graph.get_tensor_by_name(f"{node.name}:0")], (), resources, graph.functions)
    try:
        return run_plan(plan, feeds)[0]
    except errors.InvalidArgumentError as exc:
        return exc


# (batch, ids per row at most, shuffled): empty rows, repeated ids, ids < 0, unordered entries.
SHAPES = [(0, 2, False), (1, 1, False), (1, 3, True), (32, 2, False), (32, 4, True)]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_lookup_fuses_and_gives_what_the_subgraph_gave(name):
    graph, bundle = folded_graph(name)
    try:
        fused = fused_graph(graph, served(graph, bundle))
        nodes = [op for op in fused.get_operations() if op.type == OP_TYPE]
        assert collections.Counter(op.attrs["combiner"] for op in nodes) == EXPECTED[name]
        rng = np.random.default_rng(0)
        failures = sum(_compare(graph, fused, bundle.session.resources, node, rng) for node in nodes)
        assert failures  # ids past the vocabulary were tried
    finally:
        bundle.close()


def _compare(graph: Graph, fused: Graph, resources, node, rng) -> int:
    """Checks ``node`` of ``fused`` against its subgraph in ``graph`` on random ids; the number
    of those (ids past the vocabulary, one trial in 8) where both failed."""
    vocabulary, failures = node.inputs[3].shape[0], 0
    for batch, width, shuffle in SHAPES:
        for trial in range(8):
            feeds = list(random_ids(rng, [batch], width, vocabulary + (trial == 7), shuffle))
            want = _outcome(graph, resources, node, feeds)
            got = _outcome(fused, resources, node, feeds)
            if isinstance(want, Exception):
                assert isinstance(got, type(want)), (node.name, feeds)
                failures += 1
                continue
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return failures


def test_lookups_whose_intermediates_are_read_elsewhere_stay():
    graph, bundle = folded_graph("est_wide_deep")
    bundle.close()
    unique = next(op for op in graph.get_operations() if op.type == "Unique")
    region = served(graph, bundle)
    assert sum(op.type == OP_TYPE for op in fused_graph(graph, region).get_operations()) == 5
    fused = fused_graph(graph, region, fetched={unique.outputs[0].name})
    assert sum(op.type == OP_TYPE for op in fused.get_operations()) == 4
    graph_def = graph.as_graph_def()
    graph_def.node.add(name="reader", op="Identity", input=[unique.outputs[1].name]).attr["T"].type = 3
    with_reader = Graph(functions=graph.functions)
    with_reader.import_graph_def(graph_def)
    fused = fused_graph(with_reader, region | {"reader"})
    assert sum(op.type == OP_TYPE for op in fused.get_operations()) == 4
    fused = fused_graph(with_reader, region)  # the reader is not served: it does not count
    assert sum(op.type == OP_TYPE for op in fused.get_operations()) == 5
    fused = fused_graph(graph, region, fed={unique.name})
    assert sum(op.type == OP_TYPE for op in fused.get_operations()) == 4


def test_lookups_of_variables_stay():
    manifest = corpus.load_manifest("est_wide_deep")
    bundle = load_saved_model(manifest["export_path"], manifest["cases"][0]["tags"], delegation=False)
    bundle.close()
    graph = bundle.session.graph
    # its tables are still ResourceGathers of variables
    assert fused_graph(graph, {op.name for op in graph.get_operations()}) is None
