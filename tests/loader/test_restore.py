"""loader.restore and the loader's refusal of a version caught half-copied.

Each state a copy passes through (``saved_model.pb`` alone, the index without its data, a
data shard or index cut short, an asset not yet there: FAILED_PRECONDITION naming it;
``saved_model.pb`` cut short: DATA_LOSS) fails to load with a status, never "success with no
variables" as in TensorFlow; the complete copy loads. And on every model the
oracle built, the keys the restore op reads are keys of its checkpoint.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from loader import load_saved_model, read_saved_model, select_meta_graph
from loader.restore import UNKNOWN_KEY, restored_keys
from runtime import errors
from runtime.checkpoint.reader import load_checkpoint
from tests.loader.corpus import committed_models, manifests

HALF_PLUS_TWO = Path(__file__).resolve().parents[2] / "models" / "half_plus_two" / "00000123"
DATA = "variables/variables.data-00000-of-00001"
INDEX = "variables/variables.index"


def _cut(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _state(tmp_path: Path, name: str) -> Path:
    export = tmp_path / name
    shutil.copytree(HALF_PLUS_TWO, export)
    if name == "saved_model.pb only":
        shutil.rmtree(export / "variables")
    elif name == "index without data":
        (export / DATA).unlink()
    elif name == "data cut short":
        _cut(export / DATA, 0.5)
    elif name == "index cut short":
        _cut(export / INDEX, 0.6)
    elif name == "asset missing":
        (export / "assets" / "foo.txt").unlink()
    elif name == "saved_model.pb cut short":
        _cut(export / "saved_model.pb", 0.7)
    elif name == "empty directory":
        shutil.rmtree(export)
        export.mkdir()
    return export


@pytest.mark.parametrize(
    "state, error",
    [
        ("saved_model.pb only", errors.FailedPreconditionError),
        ("index without data", errors.FailedPreconditionError),
        ("data cut short", errors.FailedPreconditionError),
        ("index cut short", errors.FailedPreconditionError),
        ("asset missing", errors.FailedPreconditionError),
        ("saved_model.pb cut short", errors.DataLossError),
        ("empty directory", errors.NotFoundError),
    ],
)
def test_a_half_copied_version_fails_to_load(tmp_path, state, error):
    with pytest.raises(error) as info:
        load_saved_model(str(_state(tmp_path, state)))
    message = info.value.message
    expected = {
        "saved_model.pb only": "restores 3 checkpoint tensor(s) (first: a) but has no checkpoint",
        "index without data": "lacks data shard 0 of the 1 its checkpoint index names",
        "data cut short": "cut short: ",
        "index cut short": "has a checkpoint index that does not end in its footer",
        "asset missing": "lacks the asset file its init op reads",
    }.get(state, "")
    assert expected in message
    if error is errors.FailedPreconditionError:
        assert message.endswith("Is it still being written?")


@pytest.mark.parametrize("model", ["keras_mlp/1", "half_plus_two_tf2/1"])
def test_a_tf2_export_without_its_variables_fails_to_load(tmp_path, model):
    """``tf.saved_model.save`` restores in a library function (StatefulPartitionedCall): its keys
    are found there, so the version is refused, not served with uninitialised variables."""
    export = tmp_path / "version"
    shutil.copytree(HALF_PLUS_TWO.parents[1] / model, export)
    shutil.rmtree(export / "variables")
    with pytest.raises(errors.FailedPreconditionError) as info:
        load_saved_model(str(export))
    assert (
        "checkpoint tensor(s) (first: " in info.value.message
        and "but has no checkpoint" in info.value.message
    )


def test_the_complete_copy_loads(tmp_path):
    bundle = load_saved_model(str(_state(tmp_path, "complete")))
    assert bundle.session.run("y:0", {"x:0": np.float32([[1.0]])}).tolist() == [[2.5]]


def test_restored_keys_are_checkpoint_keys_on_every_oracle_model():
    exports = [m["export_path"] for m in manifests()] + committed_models()
    checked = 0
    for export in exports:
        if not (export / INDEX).exists():
            continue
        checkpoint = set(load_checkpoint(str(export / "variables" / "variables")).get_variable_to_shape_map())
        values = checkpoint - {"_CHECKPOINTABLE_OBJECT_GRAPH"}  # (TF2's object graph: read by no op)
        for meta_graph in read_saved_model(str(export)).meta_graphs:
            keys = restored_keys(meta_graph)
            assert UNKNOWN_KEY not in keys, export
            assert set(keys) <= checkpoint, (export, set(keys) - checkpoint)
            if values and meta_graph.saver_def.restore_op_name:  # what a saver restores is found
                assert keys, f"{export}: a checkpoint of {len(values)} values, no key found"
            checked += bool(keys)
    assert checked > 10


def test_no_saver_no_keys():
    meta_graph = select_meta_graph(read_saved_model(str(HALF_PLUS_TWO)), ["serve"], str(HALF_PLUS_TWO))
    assert restored_keys(meta_graph) == ["a", "b", "c"]
    meta_graph.ClearField("saver_def")
    assert restored_keys(meta_graph) == []


def test_a_version_whose_variables_stay_uninitialised_fails_its_load(tmp_path):
    """The invariant at load: every variable the signatures read holds a value after restore and
    init. Here the saver is gone (a restore that reads nothing): the load fails, naming a variable,
    where it would otherwise succeed and fail every request with "Could not find variable"."""
    from apis.tensorflow.core.protobuf import saved_model_pb2

    export = tmp_path / "version"
    shutil.copytree(HALF_PLUS_TWO.parents[1] / "keras_mlp" / "1", export)
    saved = saved_model_pb2.SavedModel.FromString((export / "saved_model.pb").read_bytes())
    for meta_graph in saved.meta_graphs:
        meta_graph.ClearField("saver_def")
    (export / "saved_model.pb").write_bytes(saved.SerializeToString())
    with pytest.raises(errors.FailedPreconditionError) as info:
        load_saved_model(str(export))
    assert "without a value after restore and init (first: " in info.value.message
