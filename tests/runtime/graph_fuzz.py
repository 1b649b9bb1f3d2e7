"""Malformed GraphDefs, made by seeded mutations of small well-formed ones.

Plain data (numpy and the stdlib only), read by both sides: ``tests/oracle/builders/graph_fuzz.py``
imports and runs each case in TensorFlow and stores what TF did (the import's error, the run's
error or its outputs) under ``<cache>/graph_fuzz/``; ``tests/runtime/test_graph_fuzz.py`` does the
same with our Graph and Session and compares. A node is a dict ``{"name", "op", "input",
"attr"}`` whose attrs are ``(kind, value)`` pairs, so that either side builds the GraphDef with
its own protobuf modules (``to_graph_def``).

Mutations, one to three per case: a node taking its own output, a cycle through a later node,
inputs naming no node or no output, a missing attr, a Const without its value, one input too
many or too few, a duplicate name, a control input before a data input, an invalid node name, a
node without an op type.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable

import numpy as np

FLOAT, INT32 = 1, 3
FUZZ_SEED = 17
FUZZ_CASES = 240
RUN_TIMEOUT_MS = 5000  # a mutant that loops forever ends as DeadlineExceeded on both sides


def _node(name: str, op: str, inputs=(), **attrs) -> dict:
    return {"name": name, "op": op, "input": list(inputs), "attr": dict(attrs)}


def _const(name: str, value: np.ndarray, *inputs) -> dict:
    return _node(name, "Const", inputs, dtype=("type", FLOAT), value=("tensor", value))


def arithmetic() -> tuple[list[dict], str, dict]:
    nodes = [
        _node("x", "Placeholder", dtype=("type", FLOAT), shape=("shape", [2])),
        _const("c", np.array([1.5, -2.0], np.float32)),
        _node("a", "AddV2", ["x", "c"], T=("type", FLOAT)),
        _node("m", "Mul", ["a", "c"], T=("type", FLOAT)),
        _node("s", "Sum", ["m", "axis"], T=("type", FLOAT), Tidx=("type", INT32)),
        _node("axis", "Const", dtype=("type", INT32), value=("tensor", np.array(0, np.int32))),
        _node("y", "Identity", ["s"], T=("type", FLOAT)),
    ]
    return nodes, "y:0", {"x:0": np.array([1.0, 2.0], np.float32)}


def with_controls() -> tuple[list[dict], str, dict]:
    nodes = [
        _node("x", "Placeholder", dtype=("type", FLOAT)),
        _const("k", np.array(3.0, np.float32)),
        _node("d", "Sub", ["x", "k"], T=("type", FLOAT)),
        _node("n", "NoOp", ["^d"]),
        _node("p", "Pack", ["d", "k", "^n"], T=("type", FLOAT), N=("i", 2), axis=("i", 0)),
        _node("y", "Identity", ["p", "^n"], T=("type", FLOAT)),
    ]
    return nodes, "y:0", {"x:0": np.array(5.0, np.float32)}


def counting_loop() -> tuple[list[dict], str, dict]:
    """``i = 0; while i < n: i += 1``, as tf.compat.v1.while_loop writes it."""
    t = ("type", INT32)
    nodes = [
        _node("n", "Placeholder", dtype=t),
        _node("zero", "Const", dtype=t, value=("tensor", np.array(0, np.int32))),
        _node("enter_i", "Enter", ["zero"], T=t, frame_name=("s", b"L")),
        _node("enter_n", "Enter", ["n"], T=t, frame_name=("s", b"L"), is_constant=("b", True)),
        _node("merge", "Merge", ["enter_i", "next"], T=t, N=("i", 2)),
        _node("less", "Less", ["merge", "enter_n"], T=t),
        _node("cond", "LoopCond", ["less"]),
        _node("switch", "Switch", ["merge", "cond"], T=t),
        _node("body", "Identity", ["switch:1"], T=t),
        _node("one", "Const", ["^body"], dtype=t, value=("tensor", np.array(1, np.int32))),
        _node("add", "AddV2", ["body", "one"], T=t),
        _node("next", "NextIteration", ["add"], T=t),
        _node("exit", "Exit", ["switch"], T=t),
    ]
    return nodes, "exit:0", {"n:0": np.array(4, np.int32)}


BASES: dict[str, Callable[[], tuple[list[dict], str, dict]]] = {
    "arithmetic": arithmetic,
    "with_controls": with_controls,
    "counting_loop": counting_loop,
}


def _with_inputs(nodes: list[dict], r: random.Random) -> dict:
    return r.choice([n for n in nodes if n["input"]])


def self_loop(nodes: list[dict], r: random.Random) -> None:
    node = _with_inputs(nodes, r)
    node["input"][r.randrange(len(node["input"]))] = node["name"]


def cycle(nodes: list[dict], r: random.Random) -> None:
    i = r.randrange(len(nodes) - 1)
    node, later = nodes[i], nodes[r.randrange(i + 1, len(nodes))]
    node["input"].insert(0, later["name"])


def dangling_node(nodes: list[dict], r: random.Random) -> None:
    node = _with_inputs(nodes, r)
    node["input"][r.randrange(len(node["input"]))] = r.choice(["nope", "^nope", "", "x:", ":0", "a/b"])


def dangling_output(nodes: list[dict], r: random.Random) -> None:
    node = _with_inputs(nodes, r)
    source = r.choice(nodes)["name"]
    node["input"][r.randrange(len(node["input"]))] = f"{source}:{r.choice([1, 2, 7])}"


def missing_attr(nodes: list[dict], r: random.Random) -> None:
    node = r.choice([n for n in nodes if n["attr"]])
    del node["attr"][r.choice(sorted(node["attr"]))]


def const_without_value(nodes: list[dict], r: random.Random) -> None:
    r.choice([n for n in nodes if n["op"] == "Const"])["attr"].pop("value", None)


def extra_input(nodes: list[dict], r: random.Random) -> None:
    node = r.choice([n for n in nodes if n["op"] not in ("NoOp", "Const")])
    data = [t for t in node["input"] if not t.startswith("^")]
    node["input"].insert(len(data), r.choice(data or [nodes[0]["name"]]))


def missing_input(nodes: list[dict], r: random.Random) -> None:
    node = r.choice([n for n in nodes if any(not t.startswith("^") for t in n["input"])])
    data = [i for i, t in enumerate(node["input"]) if not t.startswith("^")]
    del node["input"][r.choice(data)]


def duplicate_name(nodes: list[dict], r: random.Random) -> None:
    nodes.insert(r.randrange(len(nodes) + 1), copy.deepcopy(r.choice(nodes)))


def control_first(nodes: list[dict], r: random.Random) -> None:
    node = _with_inputs(nodes, r)
    node["input"].insert(0, "^" + r.choice(nodes)["name"])


def bad_name(nodes: list[dict], r: random.Random) -> None:
    r.choice(nodes)["name"] = r.choice(["", "a:0", "^b", "-x", "a b", "/lead"])


def no_op_type(nodes: list[dict], r: random.Random) -> None:
    r.choice(nodes)["op"] = ""


MUTATIONS: dict[str, Callable[[list[dict], random.Random], None]] = {
    f.__name__: f
    for f in (
        self_loop, cycle, dangling_node, dangling_output, missing_attr, const_without_value,
        extra_input, missing_input, duplicate_name, control_first, bad_name, no_op_type,
    )
}  # fmt: skip


def cases(count: int = FUZZ_CASES, seed: int = FUZZ_SEED) -> list[dict]:
    """``{"name", "mutations", "nodes", "fetch", "feeds"}``: every base unmutated, then ``count``
    seeded mutants (every mutation alone first, then random pairs and triples)."""
    r = random.Random(seed)
    out = []
    plans = [[] for _ in BASES] + [[m] for m in MUTATIONS for _ in BASES]
    while len(plans) < count:
        plans.append(r.sample(sorted(MUTATIONS), r.randint(1, 3)))
    for i, mutations in enumerate(plans):
        base = list(BASES)[i % len(BASES)]
        nodes, fetch, feeds = BASES[base]()
        for name in mutations:
            MUTATIONS[name](nodes, r)
        out.append(
            {
                "name": f"{base}.{i:03d}",
                "mutations": mutations,
                "nodes": nodes,
                "fetch": fetch,
                "feeds": feeds,
            }
        )
    return out


def to_graph_def(nodes: list[dict], graph_pb2, attr_value_pb2, make_tensor_proto):
    """The GraphDef of ``nodes``, built with the caller's protobuf modules."""
    graph_def = graph_pb2.GraphDef()
    for node in nodes:
        proto = graph_def.node.add(name=node["name"], op=node["op"], input=node["input"])
        for key, (kind, value) in node["attr"].items():
            attr = attr_value_pb2.AttrValue()
            if kind == "tensor":
                attr.tensor.CopyFrom(make_tensor_proto(value))
            elif kind == "shape":
                for size in value:
                    attr.shape.dim.add().size = size
            else:
                setattr(attr, kind, value)
            proto.attr[key].CopyFrom(attr)
    return graph_def
