"""Loading TensorFlow SavedModels without TensorFlow.

``load_saved_model(export_dir, tags)`` returns a ``SavedModelBundle`` (a restored and initialised
``runtime.Session`` plus its MetaGraphDef), like TensorFlow's C++ ``LoadSavedModel``;
``load(sess, tags, export_dir)`` fills an existing Session and returns the MetaGraphDef, like
``tf.compat.v1.saved_model.loader.load``. The readers it is built from are public too.
"""

from loader.assets import resolve_assets
from loader.bundle import (
    SavedModelBundle,
    init_op_name,
    load,
    load_saved_model,
    restore_variables,
    run_init_op,
)
from loader.fingerprint import model_identity, read_fingerprint
from loader.meta_graph import select_meta_graph, tag_sets
from loader.saved_model import maybe_saved_model_directory, read_saved_model, variables_prefix

__all__ = [
    "SavedModelBundle",
    "init_op_name",
    "load",
    "load_saved_model",
    "maybe_saved_model_directory",
    "model_identity",
    "read_fingerprint",
    "read_saved_model",
    "resolve_assets",
    "restore_variables",
    "run_init_op",
    "select_meta_graph",
    "tag_sets",
    "variables_prefix",
]
