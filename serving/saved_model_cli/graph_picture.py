"""``show --graph KEY --output FILE``: a picture of where each op of a signature runs.

The signature's ops, as the delegated Session runs them (``placement``), drawn with Graphviz:
each onnxruntime cluster is a coloured box (Graphviz's ``cluster`` subgraph, titled with its name,
op count and share of the signature's estimated FLOPs) holding its member ops; each op left on the
numpy kernels is named (op name and type), red when it computes and why it stayed native shows
on hover (its SVG ``<title>``); bookkeeping ops (identities, variable reads) are small and grey,
constants are left out. Inputs and outputs are the signature's keys.

``FILE``'s suffix picks the format: ``.dot``/``.gv`` writes the DOT source (no program needed),
``.svg``/``.png``/``.pdf`` run Graphviz's ``dot`` through the ``graphviz`` package (the
``graph`` extra). The layout is Graphviz's: it keeps clusters contiguous, which a hand-rolled
layered layout would not.
"""

from __future__ import annotations

import logging
import os

from apis.tensorflow.core.framework import graph_pb2
from loader import load_saved_model
from runtime.execution import signature_check
from runtime.graph.op_def import parse_input
from serving.saved_model_cli import placement, reading
from serving.saved_model_cli.errors import CliError
from serving.saved_model_cli.placement import CLUSTER_OP

FORMATS = ("svg", "png", "pdf", "dot", "gv")
_CLUSTER_COLOURS = ("#cfe8fc", "#d5f5d5", "#fde9c4", "#e6dcf7", "#d2f2ef", "#f9d9e8")
_NATIVE_COLOUR, _MISSING_COLOUR, _QUIET_COLOUR = "#fbd3cf", "#ff6b5e", "#f0f0f0"
_NEEDS_DOT = (
    "drawing a .{fmt} needs Graphviz's 'dot' program (Debian/Ubuntu: apt-get install graphviz; "
    "macOS: brew install graphviz); --output FILE.dot writes the DOT source without it"
)


def draw(args, saved_model) -> int:
    """Loads the MetaGraphDef, places the signature's ops and writes the picture to --output."""
    if not args.output:
        raise CliError("--graph needs --output FILE (.svg, .png, .pdf, or .dot for the DOT source)")
    fmt = os.path.splitext(args.output)[1].lstrip(".").lower()
    if fmt not in FORMATS:
        raise CliError(
            f"--output {args.output}: the suffix must be one of {', '.join('.' + f for f in FORMATS)}"
        )
    meta_graph_def = reading.only_meta_graph(saved_model, args.tag_set, "--graph")
    signature = reading.signature_def(meta_graph_def, args.graph)
    tags = list(meta_graph_def.meta_info_def.tags)
    missing = signature_check.unavailable_signatures(meta_graph_def).get(args.graph)
    logging.getLogger("loader").setLevel(logging.ERROR)  # its warnings are for a server's log
    bundle = load_saved_model(args.dir, tags, delegation=bool(args.onnx_delegation))
    try:
        where = placement.place(bundle.session, signature)
        dot = build(args.graph, tags, signature, where, missing.counts if missing else {})
    finally:
        bundle.close()
    _write(dot, fmt, args.output)
    print(
        f"Wrote the graph of signature_def['{args.graph}'] to {args.output}: {len(where.clusters)} onnxruntime "
        f"cluster(s), {len(where.native)} native op(s), {100 * where.flops_share:.1f}% of estimated FLOPs "
        "in onnxruntime"
    )
    return 0


def _graphviz():
    try:
        import graphviz
    except ImportError:
        raise CliError(
            "drawing needs the 'graphviz' Python package: pip install 'savedmodel-server[graph]'"
        ) from None
    return graphviz


def _write(dot, fmt: str, path: str) -> None:
    graphviz = _graphviz()
    if fmt in ("dot", "gv"):
        data = dot.source.encode()
    else:
        try:
            data = dot.pipe(format=fmt)
        except graphviz.ExecutableNotFound:
            raise CliError(_NEEDS_DOT.format(fmt=fmt)) from None
    with open(path, "wb") as f:
        f.write(data)


def build(key: str, tags: list[str], signature, where: placement.SignaturePlacement, missing: dict):
    """The ``graphviz.Digraph`` of one signature's placement; ``missing``: op type -> count of
    the op types it needs that the runtime lacks (drawn red where they are graph nodes)."""
    graphviz = _graphviz()
    share = 100 * where.flops_share
    title = (
        f"signature_def['{key}'] (tag-set '{', '.join(tags)}'): {len(where.clusters)} onnxruntime cluster(s), "
        f"{where.delegated_ops} ops, {share:.1f}% of estimated FLOPs; {len(where.native)} native op(s)"
    )
    if missing:
        title += "\nCANNOT RUN HERE: op types not supported: " + ", ".join(
            f"{t} (x{n})" for t, n in sorted(missing.items())
        )
    dot = graphviz.Digraph(
        name=f"signature_def[{key}]",
        graph_attr={"label": title, "labelloc": "t", "fontname": "Helvetica", "rankdir": "TB"},
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica", "fontsize": "10"},
        edge_attr={"arrowsize": "0.6"},
    )
    drawn: set[str] = set()
    edges: list[tuple[str, str]] = []
    total = sum(c.flops for c in where.clusters) + sum(op.flops for op in where.native)
    for key_in, info in sorted(signature.inputs.items()):
        node = info.name.split(":")[0]
        dot.node(node, f"inputs['{key_in}']\n{info.name}", shape="ellipse", fillcolor="white")
        drawn.add(node)
    native = {op.name: op for op in where.native}
    colours = iter(_CLUSTER_COLOURS * (1 + len(where.clusters) // len(_CLUSTER_COLOURS)))
    summaries = {c.name: c for c in where.clusters}
    for op in where.ops:
        if op.type == CLUSTER_OP:
            _draw_cluster(dot, op, summaries.get(op.name), next(colours), total, drawn, edges)
        elif op.type != "Const" and not placement.is_shim(op):
            _draw_native(dot, op, native.get(op.name), missing)
            drawn.add(op.name)
            edges += [(source, op.name) for source in map(_source, op.inputs) if source]
    for key_out, info in sorted(signature.outputs.items()):
        node = f"outputs['{key_out}']"
        dot.node(node, f"{node}\n{info.name}", shape="ellipse", fillcolor="white")
        edges.append((_producer(where.ops, info.name), node))
    for source, target in dict.fromkeys(edges):
        if source in drawn:
            dot.edge(source, target)
    return dot


def _draw_native(dot, op, native: placement.NativeOp | None, missing: set[str]) -> None:
    if op.type in missing:
        dot.node(
            op.name,
            f"{op.name}\n{op.type}",
            fillcolor=_MISSING_COLOUR,
            tooltip="not supported here",
            penwidth="2",
        )
    elif native is not None:
        tip = f"{op.type} runs natively: {native.why}" + (
            f" ({native.flops:.3g} FLOPs)" if native.flops else ""
        )
        dot.node(op.name, f"{op.name}\n{op.type}", fillcolor=_NATIVE_COLOUR, tooltip=tip)
    else:
        quiet = op.type in placement.onnx_module("cost").BOOKKEEPING or op.type == "NoOp"
        dot.node(op.name, op.type, fillcolor=_QUIET_COLOUR, fontsize="8" if quiet else "10", tooltip=op.name)


def _draw_cluster(dot, op, summary, colour: str, total: float, drawn: set, edges: list) -> None:
    """A cluster subgraph of the members the ``_OrtCluster`` node carries, wired to its inputs."""
    sub = graph_pb2.GraphDef.FromString(op.node_def.attr["subgraph"].s)
    members = {n.decode() for n in op.node_def.attr["ops"].list.s}
    inputs = dict(zip((n.decode() for n in op.node_def.attr["input_names"].list.s), op.inputs))
    flops = summary.flops if summary is not None else op.node_def.attr["flops"].f
    share = f", {100 * flops / total:.1f}% of FLOPs" if total else ""
    with dot.subgraph(name=f"cluster_{op.name}") as box:
        box.attr(
            label=f"{op.name} (onnxruntime): {len(members)} ops{share}",
            style="filled,rounded",
            fillcolor=colour,
            color="#5b7fa6",
            fontname="Helvetica",
        )
        for node in sub.node:
            if node.name not in members:
                continue
            box.node(node.name, node.op, fillcolor="white", tooltip=f"{node.name} ({node.op}) in {op.name}")
            drawn.add(node.name)
            for text in node.input:
                source, _, control = parse_input(text)
                if control:
                    continue
                if source in members:
                    edges.append((source, node.name))
                elif source in inputs:
                    outside = _source(inputs[source])
                    if outside:
                        edges.append((outside, node.name))


def _source(tensor) -> str | None:
    """The drawn node a tensor comes from: a cluster output's member, None for constants."""
    op = tensor.op
    if op.type == "Const":
        return None
    if op.type == CLUSTER_OP:
        return op.node_def.attr["output_names"].list.s[tensor.value_index].decode().split(":")[0]
    return op.name


def _producer(ops, tensor_name: str) -> str:
    """The drawn node of an output tensor: a shim's member, else the op itself."""
    name, _, index = tensor_name.partition(":")
    for op in ops:
        if op.name == name and placement.is_shim(op):
            return _source(op.inputs[int(index or 0)]) or name
    return name
