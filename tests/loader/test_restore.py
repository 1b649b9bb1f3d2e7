"""loader.restore and the loader's refusal of a version caught half-copied.

Each state a copy passes through (``saved_model.pb`` alone, the index without its data, a
data shard or index cut short, ``saved_model.pb`` cut short) fails to load with a status, never
"success with no variables" as in TensorFlow; the complete copy loads. And on every model the
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
        ("index without data", errors.DataLossError),
        ("data cut short", errors.DataLossError),
        ("index cut short", errors.DataLossError),
        ("saved_model.pb cut short", errors.DataLossError),
        ("empty directory", errors.NotFoundError),
    ],
)
def test_a_half_copied_version_fails_to_load(tmp_path, state, error):
    with pytest.raises(error) as info:
        load_saved_model(str(_state(tmp_path, state)))
    if state == "saved_model.pb only":
        assert "restores 3 checkpoint tensor(s) (first: a) but has no checkpoint" in info.value.message


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
        for meta_graph in read_saved_model(str(export)).meta_graphs:
            keys = restored_keys(meta_graph)
            assert UNKNOWN_KEY not in keys, export
            assert set(keys) <= checkpoint, (export, set(keys) - checkpoint)
            checked += bool(keys)
    assert checked > 10


def test_no_saver_no_keys():
    meta_graph = select_meta_graph(read_saved_model(str(HALF_PLUS_TWO)), ["serve"], str(HALF_PLUS_TWO))
    assert restored_keys(meta_graph) == ["a", "b", "c"]
    meta_graph.ClearField("saver_def")
    assert restored_keys(meta_graph) == []
