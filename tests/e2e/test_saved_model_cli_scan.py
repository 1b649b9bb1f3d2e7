"""``saved_model_cli scan`` and ``show --graph`` as processes, on a delegated CNN and an Estimator
with feature columns (and on exports with PyFunc signatures).

``scan`` starts with TF's own lines (compared with tf221's ``scan``), then says per signature what
``model_server`` would decide (compared with the loader's ``unavailable_signatures``) and what
runs in onnxruntime (compared with the delegated Session's report); its exit status gates a
pipeline. The picture's SVG must parse, name each cluster as a Graphviz cluster and each native
op by name.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET

import pytest

from loader import load_saved_model
from serving.saved_model_cli import placement
from tests.oracle import catalog, corpus

from .saved_model_cli_support import model_dir, normalize, one_line_error, ours, tensorflow

SVG = "{http://www.w3.org/2000/svg}"


def _fixture(name: str) -> str:
    (entry,) = [e for e in catalog.discover() if e.name == "sigcheck_plain"]
    return str(corpus.check_current(entry)["dir"] / "fixtures" / name)


@functools.cache
def _tf_scans() -> dict:
    commands = [
        ["scan", "--dir", model_dir("keras_cnn_bn")],
        ["scan", "--dir", model_dir("keras_cnn_bn"), "--op_denylist", "Conv2D,MaxPool, Nope"],
        ["scan", "--dir", model_dir("tf1_multi_metagraph"), "--tag_set", "serve,gpu"],
        ["scan", "--dir", model_dir("tf1_multi_metagraph")],
    ]
    return tensorflow(commands)


@pytest.mark.parametrize("index", range(4))
def test_scan_starts_with_tensorflows_lines(index):
    args, want = list(_tf_scans().items())[index]
    assert want["error"] is None, want["error"]
    got = ours(*args)
    assert got.returncode == 0, got.stderr
    tf_lines = normalize(want["stdout"])
    assert tf_lines and normalize(got.stdout)[: len(tf_lines)] == tf_lines


def _report(name: str) -> dict[str, placement.SignaturePlacement]:
    bundle = load_saved_model(model_dir(name), {"serve"}, delegation=True)
    try:
        return {
            key: placement.place(bundle.session, signature)
            for key, signature in bundle.signature_defs.items()
            if key != "__saved_model_init_op"
        }
    finally:
        bundle.close()


def _sections(stdout: str) -> dict[str, str]:
    parts = re.split(r"^  signature_def\['([^']+)'\]: ", stdout, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("name", ["keras_cnn_bn", "est_wide_deep"])
def test_scan_says_what_runs_in_onnxruntime_and_why_the_rest_is_native(name):
    got = ours("scan", "--dir", model_dir(name))
    assert got.returncode == 0, got.stderr
    assert got.stdout.rstrip().endswith("Every signature can run here.")
    sections = _sections(got.stdout)
    expected = _report(name)
    assert sorted(sections) == sorted(expected)
    for key, where in expected.items():
        text = sections[key]
        assert text.startswith("runs here\n")
        assert f"onnxruntime: {len(where.clusters)} cluster" in text
        assert f"{where.delegated_ops} ops, {100 * where.flops_share:.1f}% of estimated FLOPs" in text
        for cluster in where.clusters:
            assert f"      {cluster.name}: {len(cluster.ops)} ops (" in text
        assert f"    native: {len(where.native)} ops" in text
        for (kind, why), count in where.native_by_reason().items():
            assert f"      {kind} x{count}: {why}\n" in text
    if name == "keras_cnn_bn":  # every convolution and matmul in onnxruntime
        assert all("Conv2D x2" in s and "native: 0 ops" in s for s in sections.values())
    else:  # tf.Example parsing and feature-column lookups stay native, and say why
        assert all("ParseExampleV2 x1: no ONNX converter" in s for s in sections.values())
        assert all("LookupTableFindV2 x3: no ONNX converter" in s for s in sections.values())


def test_scan_fails_a_model_with_signatures_that_cannot_run():
    got = ours("scan", "--dir", _fixture("mixed"))
    assert got.returncode == 1
    sections = _sections(got.stdout)
    assert sections["py_function"].startswith("cannot run here: op types not supported: EagerPyFunc (x1)")
    assert sections["numpy_function"].startswith("cannot run here: op types not supported: PyFunc (x1)")
    assert sections["serving_default"].startswith("runs here")
    assert "model_server would not serve them" in got.stdout
    assert got.stderr == ""


def test_scan_fails_a_model_that_cannot_load():
    got = ours("scan", "--dir", _fixture("tf1_init_py_func"))
    assert got.returncode == 1
    assert (
        "cannot load here: The init op 'init_py_func' cannot run here. Op types not supported: PyFunc (x1)"
        in got.stdout
    )


def test_scan_without_delegation():
    got = ours("scan", "--dir", model_dir("keras_cnn_bn"), "--onnx_delegation=false")
    assert got.returncode == 0
    assert got.stdout.count("every op runs natively") == 2


def _svg(path) -> ET.Element:
    return ET.parse(path).getroot()


def _titles(root: ET.Element, kind: str) -> set[str]:
    return {g.find(f"{SVG}title").text for g in root.iter(f"{SVG}g") if g.get("class") == kind}


def _texts(root: ET.Element) -> str:
    return "\n".join(t.text or "" for t in root.iter(f"{SVG}text"))


@pytest.mark.parametrize("name,key", [("keras_cnn_bn", "serving_default"), ("est_wide_deep", "predict")])
def test_graph_picture_names_the_clusters_and_the_native_ops(tmp_path, name, key):
    path = tmp_path / "graph.svg"
    got = ours("show", "--dir", model_dir(name), "--graph", key, "--output", path)
    assert got.returncode == 0, got.stderr
    where = _report(name)[key]
    root = _svg(path)
    clusters = _titles(root, "cluster")
    assert clusters == {f"cluster_{c.name}" for c in where.clusters}
    texts = _texts(root)
    for cluster in where.clusters:
        assert f"{cluster.name} (onnxruntime): {len(cluster.ops)} ops" in texts
    nodes = _titles(root, "node")
    for op in where.native:
        assert op.name in nodes and op.type in texts
    assert f"{len(where.native)} native op(s)" in got.stdout
    if name == "est_wide_deep":
        assert any(op.type == "ParseExampleV2" for op in where.native)


def test_graph_as_dot_source_needs_no_graphviz_program(tmp_path):
    path = tmp_path / "graph.dot"
    got = ours("show", "--dir", model_dir("keras_cnn_bn"), "--graph", "serving_default", "--output", path)
    assert got.returncode == 0, got.stderr
    source = path.read_text()
    assert source.startswith("digraph ") and "subgraph cluster_ort_cluster_" in source


def test_graph_errors_are_one_line(tmp_path):
    cnn = model_dir("keras_cnn_bn")
    assert "--graph needs --output" in one_line_error(
        ours("show", "--dir", cnn, "--graph", "serving_default")
    )
    assert "the suffix must be one of" in one_line_error(
        ours("show", "--dir", cnn, "--graph", "serving_default", "--output", tmp_path / "g.txt")
    )
    assert 'Could not find signature "nope"' in one_line_error(
        ours("show", "--dir", cnn, "--graph", "nope", "--output", tmp_path / "g.svg")
    )


def test_the_cluster_op_name_is_runtime_onnxs():
    from runtime.onnx.partition import CLUSTER_OP

    assert placement.CLUSTER_OP == CLUSTER_OP


def test_graph_of_a_signature_that_cannot_run_marks_the_missing_op(tmp_path):
    path = tmp_path / "graph.svg"
    got = ours("show", "--dir", _fixture("mixed"), "--graph", "numpy_function", "--output", path)
    assert got.returncode == 0, got.stderr
    root = _svg(path)
    assert "CANNOT RUN HERE: op types not supported: PyFunc (x1)" in _texts(root)
    missing = [
        a
        for a in root.iter(f"{SVG}a")
        if a.get("{http://www.w3.org/1999/xlink}title") == "not supported here"
    ]
    assert len(missing) == 1 and "PyFunc" in "".join(t.text or "" for t in missing[0].iter(f"{SVG}text"))
