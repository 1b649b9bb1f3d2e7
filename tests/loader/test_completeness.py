"""loader.completeness on every model the oracle built: each whole export passes, and each
piece a copy could still lack fails FAILED_PRECONDITION naming it.

The property, per export with a checkpoint: the index one byte short; every data shard the
index names absent, and one byte short of what its entries reach. The variants are made beside
the export (links to its files, the changed file written anew: a shard's length is all the
check reads, so a sparse file of that length stands in for it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loader import read_saved_model
from loader.assets import resolve_assets
from loader.completeness import check_complete
from runtime import errors
from runtime.checkpoint.tensor_bundle import BundleReader, data_filename
from tests.loader.corpus import committed_models, manifests

INDEX = "variables/variables.index"


def _exports() -> list[Path]:
    return sorted({m["export_path"] for m in manifests()} | set(committed_models()))


def _linked(export: Path, target: Path, skip: str) -> Path:
    """``target`` holding links to every file of ``export`` but ``skip`` (relative)."""
    for path in export.rglob("*"):
        relative = path.relative_to(export)
        if path.is_file() and str(relative) != skip:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(path, target / relative)
    (target / "variables").mkdir(exist_ok=True)
    return target


def _meta_graphs(export: Path):
    return read_saved_model(str(export)).meta_graphs


def _refused(meta_graphs, export: Path, expected: str) -> None:
    for meta_graph in meta_graphs:
        if not meta_graph.saver_def.restore_op_name:
            continue
        with pytest.raises(errors.FailedPreconditionError) as info:
            check_complete(meta_graph, str(export))
        assert expected in info.value.message, info.value.message


def test_every_whole_export_passes():
    exports = _exports()
    for export in exports:
        for meta_graph in _meta_graphs(export):
            check_complete(meta_graph, str(export))
    assert len(exports) > 50


def test_every_missing_or_short_piece_of_every_checkpoint_is_named(tmp_path):
    checked = shards = 0
    for n, export in enumerate(_exports()):
        if not (export / INDEX).exists() or not any(
            m.saver_def.restore_op_name for m in _meta_graphs(export)
        ):
            continue
        meta_graphs = _meta_graphs(export)
        reader = BundleReader(str(export / "variables" / "variables"))
        short_index = _linked(export, tmp_path / f"{n}-index", INDEX)
        (short_index / INDEX).write_bytes((export / INDEX).read_bytes()[:-1])
        _refused(meta_graphs, short_index, "does not end in its footer")
        for shard, needed in reader.shard_extents().items():
            name = os.path.relpath(
                data_filename(str(export / "variables" / "variables"), shard, reader.num_shards), export
            )
            absent = _linked(export, tmp_path / f"{n}-{shard}-absent", name)
            _refused(meta_graphs, absent, f"lacks data shard {shard} of the {reader.num_shards}")
            if needed:
                short = _linked(export, tmp_path / f"{n}-{shard}-short", name)
                with open(short / name, "wb") as f:
                    f.truncate(needed - 1)
                _refused(meta_graphs, short, f"{needed - 1} of the {needed} bytes")
            shards += 1
        checked += 1
    assert checked > 40 and shards > checked  # some checkpoint has more than one shard


def test_a_missing_asset_is_named(tmp_path):
    checked = 0
    for n, export in enumerate(_exports()):
        for m, meta_graph in enumerate(_meta_graphs(export)):
            assets = sorted(resolve_assets(meta_graph, str(export)).values())
            if not assets:
                continue
            lacking = _linked(export, tmp_path / f"{n}-{m}", os.path.relpath(assets[0], export))
            with pytest.raises(errors.FailedPreconditionError) as info:
                check_complete(meta_graph, str(lacking))
            assert "lacks the asset file" in info.value.message
            assert os.path.basename(assets[0]) in info.value.message
            checked += 1
    assert checked >= 3
