"""What a SavedModel's saver restores: the checkpoint keys its restore op reads.

TensorFlow skips the restore when ``variables/variables.index`` is absent ("The specified
SavedModel has no variables"), so a version directory caught half-copied (``saved_model.pb``
first, as ``cp``, ``gsutil cp`` and ``rsync`` may write it) loads "successfully" and every request
then fails on uninitialised variables: TF Serving's issue "Model loaded successfully even if
variable files are absent". Reading the keys from the graph lets the loader refuse such a
version instead, and the server retry it when its files arrive.

The restore op (``saver_def.restore_op_name``) depends on ``RestoreV2`` nodes (``Restore`` and
``RestoreSlice`` in old graphs) whose ``tensor_names`` input is a Const listing the keys.
"""

from __future__ import annotations

from apis.tensorflow.core.protobuf import meta_graph_pb2

_RESTORE_OPS = {"RestoreV2": 1, "Restore": 1, "RestoreSlice": 1}  # op -> index of its key input
UNKNOWN_KEY = "<computed key>"  # a key input that is not a Const: some key, name unknown


def restored_keys(meta_graph_def: meta_graph_pb2.MetaGraphDef) -> list[str]:
    """The checkpoint keys the restore op reads, in graph order; [] without a saver."""
    restore_op = meta_graph_def.saver_def.restore_op_name
    if not restore_op:
        return []
    nodes = {node.name: node for node in meta_graph_def.graph_def.node}
    keys: list[str] = []
    seen: set[str] = set()
    stack = [_node_name(restore_op)]
    while stack:
        name = stack.pop()
        node = nodes.get(name)
        if node is None or name in seen:
            continue
        seen.add(name)
        key_input = _RESTORE_OPS.get(node.op)
        if key_input is not None and len(node.input) > key_input:
            keys.extend(_const_strings(nodes.get(_node_name(node.input[key_input]))))
        stack.extend(_node_name(i) for i in node.input)
    return keys


def _node_name(tensor: str) -> str:
    return tensor.lstrip("^").split(":")[0]


def _const_strings(node) -> list[str]:
    if node is None or node.op != "Const" or "value" not in node.attr:
        return [UNKNOWN_KEY]
    return [v.decode("utf-8", "replace") for v in node.attr["value"].tensor.string_val]
