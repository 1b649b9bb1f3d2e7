"""``show``: tag-sets, SignatureDef keys, a SignatureDef's inputs and outputs, ops, ``--all``.

Line for line TF's ``saved_model_cli show`` (TF 2.21; 2.15 prints the same). Where TF prints a
Python set (the ops of a MetaGraph), TF's order is that of a ``set`` of strings, which changes with
the interpreter's hash seed; ours is sorted, so the line is the same set in a fixed order.
"""

from __future__ import annotations

from apis.tensorflow.core.framework import graph_pb2, types_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from serving.saved_model_cli import concrete_functions, reading


def show_tag_sets(saved_model: saved_model_pb2.SavedModel) -> None:
    print("The given SavedModel contains the following tag-sets:")
    for tags in sorted(list(m.meta_info_def.tags) for m in saved_model.meta_graphs):
        print(repr(", ".join(sorted(tags))))


def show_signature_def_keys(meta_graph_def: meta_graph_pb2.MetaGraphDef) -> None:
    print("The given SavedModel MetaGraphDef contains SignatureDefs with the following keys:")
    for key in sorted(meta_graph_def.signature_def):
        print(f'SignatureDef key: "{key}"')


def show_inputs_outputs(meta_graph_def: meta_graph_pb2.MetaGraphDef, key: str, indent: int = 0) -> None:
    """A SignatureDef's TensorInfos, sorted by key, and its method name."""
    signature = reading.signature_def(meta_graph_def, key)
    pad = "  " * indent
    print(pad + "The given SavedModel SignatureDef contains the following input(s):")
    for name, info in sorted(signature.inputs.items()):
        print(pad + f"  inputs['{name}'] tensor_info:")
        _print_tensor_info(info, indent + 1)
    print(pad + "The given SavedModel SignatureDef contains the following output(s):")
    for name, info in sorted(signature.outputs.items()):
        print(pad + f"  outputs['{name}'] tensor_info:")
        _print_tensor_info(info, indent + 1)
    print(pad + f"Method name is: {signature.method_name}")


def _print_tensor_info(info: meta_graph_pb2.TensorInfo, indent: int) -> None:
    pad = "  " * indent
    print(pad + "    dtype: " + types_pb2.DataType.Name(info.dtype))
    if info.tensor_shape.unknown_rank:
        shape = "unknown_rank"
    else:
        shape = "(" + ", ".join(str(d.size) for d in info.tensor_shape.dim) + ")"
    print(pad + "    shape: " + shape)
    print(pad + "    name: " + info.name)


def ops_used_by_graph_def(graph_def: graph_pb2.GraphDef) -> set[str]:
    """The op types TF's ``meta_graph.ops_used_by_graph_def`` lists: the graph's, and those of the
    functions it calls as an op type or through a (Stateful)PartitionedCall's ``f`` -- not the
    branches and bodies of If and While, which TF does not follow either."""
    library = {f.signature.name: f for f in graph_def.library.function}
    used: set[str] = set()
    pending = []

    def mark(op: str) -> None:
        if op not in used and op in library:
            pending.append(library[op])
        used.add(op)

    def visit(node) -> None:
        mark(node.op)
        if node.op in ("PartitionedCall", "StatefulPartitionedCall"):
            mark(node.attr["f"].func.name)

    for node in graph_def.node:
        visit(node)
    while pending:
        for node in pending.pop().node_def:
            visit(node)
    return {op for op in used if op not in library}


def show_ops(meta_graph_def: meta_graph_pb2.MetaGraphDef) -> None:
    ops = sorted(ops_used_by_graph_def(meta_graph_def.graph_def))
    shown = "{" + ", ".join(repr(op) for op in ops) + "}" if ops else "set()"
    tags = list(meta_graph_def.meta_info_def.tags)
    print(f"The MetaGraph with tag set {tags} contains the following ops: {shown}")


def show_all(saved_model: saved_model_pb2.SavedModel, export_dir: str) -> None:
    """Every MetaGraphDef (sorted by tags): its SignatureDefs and ops; then the object graph's
    functions, as far as they can be read without TensorFlow (``concrete_functions``)."""
    for meta_graph_def in sorted(saved_model.meta_graphs, key=lambda m: list(m.meta_info_def.tags)):
        tags = ", ".join(meta_graph_def.meta_info_def.tags)
        print(f"\nMetaGraphDef with tag-set: '{tags}' contains the following SignatureDefs:")
        for key in sorted(meta_graph_def.signature_def):
            print(f"\nsignature_def['{key}']:")
            show_inputs_outputs(meta_graph_def, key, indent=1)
        show_ops(meta_graph_def)
    concrete_functions.show_defined_functions(saved_model)


def show(args) -> int:
    """TF's ``show``: ``--all``; else tag-sets, or with ``--tag_set`` the keys, one SignatureDef,
    and ``--list_ops``. ``--graph KEY --output FILE`` (ours) draws a signature instead."""
    saved_model = reading.read(args.dir)
    if args.graph is not None:
        from serving.saved_model_cli import graph_picture  # the drawing's imports, only when asked

        return graph_picture.draw(args, saved_model)
    if args.all:
        show_all(saved_model, args.dir)
        return 0
    if args.tag_set is None:
        if args.list_ops:
            print("--list_ops must be paired with a tag-set or with --all.")
        show_tag_sets(saved_model)
        return 0
    if args.list_ops:
        show_ops(reading.meta_graph(saved_model, args.tag_set))
    if args.signature_def is None:  # TF 2.21 trims the tags everywhere but here
        show_signature_def_keys(reading.meta_graph(saved_model, args.tag_set, strip=False))
    else:
        show_inputs_outputs(reading.meta_graph(saved_model, args.tag_set), args.signature_def)
    return 0
