"""Signatures that need ops this server cannot or must not run are found at load (issue 5, item 9).

TF-made exports (``tests/oracle/builders/signature_fixtures.py``): ``tf.py_function`` (EagerPyFunc),
``tf.numpy_function`` (PyFunc, PyFuncStateless), one inside ``tf.cond`` inside a nested
``tf.function``, beside a plain signature; an export whose only signature needs one; a TF1 export
whose main op does. The walk itself is also checked on small hand-made graphs.
"""

from __future__ import annotations

import collections
import functools
import json

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from loader import load_saved_model, read_saved_model
from runtime import errors
from runtime.execution import signature_check
from runtime.execution.plan import UnsupportedOpsError
from tests.oracle import catalog, corpus

FIXTURES_MODEL = "sigcheck_plain"
REFUSED = {
    "py_function": "EagerPyFunc (x1)",
    "numpy_function": "PyFunc (x1)",
    "nested": "PyFunc (x1)",
    "stateless": "PyFuncStateless (x1)",
}


@functools.cache
def _fixtures():
    (entry,) = [e for e in catalog.discover() if e.name == FIXTURES_MODEL]
    manifest = corpus.check_current(entry)
    return manifest["dir"] / "fixtures", json.loads((manifest["dir"] / "fixtures.json").read_text())


def test_each_refused_signature_is_reported_with_its_ops_and_the_others_serve():
    folder, expected = _fixtures()
    bundle = load_saved_model(folder / "mixed", {"serve"}, delegation=False)
    try:
        assert sorted(bundle.unavailable_signatures) == sorted(REFUSED)
        for key, ops in REFUSED.items():
            error = bundle.unavailable_signatures[key]
            assert isinstance(error, errors.UnimplementedError)
            assert str(error) == f"Signature '{key}' cannot run here. Op types not supported: {ops}"
            with pytest.raises(errors.UnimplementedError) as info:
                bundle.check_signature(key)
            assert info.value is not error and type(info.value) is type(error)
            assert (str(info.value), info.value.counts) == (str(error), error.counts)
        bundle.check_signature("serving_default")
        signature = bundle.signature_defs["serving_default"]
        want = expected["mixed"]["serving_default"]
        x = np.array(want["x"], np.float32)
        y = bundle.session.run(signature.outputs["y"].name, {signature.inputs["x"].name: x})
        np.testing.assert_array_equal(y, np.array(want["y"], np.float32))
    finally:
        bundle.close()


def test_the_planner_refuses_exactly_the_reported_ops():
    folder, _ = _fixtures()
    bundle = load_saved_model(folder / "mixed", {"serve"}, delegation=False)
    try:
        for key, error in bundle.unavailable_signatures.items():
            signature = bundle.signature_defs[key]
            with pytest.raises(UnsupportedOpsError) as info:
                bundle.session.run(
                    signature.outputs["y"].name, {signature.inputs["x"].name: np.ones(2, np.float32)}
                )
            assert info.value.counts == error.counts
    finally:
        bundle.close()


def test_a_model_none_of_whose_signatures_can_run_fails_to_load():
    folder, _ = _fixtures()
    with pytest.raises(errors.UnimplementedError) as info:
        load_saved_model(folder / "only_py", {"serve"}, delegation=False)
    assert (
        str(info.value)
        == "Signature 'serving_default' cannot run here. Op types not supported: EagerPyFunc (x1)"
    )


def test_an_init_op_needing_a_refused_op_fails_the_load_before_anything_runs():
    folder, _ = _fixtures()
    with pytest.raises(errors.UnimplementedError) as info:
        load_saved_model(folder / "tf1_init_py_func", {"serve"}, delegation=False)
    assert (
        str(info.value) == "The init op 'init_py_func' cannot run here. Op types not supported: PyFunc (x1)"
    )


def test_several_refused_signatures_fail_the_load_together(tmp_path):
    folder, _ = _fixtures()
    meta_graph = read_saved_model(str(folder / "mixed")).meta_graphs[0]
    del meta_graph.signature_def["serving_default"]
    unavailable = signature_check.unavailable_signatures(meta_graph)
    with pytest.raises(errors.UnimplementedError) as info:
        signature_check.check_some_signature_runs(meta_graph, unavailable, "/m")
    assert str(info.value).startswith("No signature of /m can run here: Signature 'nested' cannot run here.")
    assert str(info.value).count("Op types not supported") == len(REFUSED)


def test_every_corpus_model_has_every_signature_available():
    flagged = {}
    for manifest in corpus_manifests():
        for meta_graph in read_saved_model(str(manifest["export_path"])).meta_graphs:
            for key, error in signature_check.unavailable_signatures(meta_graph).items():
                flagged[f"{manifest['name']}:{key}"] = str(error)
    assert not flagged


def corpus_manifests() -> list[dict]:
    return [corpus.load_manifest(e.name) for e in catalog.discover()]


# -- the walk on hand-made graphs -------------------------------------------------------------


def _graph(*nodes) -> graph_pb2.GraphDef:
    graph_def = graph_pb2.GraphDef()
    for name, op, inputs in nodes:
        graph_def.node.add(name=name, op=op, input=inputs)
    return graph_def


def test_feeds_cut_producers_off_and_control_inputs_are_followed():
    graph_def = _graph(
        ("x", "Placeholder", []),
        ("f1", "Foo", ["x"]),
        ("fed", "Foo", ["f1"]),
        ("ctrl", "Foo", []),
        ("unused", "Bar", []),
        ("y", "Identity", ["fed", "^ctrl"]),
    )
    missing = signature_check.missing_op_types(graph_def, ["y:0"], ["fed:0"])
    assert missing == collections.Counter({"Foo": 1})
    assert signature_check.missing_op_types(graph_def, ["y:0"]) == collections.Counter({"Foo": 3})


def test_functions_are_followed_through_calls_and_func_attrs():
    graph_def = _graph(
        ("x", "Placeholder", []), ("call", "PartitionedCall", ["x"]), ("direct", "inner", ["x"])
    )
    graph_def.node[1].attr["f"].func.name = "outer"
    outer = graph_def.library.function.add()
    outer.signature.name = "outer"
    outer.node_def.add(name="cond", op="If", input=["a"]).attr["then_branch"].func.name = "inner"
    outer.node_def.add(name="dangling", op="Frobnicate")  # not reachable from rets: never runs
    outer.ret["out"] = "cond:output:0"
    inner = graph_def.library.function.add()
    inner.signature.name = "inner"
    inner.node_def.add(name="py", op="EagerPyFunc", input=["a"])  # stateful: runs though unused
    inner.node_def.add(name="foo", op="Foo", input=["a"])
    inner.ret["out"] = "foo:y:0"
    assert signature_check.missing_op_types(graph_def, ["call:0"]) == collections.Counter(
        {"EagerPyFunc": 1, "Foo": 1}
    )
    assert signature_check.missing_op_types(graph_def, ["direct:0"]) == collections.Counter(
        {"EagerPyFunc": 1, "Foo": 1}
    )


def test_a_shared_index_walks_each_function_once_and_answers_as_a_fresh_one():
    graph_def = _graph(
        ("x", "Placeholder", []),
        ("a", "PartitionedCall", ["x"]),
        ("b", "PartitionedCall", ["x"]),
        ("y", "Identity", ["a", "b"]),
    )
    graph_def.node[1].attr["f"].func.name = "left"
    graph_def.node[2].attr["f"].func.name = "right"
    for name, callee in (("left", "shared"), ("right", "shared"), ("shared", None)):
        fdef = graph_def.library.function.add()
        fdef.signature.name = name
        fdef.node_def.add(name="foo", op="Foo", input=["a"])
        if callee is not None:
            fdef.node_def.add(name="call", op=callee, input=["foo:y:0"])
        fdef.ret["out"] = "call:out:0" if callee is not None else "foo:y:0"
    index = signature_check.GraphIndex(graph_def)
    fetch_sets = [["y:0"], ["a:0"], ["b:0"], ["y:0"]]
    shared = [signature_check.needed_op_types(index, fetches) for fetches in fetch_sets]
    fresh = [signature_check.needed_op_types(graph_def, fetches) for fetches in fetch_sets]
    assert shared == fresh
    # left, right and shared each once: "shared", reached from both, is not counted twice
    assert shared[0] == collections.Counter(
        {"Placeholder": 1, "PartitionedCall": 2, "Identity": 1, "Foo": 3, "shared": 2}
    )
    assert shared[1] == collections.Counter({"Placeholder": 1, "PartitionedCall": 1, "Foo": 2, "shared": 1})


def test_forbidden_ops_are_refused_even_with_a_kernel(monkeypatch):
    monkeypatch.setattr(signature_check.registry, "registered", lambda op: True)
    graph_def = _graph(("x", "Placeholder", []), ("p", "PyFunc", ["x"]))
    assert signature_check.missing_op_types(graph_def, ["p:0"]) == collections.Counter({"PyFunc": 1})


def test_a_signature_of_ops_with_kernels_is_available():
    meta_graph = meta_graph_pb2.MetaGraphDef()
    meta_graph.graph_def.CopyFrom(_graph(("x", "Placeholder", []), ("y", "Neg", ["x"]), ("z", "Foo", ["x"])))
    meta_graph.signature_def["ok"].outputs["y"].name = "y:0"
    meta_graph.signature_def["bad"].outputs["z"].name = "z:0"
    meta_graph.signature_def["__saved_model_init_op"].outputs["__saved_model_init_op"].name = "z"
    assert list(signature_check.unavailable_signatures(meta_graph)) == ["bad"]
    signature_check.check_some_signature_runs(
        meta_graph, signature_check.unavailable_signatures(meta_graph), "/m"
    )
