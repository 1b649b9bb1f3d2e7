"""Choosing the ``MetaGraphDef`` of a ``SavedModel`` by tag set.

A SavedModel holds one or more MetaGraphDefs, each labelled by ``meta_info_def.tags``
(``["serve"]``, ``["train"]``, ``["serve", "gpu"]``). A request matches a MetaGraphDef when the two
tag *sets* are equal: order and duplicates do not matter, a subset or superset does not match. The
first match in file order wins, as in TensorFlow.
"""

from __future__ import annotations

from collections.abc import Iterable

from apis.tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from runtime import errors


def tag_sets(saved_model: saved_model_pb2.SavedModel) -> list[list[str]]:
    """Each MetaGraphDef's tags, in file order."""
    return [list(mg.meta_info_def.tags) for mg in saved_model.meta_graphs]


def select_meta_graph(
    saved_model: saved_model_pb2.SavedModel, tags: Iterable[str], export_dir: str = ""
) -> meta_graph_pb2.MetaGraphDef:
    """The first MetaGraphDef whose tag set equals ``tags``; NotFoundError listing the tag sets present."""
    if isinstance(tags, str):
        tags = [tags]
    wanted = set(tags)
    for meta_graph in saved_model.meta_graphs:
        if set(meta_graph.meta_info_def.tags) == wanted:
            return meta_graph
    present = sorted({", ".join(sorted(set(t))) for t in tag_sets(saved_model)})
    listing = "\n".join(f"'{t}'" for t in present) or "(none)"
    # TensorFlow's C++ text verbatim (what TF Serving reports), then saved_model_cli's listing.
    raise errors.NotFoundError(
        None,
        None,
        f"Could not find meta graph def matching supplied tags: {{ {' '.join(sorted(wanted))} }}. "
        "To inspect available tag-sets in the SavedModel, please use the SavedModel CLI: `saved_model_cli`\n"
        f"The given SavedModel at {export_dir} contains the following tag-sets:\n{listing}",
    )
