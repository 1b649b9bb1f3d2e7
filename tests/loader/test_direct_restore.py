"""``DirectRestore`` (``loader/restore.py``) against its general twin, the restore op run as a
graph: on every corpus model the variables come out the same, bit for bit, either way; the direct
run applies to the restore functions ``tf.saved_model.save`` writes (the zoo's among them) and to
nothing else; a corrupt checkpoint still fails with the restore op's own error.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import loader.bundle
import loader.restore
from loader import load_saved_model
from loader.restore import DirectRestore
from runtime import errors
from runtime.kernels.resources import Var
from tests.loader.corpus import manifest, manifests


def variables(session) -> dict:
    """Every variable of a Session: key -> (dtype, value)."""
    return {
        key: (var.dtype, var.value)
        for key, var in session.resources._resources.items()
        if isinstance(var, Var)
    }


def applies(export_dir: str, tags) -> bool:
    bundle = load_saved_model(export_dir, tags, delegation=False)
    try:
        return DirectRestore.of(bundle.session.graph, bundle.meta_graph_def.saver_def) is not None
    finally:
        bundle.close()


def test_the_direct_restore_gives_the_restore_ops_variables_on_every_corpus_model(monkeypatch):
    direct_models = []
    for m in manifests():
        for tags in m["meta_graphs"]:
            export_dir = str(m["export_path"])
            if not applies(export_dir, tags):
                continue
            direct_models.append(m["name"])
            bundle = load_saved_model(export_dir, tags, delegation=False)
            with monkeypatch.context() as patch:
                patch.setattr(loader.bundle.DirectRestore, "of", classmethod(lambda cls, *a: None))
                general = load_saved_model(export_dir, tags, delegation=False)
            ours, theirs = variables(bundle.session), variables(general.session)
            assert ours.keys() == theirs.keys(), m["name"]
            for key, (dtype, value) in ours.items():
                assert dtype == theirs[key][0], (m["name"], key)
                expected = np.asarray(theirs[key][1])
                assert value.dtype == expected.dtype and value.shape == expected.shape, (m["name"], key)
                assert value.tobytes() == expected.tobytes() or value.tolist() == expected.tolist()
            bundle.close()
            general.close()
    assert "zoo_mobilenet_v2_saved" in direct_models and "zoo_bert_encoder_saved" in direct_models
    assert not any(name.endswith("_frozen") for name in direct_models)  # (no variables to restore)


@pytest.mark.parametrize("name", ["tf1_all_dtypes", "example_estimator_classifier"])
def test_a_tf1_saver_restores_by_its_graph(name):
    m = manifest(name)
    (tags, *_) = m["meta_graphs"]
    bundle = load_saved_model(str(m["export_path"]), tags, delegation=False)
    try:
        assert bundle.meta_graph_def.saver_def.restore_op_name
        assert DirectRestore.of(bundle.session.graph, bundle.meta_graph_def.saver_def) is None
    finally:
        bundle.close()


def test_a_corrupt_checkpoint_fails_with_the_restore_ops_error(tmp_path):
    shutil.copytree(manifest("zoo_mobilenet_v2_saved")["export_path"], tmp_path / "m")
    shard = tmp_path / "m" / "variables" / "variables.data-00000-of-00001"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(errors.DataLossError, match=r"tensor '.*': Checksum does not match[\s\S]*RestoreV2"):
        load_saved_model(str(tmp_path / "m"), {"serve"}, delegation=False)


def test_the_handles_come_from_their_kernels_as_a_graph_run_gives_them():
    m = manifest("zoo_mobilenet_v2_saved")
    bundle = load_saved_model(str(m["export_path"]), {"serve"}, delegation=False)
    try:
        direct = DirectRestore.of(bundle.session.graph, bundle.meta_graph_def.saver_def)
        tensors = [direct.call.inputs[j] for j in sorted({j for j, _, _ in direct.assigns})]

        class NoGraphRuns:
            resources = bundle.session.resources

            def run(self, fetches):
                raise AssertionError("the handles were run as a graph")

        assert len(tensors) > 100
        assert loader.restore._handles(NoGraphRuns(), tensors) == bundle.session.run(tensors)
    finally:
        bundle.close()
