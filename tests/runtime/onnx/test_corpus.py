"""Every oracle model with delegation on and off: same outputs, and the report says what ran where.

Each model's cases run in manifest order in one bundle per tag set (some models change their
variables between cases), once with every op native and once with ``delegation=True``. Where the
native run succeeds the delegated one must match it (and TF's recorded outputs); where it fails
the delegated run must fail with the same error class. Every partition must be sound (its
contracted graph acyclic) and no signature may need the native fallback. Dense, CNN, attention and RNN models, and
every model of the zoo (``tests/oracle/builders/_zoo.py``), must delegate every compute op (the report shows 100% of estimated FLOPs in onnxruntime); an RNN's
While loops run whole, as ONNX ``Loop`` nodes inside the clusters.
A missing or stale oracle cache fails, naming ``python -m tests.oracle build``.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from loader import load_saved_model
from runtime import tensor_util
from runtime.onnx.partition import UNSOUND_PARTITION
from tests.oracle import catalog, corpus

MODELS = [e for e in catalog.discover() if e.family != "op_records"]
# Models whose every compute op must run in onnxruntime.
FULLY_DELEGATED = {
    "keras_mlp",
    "example_keras_mlp",
    "keras_cnn_bn",
    "keras_transformer_block",
    "est_dnn_classifier",
    "example_estimator_classifier",
    "keras_lstm",
    "keras_gru_bidirectional",
}
# Text pipelines: TextVectorization's string ops (lower-casing, regex, split, table lookup) have no
# ONNX form; all else delegates, but for glue between string ops too small for a cluster, named so.
STRING_PIPELINES = {e.name for e in MODELS if e.family == "zoo" and "text_classifier" in e.name}
STRING_GLUE = ("dtype string", "in a cluster too small")  # why glue stays native
# ... and every other model of the zoo (keras.applications, a BERT-style encoder) delegates all.
FULLY_DELEGATED |= {e.name for e in MODELS if e.family == "zoo"} - STRING_PIPELINES
# RNN models: each While loop is a member of a cluster (one ONNX Loop), none runs natively.
RNN = {"keras_lstm", "keras_gru_bidirectional"}


def read_tensor(manifest: dict, relative: str) -> np.ndarray:
    proto = tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
    return tensor_util.make_ndarray(proto)


def run_cases(manifest: dict, tags: list[str], delegation) -> tuple[list, object]:
    """Each case of ``tags`` in order in one bundle: (outputs dict or the exception, report)."""
    bundle = load_saved_model(manifest["export_path"], tags, delegation=delegation)
    results = []
    try:
        for case in manifest["cases"]:
            if case["tags"] != tags:
                continue
            signature = bundle.signature_defs[case["signature"]]
            feeds = {signature.inputs[k].name: read_tensor(manifest, p) for k, p in case["inputs"].items()}
            fetches = {k: signature.outputs[k].name for k in case["outputs"]}
            try:
                results.append((case, bundle.session.run(fetches, feeds)))
            except Exception as exc:  # noqa: BLE001 - compared below
                results.append((case, exc))
        return results, bundle.session.delegation_report
    finally:
        bundle.close()


def assert_close(ours, theirs, rtol: float, atol: float, where: str) -> None:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, f"{where}: shape {ours.shape} != {theirs.shape}"
    if theirs.dtype.kind in "fc":
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=where)


@pytest.mark.parametrize("entry", MODELS, ids=lambda e: e.name)
def test_delegation_on_and_off_agree(entry, caplog):
    caplog.set_level(logging.WARNING, logger="runtime.onnx.partition")
    manifest = corpus.check_current(entry)
    tag_sets = list(dict.fromkeys(tuple(c["tags"]) for c in manifest["cases"]))
    for tags in tag_sets:
        native, _ = run_cases(manifest, list(tags), False)
        delegated, report = run_cases(manifest, list(tags), True)
        assert report is not None, "delegation=True leaves a report on the Session"
        for (case, want), (_, got) in zip(native, delegated):
            where = f"{entry.name} {case['signature']} {tags}"
            if isinstance(want, Exception):
                assert type(got) is type(want), f"{where}: native raised {want!r}, delegated gave {got!r}"
                continue
            assert not isinstance(got, Exception), f"{where}: delegated raised {got!r}\n{report}"
            rtol, atol = max(case["rtol"], 1e-4), max(case["atol"], 1e-5)
            for key, value in want.items():
                assert_close(got[key], value, rtol, atol, f"{where} {key} (vs native)\n{report}")
                tf = read_tensor(manifest, case["outputs"][key])
                if tf.dtype.kind in "fc":
                    assert_close(got[key], tf, rtol, atol, f"{where} {key} (vs TF)\n{report}")
        # Every partition of the model (its graph's and each function body's) was sound, and the
        # native fallback (native_fallback.py) had nothing to answer: the rewrite held.
        assert UNSOUND_PARTITION not in caplog.text, caplog.text
        moved = {k: v for k, v in report.fallbacks.items() if k.startswith("signature ")}
        assert not moved, f"{entry.name}: signatures moved back to the original graph: {moved}"
        if entry.name in FULLY_DELEGATED:
            assert report.flops_share == 1.0 and not report.fallbacks, report.summary()
            assert not report.native_compute_ops_with_flops(), report.summary()
        if entry.name in STRING_PIPELINES:
            assert report.flops_share > 0.999 and not report.fallbacks, report.summary()
            blocked = [report.native[n][1] for n in report.native_compute_ops_with_flops()]
            assert all(why.startswith(STRING_GLUE) for why in blocked), report.summary()
        if entry.name in RNN:
            loops = [c for c in report.clusters if "While" in c.op_types]
            native_loops = [
                n for n, (kind, _) in report.native.items() if kind in ("While", "StatelessWhile")
            ]
            assert loops and not native_loops, report.summary()
