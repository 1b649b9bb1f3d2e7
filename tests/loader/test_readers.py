"""The loader's pure readers: SavedModel files, tag-set selection, assets, init ops, fingerprints."""

from __future__ import annotations

import shutil

import pytest

from apis.tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from loader import (
    init_op_name,
    maybe_saved_model_directory,
    read_fingerprint,
    read_saved_model,
    resolve_assets,
    select_meta_graph,
    tag_sets,
)
from runtime import errors
from tests.loader.corpus import manifest, manifests


def test_missing_saved_model_has_tensorflows_text(tmp_path):
    with pytest.raises(errors.NotFoundError) as info:
        read_saved_model(str(tmp_path))
    assert str(info.value) == (
        f"Could not find SavedModel .pb or .pbtxt at supplied export directory path: {tmp_path}"
    )
    assert not maybe_saved_model_directory(str(tmp_path))


def test_every_corpus_saved_model_parses_with_its_tag_sets():
    for m in manifests():
        saved_model = read_saved_model(str(m["export_path"]))
        assert tag_sets(saved_model) == m["meta_graphs"], m["name"]
        assert maybe_saved_model_directory(str(m["export_path"]))
        for tags in m["meta_graphs"]:
            assert list(select_meta_graph(saved_model, tags).meta_info_def.tags) == tags


def test_pbtxt_is_read():
    m = manifest("loader_pbtxt_no_variables")
    assert (m["export_path"] / "saved_model.pbtxt").exists()
    assert not (m["export_path"] / "saved_model.pb").exists()
    assert read_saved_model(str(m["export_path"])).meta_graphs[0].signature_def["serving_default"]


def test_tag_set_semantics_and_error_listing():
    m = manifest("loader_all_dtypes")
    saved_model = read_saved_model(str(m["export_path"]))
    assert list(select_meta_graph(saved_model, ["gpu", "serve", "gpu"]).meta_info_def.tags) == [
        "serve",
        "gpu",
    ]
    assert list(select_meta_graph(saved_model, {"train"}).meta_info_def.tags) == ["train"]
    assert list(select_meta_graph(saved_model, "serve").meta_info_def.tags) == ["serve"]
    with pytest.raises(errors.NotFoundError) as info:
        select_meta_graph(saved_model, ["gpu"], "/x")
    assert str(info.value) == (
        "Could not find meta graph def matching supplied tags: { gpu }. To inspect available tag-sets in the "
        "SavedModel, please use the SavedModel CLI: `saved_model_cli`\n"
        "The given SavedModel at /x contains the following tag-sets:\n'gpu, serve'\n'serve'\n'train'"
    )


def test_corrupt_saved_model_pb_is_data_loss(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(b"\x12\xff\xff\xff\x0f garbage")
    with pytest.raises(errors.DataLossError, match=f"Can't parse {tmp_path}/saved_model.pb as binary proto"):
        read_saved_model(str(tmp_path))
    (tmp_path / "saved_model.pb").unlink()
    (tmp_path / "saved_model.pbtxt").write_text("meta_graphs { nonsense: 1 }")
    with pytest.raises(errors.DataLossError, match="as text proto"):
        read_saved_model(str(tmp_path))


def test_assets_from_asset_file_def_and_legacy_collection(tmp_path):
    tf2 = manifest("loader_tf2_module")
    meta_graph = read_saved_model(str(tf2["export_path"])).meta_graphs[0]
    assets = resolve_assets(meta_graph, str(tf2["export_path"]))
    assert [p.endswith("/assets/labels.txt") for p in assets.values()] == [True]
    legacy = meta_graph_pb2.MetaGraphDef()
    asset = meta_graph_pb2.AssetFileDef(filename="vocab.txt")
    asset.tensor_info.name = "vocab_path:0"
    legacy.collection_def["saved_model_assets"].any_list.value.add().Pack(asset)
    assert resolve_assets(legacy, str(tmp_path)) == {"vocab_path:0": str(tmp_path / "assets" / "vocab.txt")}
    asset.filename = "../../etc/passwd"
    escaping = meta_graph_pb2.MetaGraphDef()
    escaping.asset_file_def.add().CopyFrom(asset)
    with pytest.raises(errors.InvalidArgumentError, match="outside its assets directory"):
        resolve_assets(escaping, str(tmp_path))


def test_legacy_collection_assets_of_a_tf1_export():
    m = manifest("loader_legacy_init_op_assets")
    meta_graph = read_saved_model(str(m["export_path"])).meta_graphs[0]
    assets = resolve_assets(meta_graph, str(m["export_path"]))
    assert [p.rsplit("/", 2)[-2:] for p in assets.values()] == [["assets", "vocab.txt"]]
    assert init_op_name(meta_graph) is not None


def test_init_op_precedence():
    mg = meta_graph_pb2.MetaGraphDef()
    assert init_op_name(mg) is None
    mg.collection_def["legacy_init_op"].node_list.value.append("legacy")
    assert init_op_name(mg) == "legacy"
    mg.collection_def["saved_model_main_op"].node_list.value.append("main")
    assert init_op_name(mg) == "main"
    mg.signature_def["__saved_model_init_op"].outputs["__saved_model_init_op"].name = "NoOp"
    assert init_op_name(mg) == "NoOp"
    mg2 = meta_graph_pb2.MetaGraphDef()
    mg2.collection_def["saved_model_main_op"].node_list.value.extend(["a", "b"])
    with pytest.raises(errors.InvalidArgumentError, match="Expected exactly one SavedModel init op"):
        init_op_name(mg2)


def test_fingerprint_read_when_present(tmp_path):
    tf2 = manifest("loader_tf2_module")
    fingerprint = read_fingerprint(str(tf2["export_path"]))
    assert fingerprint is not None and fingerprint.saved_model_checksum
    shutil.copy(tf2["export_path"] / "saved_model.pb", tmp_path / "saved_model.pb")
    assert read_fingerprint(str(tmp_path)) is None
    (tmp_path / "fingerprint.pb").write_bytes(b"\xff\xff")
    with pytest.raises(errors.DataLossError, match="fingerprint.pb"):
        read_fingerprint(str(tmp_path))


def test_saved_model_proto_is_the_api_type():
    assert isinstance(
        read_saved_model(str(manifest("loader_all_dtypes")["export_path"])), saved_model_pb2.SavedModel
    )
