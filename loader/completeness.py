"""Is a version directory whole: everything its restore and init op read is on disk, in full.

``cp``, ``gsutil cp`` and ``rsync`` write a version file by file, and a server polling meanwhile
sees it half copied. TensorFlow loads such a version where it can (no ``variables.index``: "The
specified SavedModel has no variables"; an asset the init op never opens) and every request then
fails: TF Serving's issue "Model loaded successfully even if variable files are absent". The
load checks first instead: a version that is not whole fails with FAILED_PRECONDITION naming
what is missing, the previous version keeps serving, and the manager tries it again when its
directory changes.

Whole means: the checkpoint index when the restore reads any key (wherever it reads it,
``restore.restored_keys``), an index that ends in its footer, every data shard the index names
at least as long as the entries it holds, and every asset file the init op is fed.
"""

from __future__ import annotations

import os

from apis.tensorflow.core.protobuf import meta_graph_pb2
from loader.assets import resolve_assets
from loader.restore import restored_keys
from loader.saved_model import variables_prefix
from runtime import errors

_STILL_WRITTEN = "Is it still being written?"


def check_complete(meta_graph_def: meta_graph_pb2.MetaGraphDef, export_dir: str) -> None:
    """FailedPreconditionError naming the first missing piece; None when the version is whole."""
    check_checkpoint(meta_graph_def, export_dir)
    check_assets(meta_graph_def, export_dir)


def _incomplete(export_dir: str, what: str) -> errors.FailedPreconditionError:
    return errors.FailedPreconditionError(
        None, None, f"The SavedModel at {export_dir} {what}. {_STILL_WRITTEN}"
    )


def check_checkpoint(meta_graph_def, export_dir: str) -> None:
    """The checkpoint the restore reads is there, in full (before ``restore_variables`` runs)."""
    prefix = variables_prefix(export_dir)
    index = prefix + ".index"
    if not os.path.exists(index):
        keys = restored_keys(meta_graph_def)
        if keys:
            raise _incomplete(
                export_dir,
                f"restores {len(keys)} checkpoint tensor(s) (first: {keys[0]}) but has no checkpoint: "
                f"{index} not found",
            )
        return
    if not meta_graph_def.saver_def.restore_op_name:
        return  # nothing restores from it (TF: "The MetaGraphDef has no saver")
    from runtime.checkpoint.table import FOOTER_LENGTH, TABLE_MAGIC  # the runtime's reader, as the restore
    from runtime.checkpoint.tensor_bundle import BundleReader, data_filename

    with open(index, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 8))
        tail = f.read(8)
    if size < FOOTER_LENGTH or int.from_bytes(tail, "little") != TABLE_MAGIC:
        # A table ends in its magic number; a copy cut short does not (any other damage: DATA_LOSS).
        raise _incomplete(
            export_dir, f"has a checkpoint index that does not end in its footer: {index} ({size} bytes)"
        )
    reader = BundleReader(prefix)
    for shard, needed in sorted(reader.shard_extents().items()):
        path = data_filename(prefix, shard, reader.num_shards)
        try:
            have = os.path.getsize(path)
        except OSError:
            raise _incomplete(
                export_dir,
                f"lacks data shard {shard} of the {reader.num_shards} its checkpoint index names: {path}",
            ) from None
        if have < needed:
            raise _incomplete(
                export_dir,
                f"has data shard {path} cut short: {have} of the {needed} bytes its checkpoint index names",
            )


def check_assets(meta_graph_def, export_dir: str) -> None:
    """Every asset file the init op is fed exists (before ``run_init_op`` runs)."""
    for tensor, path in sorted(resolve_assets(meta_graph_def, export_dir).items()):
        if not os.path.isfile(path):
            raise _incomplete(export_dir, f"lacks the asset file its init op reads from {tensor}: {path}")
