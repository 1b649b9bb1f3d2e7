"""TF1 while loop frames raised to functional ``While`` nodes: which frames, and the same outputs.

Each oracle model with TF1 loops is rewritten by ``raise_frames`` alone (no delegation), run
natively, and compared with TF's recorded outputs. The regular loops (``map_fn``,
``dynamic_rnn``, TensorArray loops, a plain counter loop) must be raised; frames holding a cond,
a nested loop fed from outside both frames, or ref variables must stay frames.
"""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from loader import load_saved_model
from runtime import Graph, tensor_util
from runtime.onnx.raise_frames import raise_frames
from tests.oracle import catalog, corpus

ENTRIES = {e.name: e for e in catalog.discover()}
# model -> (frames raised, frames left): counted by their Enter ops' frame names.
EXPECTED = {
    "cf_v1_map_fn": (1, 0),
    "cf_v1_dynamic_rnn": (1, 0),
    "cf_v1_tensor_array": (1, 0),
    "cf_v1_while_cond": (0, 1),
    "cf_v1_ref_variables": (0, 1),
}


def _frames(graph_def) -> set[str]:
    return {n.attr["frame_name"].s.decode() for n in graph_def.node if n.op in ("Enter", "RefEnter")}


def _read(manifest: dict, relative: str) -> np.ndarray:
    return tensor_util.make_ndarray(
        tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
    )


@pytest.mark.parametrize("name", sorted(EXPECTED) + ["cf_v1_nested_while", "tf1_cond_while"])
def test_raised_frames_run_as_tf_does(name):
    manifest = corpus.check_current(ENTRIES[name])
    tags = manifest["cases"][0]["tags"]
    bundle = load_saved_model(manifest["export_path"], tags, delegation=False)
    try:
        session = bundle.session
        before = session.graph.as_graph_def()
        raised_def, library = raise_frames(before, session.graph.functions)
        left = _frames(raised_def)
        if name in EXPECTED:
            assert (len(_frames(before) - left), len(left)) == EXPECTED[name], left
        added = [library[f] for f in set(library) - set(session.graph.functions)]
        whiles = [n for n in [*raised_def.node, *(n for f in added for n in f.node_def)] if n.op == "While"]
        assert len(whiles) == len(_frames(before) - left)
        graph = Graph(functions=library)
        graph.import_graph_def(raised_def)
        graph.finalize()
        session._replace_graph(graph)
        for case in manifest["cases"]:
            if case["tags"] != tags:
                continue
            signature = bundle.signature_defs[case["signature"]]
            feeds = {signature.inputs[k].name: _read(manifest, p) for k, p in case["inputs"].items()}
            fetches = {k: signature.outputs[k].name for k in case["outputs"]}
            got = session.run(fetches, feeds)
            for key, path in case["outputs"].items():
                want = _read(manifest, path)
                rtol, atol = max(case["rtol"], 1e-5), max(case["atol"], 1e-6)
                np.testing.assert_allclose(got[key], want, rtol=rtol, atol=atol, err_msg=f"{name} {key}")
    finally:
        bundle.close()


def test_raising_is_pure():
    manifest = corpus.check_current(ENTRIES["cf_v1_map_fn"])
    bundle = load_saved_model(manifest["export_path"], manifest["cases"][0]["tags"], delegation=False)
    try:
        before = bundle.session.graph.as_graph_def()
        library = dict(bundle.session.graph.functions)
        copy = before.SerializeToString()
        _, new_library = raise_frames(before, library)
        assert before.SerializeToString() == copy and set(new_library) > set(library)
    finally:
        bundle.close()


# Converters only raised TF1 loops reach (test_converters counts them as checked by this module).
RAISED_CHECKED = frozenset({"TensorListGather"})


@pytest.mark.parametrize("name", ["cf_v1_map_fn", "cf_v1_dynamic_rnn", "cf_v1_tensor_array"])
def test_raised_loops_run_whole_in_onnxruntime(name):
    """Delegated, each raised loop is one ONNX Loop in a cluster (TensorArrays as dense lists, the
    sequence lengths known at run time only) and the outputs are TF's."""
    manifest = corpus.check_current(ENTRIES[name])
    tags = manifest["cases"][0]["tags"]
    bundle = load_saved_model(manifest["export_path"], tags, delegation=True)
    try:
        report = bundle.session.delegation_report
        loops = [c for c in report.clusters if "While" in c.op_types]
        native = {kind for kind, _ in report.native.values()}
        assert loops and not native & {"While", "Enter"}, report.summary()
        for case in manifest["cases"]:
            signature = bundle.signature_defs[case["signature"]]
            feeds = {signature.inputs[k].name: _read(manifest, p) for k, p in case["inputs"].items()}
            got = bundle.session.run({k: signature.outputs[k].name for k in case["outputs"]}, feeds)
            for key, path in case["outputs"].items():
                want = _read(manifest, path)
                rtol, atol = max(case["rtol"], 1e-5), max(case["atol"], 1e-6)
                np.testing.assert_allclose(got[key], want, rtol=rtol, atol=atol, err_msg=f"{name} {key}")
        assert not report.fallbacks, report.summary()  # each loop converted and validated
    finally:
        bundle.close()
