"""Resolving a MetaGraphDef's assets to files under ``<export_dir>/assets/``.

Assets are files (vocabularies, ...) whose *path* a graph reads from a string placeholder at init
time. TF2 exports list them in ``MetaGraphDef.asset_file_def``; TF1 exports may instead keep
``AssetFileDef`` messages packed as ``Any`` in the ``saved_model_assets`` collection. Either way each
names a tensor and a file name relative to ``assets/``::

    asset_file_def { tensor_info { name: "asset_path:0" } filename: "vocab.txt" }
      -> {"asset_path:0": "<export_dir>/assets/vocab.txt"}

The mapping is fed to the init op (main_op / legacy_init_op / __saved_model_init_op) when it runs.
"""

from __future__ import annotations

import os

from apis.tensorflow.core.protobuf import meta_graph_pb2
from loader.saved_model import ASSETS_DIRECTORY
from runtime import errors

ASSETS_KEY = "saved_model_assets"


def resolve_assets(meta_graph_def: meta_graph_pb2.MetaGraphDef, export_dir: str) -> dict[str, str]:
    """Asset tensor name -> absolute file path; ``asset_file_def`` wins over the legacy collection."""
    asset_protos = list(meta_graph_def.asset_file_def)
    if not asset_protos and ASSETS_KEY in meta_graph_def.collection_def:
        for any_proto in meta_graph_def.collection_def[ASSETS_KEY].any_list.value:
            asset = meta_graph_pb2.AssetFileDef()
            if not any_proto.Unpack(asset):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Collection {ASSETS_KEY} of {export_dir} holds a {any_proto.type_url}, not an AssetFileDef",
                )
            asset_protos.append(asset)
    assets_dir = os.path.join(os.path.abspath(export_dir), ASSETS_DIRECTORY)
    resolved = {}
    for asset in asset_protos:
        path = os.path.normpath(os.path.join(assets_dir, asset.filename))
        if os.path.commonpath([path, assets_dir]) != assets_dir:
            raise errors.InvalidArgumentError(
                None, None, f"Asset {asset.filename!r} of {export_dir} lies outside its assets directory"
            )
        resolved[asset.tensor_info.name] = path
    return resolved
