"""Lookup tables against TensorFlow: static tables from tensors and vocabulary files (key and value
index semantics, delimiter, offset, vocab_size, TF's errors), StaticVocabularyTable's OOV
buckets, mutable, tensor-valued and dense tables, re-initialisation; each scenario is TF's own
GraphDef run through ``runtime.Session``.

TF's side: ``tests/oracle/builders/breadth_records.py``; shared checks in ``test_parsing_ops``.
"""

from __future__ import annotations

import numpy as np
import pytest

from runtime import Graph, Session, errors
from tests.runtime import breadth_records
from tests.runtime.test_parsing_ops import check_scenario

LOOKUP_SCENARIOS = [n for n in breadth_records.SCENARIOS if n != "parse_then_lookup_feature_column"]


@pytest.mark.parametrize("name", LOOKUP_SCENARIOS)
def test_lookup_scenario(name) -> None:
    check_scenario(name)


def _table_graph(shared_name: str = "") -> Graph:
    from apis.tensorflow.core.framework import graph_pb2, types_pb2

    graph_def = graph_pb2.GraphDef()
    table = graph_def.node.add(name="table", op="HashTableV2")
    table.attr["key_dtype"].type = types_pb2.DT_STRING
    table.attr["value_dtype"].type = types_pb2.DT_INT64
    table.attr["shared_name"].s = shared_name.encode()
    for name, dtype in (("keys", types_pb2.DT_STRING), ("values", types_pb2.DT_INT64)):
        node = graph_def.node.add(name=name, op="Placeholder")
        node.attr["dtype"].type = dtype
    init = graph_def.node.add(name="init", op="InitializeTableV2", input=["table", "keys", "values"])
    init.attr["Tkey"].type = types_pb2.DT_STRING
    init.attr["Tval"].type = types_pb2.DT_INT64
    size = graph_def.node.add(name="size", op="LookupTableSizeV2", input=["table"])
    del size
    return Graph.from_graph_def(graph_def)


def test_initialising_again_is_a_no_op_with_the_same_data_and_an_error_with_other_data() -> None:
    keys = np.array([b"a", b"b"], dtype=object)
    with Session(graph=_table_graph()) as session:
        session.run("init", {"keys:0": keys, "values:0": np.array([1, 2])})
        session.run("init", {"keys:0": keys, "values:0": np.array([1, 2])})
        assert session.run("size:0") == 2
        with pytest.raises(errors.FailedPreconditionError, match="already initialized with different data"):
            session.run("init", {"keys:0": keys, "values:0": np.array([1, 3])})


def test_tables_are_per_session() -> None:
    graph = _table_graph("shared")
    with Session(graph=graph) as first, Session(graph=graph) as second:
        first.run("init", {"keys:0": np.array([b"a"], dtype=object), "values:0": np.array([1])})
        assert first.run("size:0") == 1
        assert second.run("size:0") == 0


def test_dense_hash_tables_restored_from_a_checkpoint_are_tensorflows() -> None:
    """A TF2 SavedModel of DenseHashTables filled, updated and erased from before export: the
    checkpoint holds the bucket arrays (empty buckets hold empty_key, the erased one deleted_key).
    Restored, lookups, sizes and exported buckets equal TF's, every dtype compared exactly."""
    from loader.bundle import load_saved_model
    from tests.oracle import corpus
    from tests.runtime.test_parsing_ops import read_tensor

    manifest = corpus.load_manifest("tf2_dense_hash_table")
    bundle = load_saved_model(str(manifest["export_path"]), tags=["serve"])
    try:
        for case in manifest["cases"]:
            signature = bundle.signature_defs[case["signature"]]
            feeds = {
                signature.inputs[k].name: read_tensor(manifest["dir"] / p) for k, p in case["inputs"].items()
            }
            fetches = {k: signature.outputs[k].name for k in case["outputs"]}
            results = bundle.session.run(fetches, feed_dict=feeds)
            for key, path in case["outputs"].items():
                expected = read_tensor(manifest["dir"] / path)
                ours = np.asarray(results[key])
                assert ours.shape == expected.shape and ours.tolist() == expected.tolist(), key
        assert {c["signature"] for c in manifest["cases"]} == {"serving_default", "export"}
    finally:
        bundle.close()
