"""``loader.load_saved_model`` and ``loader.load`` on every oracle SavedModel and every model in models/.

Every MetaGraphDef of every model loads (restore op and init op run in the runtime); restored
variables hold exactly the checkpoint's values; for the loader's own models the signature outputs
equal TensorFlow's, which proves init ops and asset feeds ran.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from loader import load, load_saved_model, read_saved_model, tag_sets
from runtime import errors
from runtime.checkpoint.reader import load_checkpoint
from runtime.graph.graph import Graph
from runtime.session import Session
from runtime.tensor_util import make_ndarray
from tests.loader.corpus import LOADER_MODELS, committed_models, manifest, manifests


def _tensor(path) -> np.ndarray:
    proto = tensor_pb2.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return make_ndarray(proto)


def _check_restored_variables(bundle, export_path) -> int:
    """Fetch every ref variable (and every resource variable's Read op) and compare with the checkpoint."""
    prefix = export_path / "variables" / "variables"
    if not prefix.with_suffix(".index").exists():
        return 0
    reader = load_checkpoint(str(prefix))
    graph = bundle.session.graph
    checked = 0
    for name in reader.get_variable_to_shape_map():
        for fetch in (f"{name}:0", f"{name}/Read/ReadVariableOp:0"):
            try:
                op = graph.get_operation_by_name(fetch.rsplit(":", 1)[0])
            except (KeyError, ValueError):
                continue
            if op.type not in ("VariableV2", "ReadVariableOp"):
                continue
            ours = np.asarray(bundle.session.run(fetch))
            expected = np.asarray(reader.get_tensor(name), dtype=ours.dtype)
            assert (
                ours.shape == expected.shape and ours.tobytes() == expected.tobytes()
                if ours.dtype != object
                else (ours.tolist() == expected.tolist())
            ), (export_path, name)
            checked += 1
    return checked


def test_every_corpus_model_loads_every_meta_graph():
    failures = []
    for m in manifests():
        for tags in m["meta_graphs"]:
            try:
                bundle = load_saved_model(str(m["export_path"]), tags, delegation=False)
            except errors.OpError as e:
                failures.append(f"{m['name']} {tags}: {type(e).__name__}: {str(e)[:300]}")
                continue
            assert set(bundle.signature_defs) == set(bundle.meta_graph_def.signature_def)
            _check_restored_variables(bundle, m["export_path"])
            bundle.close()
    assert not failures, "\n".join(failures)


def test_every_committed_model_loads_every_meta_graph():
    for export_dir in committed_models():
        for tags in tag_sets(read_saved_model(str(export_dir))):
            load_saved_model(str(export_dir), tags, delegation=False).close()


@pytest.mark.parametrize("name", LOADER_MODELS)
def test_loader_models_compute_what_tensorflow_computes(name):
    m = manifest(name)
    for case in m["cases"]:
        bundle = load_saved_model(str(m["export_path"]), case["tags"], delegation=False)
        signature = bundle.signature_defs[case["signature"]]
        feeds = {signature.inputs[k].name: _tensor(m["dir"] / p) for k, p in case["inputs"].items()}
        fetches = {k: signature.outputs[k].name for k in case["outputs"]}
        outputs = bundle.session.run(fetches, feeds)
        for key, path in case["outputs"].items():
            np.testing.assert_allclose(
                outputs[key], _tensor(m["dir"] / path), rtol=case["rtol"], atol=case["atol"]
            )
        bundle.close()


def test_load_into_an_existing_session_returns_the_meta_graph():
    m = manifest("loader_all_dtypes")
    session = Session(graph=Graph())
    meta_graph = load(session, ["serve", "gpu"], str(m["export_path"]))
    assert list(meta_graph.meta_info_def.tags) == ["serve", "gpu"]
    assert "predict" in meta_graph.signature_def
    assert np.array_equal(
        session.run("i64:0"), load_checkpoint(str(m["export_path"] / "variables/variables")).get_tensor("i64")
    )


def test_model_without_variables_loads(tmp_path):
    bundle = load_saved_model(
        str(manifest("loader_pbtxt_no_variables")["export_path"]), {"serve"}, delegation=False
    )
    out = bundle.session.run("y:0", {"x:0": np.array([1.0, 2.0], np.float32)})
    assert out.tolist() == [3.0, 5.0]


def test_missing_tags_fail_with_the_tag_sets_present():
    with pytest.raises(
        errors.NotFoundError, match="contains the following tag-sets:\n'gpu, serve'\n'serve'\n'train'"
    ):
        load_saved_model(
            str(manifest("loader_all_dtypes")["export_path"]), {"serve", "tpu"}, delegation=False
        )


def test_corrupt_shard_fails_the_restore_op(tmp_path):
    import shutil

    source = manifest("loader_all_dtypes")["export_path"]
    shutil.copytree(source, tmp_path / "m")
    shard = tmp_path / "m" / "variables" / "variables.data-00000-of-00001"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(errors.DataLossError, match=r"variables\.data-00000-of-00001: tensor '.*': Checksum"):
        load_saved_model(str(tmp_path / "m"), {"serve"}, delegation=False)


def test_a_shard_truncated_on_disk_after_load_leaves_the_served_variables_intact(tmp_path):
    """Restored variables are owned by the Session: truncating the shard in place (as `cp` over
    it does) must not fault the process, and values stay what was loaded."""
    import shutil

    shutil.copytree(manifest("example_keras_mlp")["export_path"], tmp_path / "m")
    bundle = load_saved_model(str(tmp_path / "m"), {"serve"}, delegation=False)
    signature = bundle.signature_defs["serving_default"]
    (x,) = signature.inputs.values()
    feed = {x.name: np.linspace(-1, 1, 3 * 4, dtype=np.float32).reshape(3, 4)}
    fetches = [t.name for t in signature.outputs.values()]
    before = bundle.session.run(fetches, feed)
    for shard in (tmp_path / "m" / "variables").glob("variables.data-*"):
        shard.write_bytes(b"")
    after = bundle.session.run(fetches, feed)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(before, after))


def _with_py_func(tmp_path, as_main_op: bool):
    from apis.tensorflow.core.framework import types_pb2

    saved_model = read_saved_model(str(manifest("loader_pbtxt_no_variables")["export_path"]))
    meta_graph = saved_model.meta_graphs[0]
    node = meta_graph.graph_def.node.add(name="evil", op="PyFunc", input=["x"])
    node.attr["token"].s = b"pyfunc_0"
    node.attr["Tin"].list.type.append(types_pb2.DT_FLOAT)
    node.attr["Tout"].list.type.append(types_pb2.DT_FLOAT)
    signature = meta_graph.signature_def["evil"]
    signature.inputs["x"].CopyFrom(meta_graph.signature_def["serving_default"].inputs["x"])
    signature.outputs["y"].name = "evil:0"
    if as_main_op:
        meta_graph.collection_def["saved_model_main_op"].node_list.value.append("evil")
    export_dir = tmp_path / ("main_op" if as_main_op else "signature")
    export_dir.mkdir()
    (export_dir / "saved_model.pb").write_bytes(saved_model.SerializeToString())
    return str(export_dir)


def test_py_func_never_runs(tmp_path):
    bundle = load_saved_model(_with_py_func(tmp_path, as_main_op=False), {"serve"}, delegation=False)
    assert bundle.session.run("y:0", {"x:0": np.array([1.0], np.float32)}).tolist() == [3.0]
    with pytest.raises(errors.UnimplementedError, match="PyFunc"):
        bundle.session.run("evil:0", {"x:0": np.array([1.0], np.float32)})
    with pytest.raises(errors.UnimplementedError, match="PyFunc"):
        load_saved_model(_with_py_func(tmp_path, as_main_op=True), {"serve"}, delegation=False)


def test_a_failing_delegation_leaves_the_model_native_and_served(monkeypatch, caplog):
    """Delegation only speeds a model up: if rewriting the graph raises, the model still loads."""
    import runtime.onnx

    def broken(session, options=None, signatures=None, cache=None, original=None):
        raise RuntimeError("converter exploded")

    monkeypatch.setattr(runtime.onnx, "delegate", broken)
    export = Path(__file__).resolve().parents[2] / "models" / "half_plus_two" / "00000123"
    with caplog.at_level("WARNING", logger="loader.bundle"):
        bundle = load_saved_model(str(export), ["serve"], delegation=True)
    try:
        assert "converter exploded" in caplog.text
        assert bundle.session.run("y:0", {"x:0": np.float32([[2.0]])}).tolist() == [[3.0]]
    finally:
        bundle.close()
