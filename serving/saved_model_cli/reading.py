"""The SavedModel and MetaGraphDef a command names, found as TF's ``saved_model_utils`` finds them.

The loader's readers do the reading; this module only gives TF's ``saved_model_cli`` its words
when something is missing (a directory without a SavedModel, a tag-set no MetaGraphDef has), so a
script that matches TF's messages keeps working.
"""

from __future__ import annotations

from apis.tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from loader import maybe_saved_model_directory, read_saved_model
from serving.saved_model_cli.errors import CliError


def read(export_dir: str) -> saved_model_pb2.SavedModel:
    """The directory's SavedModel; CliError with TF's text when it holds none."""
    if not maybe_saved_model_directory(export_dir):
        raise CliError(f"SavedModel file does not exist at: {export_dir}")
    return read_saved_model(export_dir)


def parse_tags(tag_set: str) -> list[str]:
    """``--tag_set`` as TF 2.21 reads it: comma-separated, items trimmed, empty items dropped."""
    tags = [t.strip() for t in tag_set.split(",") if t.strip()]
    if not tags:
        raise CliError("tag_set must contain at least one non-empty item.")
    return tags


def meta_graph(
    saved_model: saved_model_pb2.SavedModel, tag_set: str, strip: bool = True
) -> meta_graph_pb2.MetaGraphDef:
    """The MetaGraphDef whose tags equal ``--tag_set`` (as a set), with TF's error otherwise.

    ``strip=False``: tags as TF 2.21's ``show --tag_set`` (listing keys) reads them, untrimmed."""
    wanted = set(parse_tags(tag_set)) if strip else {t for t in tag_set.split(",") if t}
    valid = []
    for meta_graph_def in saved_model.meta_graphs:
        tags = meta_graph_def.meta_info_def.tags
        if set(tags) == wanted:
            return meta_graph_def
        valid.append(",".join(tags))
    raise CliError(
        f"MetaGraphDef associated with tag-set {tag_set} could not be found in the SavedModel. "
        f"Please use one of the following tag-sets: {valid}"
    )


def only_meta_graph(saved_model: saved_model_pb2.SavedModel, tag_set: str | None, flag: str):
    """``--tag_set``'s MetaGraphDef, or the only one when the flag is left out (our commands)."""
    if tag_set is not None:
        return meta_graph(saved_model, tag_set)
    if len(saved_model.meta_graphs) == 1:
        return saved_model.meta_graphs[0]
    listed = [",".join(m.meta_info_def.tags) for m in saved_model.meta_graphs]
    raise CliError(f"{flag} needs --tag_set: the SavedModel has several tag-sets: {listed}")


def signature_def(meta_graph_def: meta_graph_pb2.MetaGraphDef, key: str) -> meta_graph_pb2.SignatureDef:
    """The SignatureDef ``key``, with TF's error naming the keys there are (sorted: TF lists them
    in its protobuf map's order, which changes from one process to the next)."""
    if key not in meta_graph_def.signature_def:
        raise CliError(
            f'Could not find signature "{key}". Please choose from: {", ".join(sorted(meta_graph_def.signature_def))}'
        )
    return meta_graph_def.signature_def[key]
