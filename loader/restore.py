"""What a SavedModel's saver restores: the checkpoint keys its restore op reads.

TensorFlow skips the restore when ``variables/variables.index`` is absent ("The specified
SavedModel has no variables"), so a version directory caught half-copied (``saved_model.pb``
first, as ``cp``, ``gsutil cp`` and ``rsync`` may write it) loads "successfully" and every request
then fails on uninitialised variables: TF Serving's issue "Model loaded successfully even if
variable files are absent". Reading the keys from the graph lets the loader refuse such a
version instead, and the server retry it when its files arrive.

The restore op (``saver_def.restore_op_name``) depends on ``RestoreV2`` nodes (``Restore`` and
``RestoreSlice`` in old graphs) whose ``tensor_names`` input is a Const listing the keys: in the
graph (TF1), or in the restore function the restore op calls (TF2).

``DirectRestore``: the restore function ``tf.saved_model.save`` writes, run by its kernels without
planning its graph (a start's largest single cost after imports).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apis.tensorflow.core.protobuf import meta_graph_pb2
from runtime import tensor_util

_RESTORE_OPS = {"RestoreV2": 1, "Restore": 1, "RestoreSlice": 1}  # op -> index of its key input
UNKNOWN_KEY = "<computed key>"  # a key input that is not a Const: some key, name unknown


def restored_keys(meta_graph_def: meta_graph_pb2.MetaGraphDef) -> list[str]:
    """The checkpoint keys the restore op reads, in graph order; [] without a saver. The restore
    op and what it depends on in the graph, and every function they call (``tf.saved_model.save``
    restores in a library function called by ``StatefulPartitionedCall``), nested calls too."""
    restore_op = meta_graph_def.saver_def.restore_op_name
    if not restore_op:
        return []
    library = {f.signature.name: f for f in meta_graph_def.graph_def.library.function}
    nodes = {node.name: node for node in meta_graph_def.graph_def.node}
    keys: list[str] = []
    seen: set[str] = set()
    called: list[str] = []
    stack = [_node_name(restore_op)]
    while stack:
        name = stack.pop()
        node = nodes.get(name)
        if node is None or name in seen:
            continue
        seen.add(name)
        keys.extend(_keys_of(node, nodes))
        called.extend(_functions(node))
        stack.extend(_node_name(i) for i in node.input)
    done: set[str] = set()
    while called:
        function = library.get(called.pop())
        if function is None or function.signature.name in done:
            continue
        done.add(function.signature.name)
        body = {node.name: node for node in function.node_def}
        for node in function.node_def:
            keys.extend(_keys_of(node, body))
            called.extend(_functions(node))
    return keys


def _keys_of(node, nodes: dict) -> list[str]:
    """The keys a restore op reads (its key input's Const), [] for any other op."""
    key_input = _RESTORE_OPS.get(node.op)
    if key_input is None or len(node.input) <= key_input:
        return []
    return _const_strings(nodes.get(_node_name(node.input[key_input])))


def _functions(node) -> list[str]:
    """The library functions ``node``'s attrs name (a call's ``f``, a loop's ``cond``/``body``)."""
    names = []
    for value in node.attr.values():
        if value.WhichOneof("value") == "func":
            names.append(value.func.name)
        elif value.WhichOneof("value") == "list":
            names.extend(f.name for f in value.list.func)
    return names


def _node_name(tensor: str) -> str:
    return tensor.lstrip("^").split(":")[0]


def _const_strings(node) -> list[str]:
    if node is None or node.op != "Const" or "value" not in node.attr:
        return [UNKNOWN_KEY]
    return [v.decode("utf-8", "replace") for v in node.attr["value"].tensor.string_val]


def uninitialized_variables(sess, served) -> list[str]:
    """The variables the ``served`` signatures ((feeds, fetches) tensor names) read that hold no
    value after restore and init: a version that would fail every request with "Could not find
    variable" (a TF2 export whose restore read nothing) is refused at load instead. Resource
    variables (``VarHandleOp``, handles passed into the functions that read them) and ref
    variables (``VariableV2``) of the graph, as the Session's resource manager keys them."""
    from runtime.kernels import resources as resource_lib  # (the runtime core: loaded by the load)
    from runtime.kernels.state_ops import LEGACY_VAR_KIND

    graph = sess.graph
    kinds = {"VarHandleOp": resource_lib.VAR_KIND, "VariableV2": LEGACY_VAR_KIND, "Variable": LEGACY_VAR_KIND}
    missing: list[str] = []
    seen: set = set()
    for feeds, fetches in served:
        fed = {graph.get_tensor_by_name(t).op for t in feeds}
        stack = [graph.as_graph_element(name).op for name in fetches]
        while stack:
            op = stack.pop()
            if op in seen or op in fed:
                continue
            seen.add(op)
            kind = kinds.get(op.type)
            if kind is not None:
                container, name = resource_lib.resource_key(
                    op.attrs.get("container", ""), op.attrs.get("shared_name", ""), op.name
                )
                var = sess.resources.get(resource_lib.ResourceHandle(container, name, kind))
                if name != resource_lib.ANONYMOUS_NAME and (var is None or not var.is_initialized):
                    missing.append(name)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    return missing


# -- the restore function, run without planning it --------------------------------------------

_CALLS = ("StatefulPartitionedCall", "PartitionedCall")
_RESTORE_BODY_OPS = frozenset({"Const", "RestoreV2", "Identity", "AssignVariableOp", "NoOp"})


@dataclass(frozen=True)
class DirectRestore:
    """What ``tf.saved_model.save``'s restore function does, done without planning it.

    That function is one ``RestoreV2`` of every variable, then per variable an ``Identity`` and an
    ``AssignVariableOp`` of a handle argument: ~800 nodes whose instantiation and plan cost a
    start ~100 ms for a few hundred reads and assigns. ``of`` recognizes exactly that body (any
    other op, a slice, an attr placeholder: None) and ``run`` calls the same kernels, so values and
    checks are the graph's own; a failure falls back to running the restore op, which gives TF's
    error (``loader.bundle.restore_variables``). Tested against that run on the whole corpus.
    """

    call: object  # the restore op (a runtime Operation)
    names: np.ndarray  # RestoreV2's tensor_names and shape_and_slices, dtypes
    slices: np.ndarray
    dtypes: list
    assigns: tuple  # (the call's input of the handle, RestoreV2's output index, the assign's dtype)

    @classmethod
    def of(cls, graph, saver_def) -> DirectRestore | None:
        """The restore op's work where its body has that shape, else None."""
        try:
            call = graph.get_operation_by_name(_node_name(saver_def.restore_op_name))
        except (KeyError, ValueError):
            return None
        fdef = graph.functions.get(call.attrs["f"].name) if call.type in _CALLS else None
        if fdef is None or not fdef.signature.input_arg or len(call.inputs) != len(fdef.signature.input_arg):
            return None
        if call.inputs[0].name != saver_def.filename_tensor_name:
            return None
        args = {arg.name: i for i, arg in enumerate(fdef.signature.input_arg)}
        nodes = {node.name: node for node in fdef.node_def}
        restores = [node for node in fdef.node_def if node.op == "RestoreV2"]
        if len(restores) != 1 or any(
            node.op not in _RESTORE_BODY_OPS or any(v.placeholder for v in node.attr.values())
            for node in fdef.node_def
        ):
            return None
        restore = restores[0]
        if len(restore.input) != 3 or args.get(restore.input[0]) != 0:
            return None
        names, slices = (_body_const(nodes, text) for text in restore.input[1:])
        if names is None or slices is None or any(s for s in slices.reshape(-1)):
            return None
        read = f"{restore.name}:tensors:"
        reads = {  # Identity -> the RestoreV2 output it passes on
            node.name: int(node.input[0][len(read) :])
            for node in fdef.node_def
            if node.op == "Identity" and node.input and node.input[0].startswith(read)
        }
        assigns = []
        for node in fdef.node_def:
            if node.op != "AssignVariableOp":
                continue
            data = [text for text in node.input if not text.startswith("^")]
            if len(data) != 2:
                return None
            handle, value = data
            source = value[: -len(":output:0")] if value.endswith(":output:0") else None
            if args.get(handle, 0) == 0 or source not in reads:
                return None
            assigns.append((args[handle], reads[source], node.attr["dtype"].type))
        return cls(call, names, slices, list(restore.attr["dtypes"].list.type), tuple(assigns))

    def run(self, sess, prefix: str) -> None:
        """Reads every tensor, then assigns the variables, with the kernels of those ops."""
        from runtime.execution.plan import OpContext
        from runtime.kernels.registry import lookup

        needed = sorted({j for j, _, _ in self.assigns})
        handles = dict(zip(needed, _handles(sess, [self.call.inputs[j] for j in needed])))
        file_prefix = np.array(prefix.encode("utf-8", "surrogateescape"), dtype=object)
        values = lookup("RestoreV2").fn(file_prefix, self.names, self.slices, dtypes=self.dtypes)
        assign, ctx = lookup("AssignVariableOp").fn, OpContext(self.call, sess.resources, None)
        for j, k, dtype in self.assigns:
            assign(handles[j], values[k], dtype=dtype, ctx=ctx)


def _handles(sess, tensors: list) -> list:
    """The variable handles the restore function is called with: each ``VarHandleOp``'s kernel
    called on its node where every one is such an op of its own (a plan of a few hundred handle
    ops cost more than reading the checkpoint), else the graph run for them."""
    from runtime.execution.plan import call_kernel

    ops = [tensor.op for tensor in tensors]
    if any(op.type != "VarHandleOp" or op.node_def.input or t.value_index for op, t in zip(ops, tensors)):
        return sess.run(tensors) if tensors else []
    return [call_kernel(op, [], sess.resources) for op in ops]


def _body_const(nodes: dict, text: str) -> np.ndarray | None:
    """The value of a function body's Const read as ``name:output:0``, or None."""
    node = nodes.get(text[: -len(":output:0")]) if text.endswith(":output:0") else None
    if node is None or node.op != "Const" or "value" not in node.attr:
        return None
    return tensor_util.make_ndarray(node.attr["value"].tensor)
