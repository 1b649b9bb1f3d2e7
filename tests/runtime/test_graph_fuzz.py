"""Malformed graphs fail as TensorFlow fails them, and never with a plain Python error.

The cases are seeded mutations of small graphs (``tests/runtime/graph_fuzz.py``: cycles, inputs
naming no node or no output, missing attrs, a Const without value, wrong arity, duplicate and
invalid names, ...). TF's side (``tests/oracle/builders/graph_fuzz.py``) imports each with
``tf.import_graph_def`` and runs what imports. Ours must fail at the same stage with the same
class and text (TF's ``Op<...>`` summary lists the op's attrs, ours stops after the signature),
or compute the same value. A second, wider fuzz adds mutations TF is not asked about (wrong attr
kinds, unknown ops) and checks only that every outcome is a result or an OpError naming a node
or an op type.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow.core.framework import attr_value_pb2, graph_pb2
from apis.tensorflow.core.protobuf import config_pb2
from runtime import Graph, Session, errors
from runtime.kernels import kernel
from runtime.tensor_util import make_tensor_proto
from tests.oracle import cache_dir
from tests.runtime import graph_fuzz

REBUILD = "run `python -m tests.oracle build --only graph_fuzz`"
CASES = graph_fuzz.cases()


@functools.cache
def oracle() -> dict:
    path = cache_dir() / "graph_fuzz" / "results.json"
    if not path.is_file():
        pytest.fail(f"no TensorFlow results for the graph fuzz at {path}: {REBUILD}")
    data = json.loads(path.read_text())
    current = hashlib.sha256(Path(graph_fuzz.__file__).read_bytes()).hexdigest()
    if data["cases_sha256"] != current:
        pytest.fail(f"TensorFlow results in {path} are for another graph_fuzz.py: {REBUILD}")
    return data["results"]


def run_ours(case: dict) -> tuple[str, object]:
    """("import" | "run", the OpError) or ("ok", the value); any other exception escapes."""
    graph_def = graph_fuzz.to_graph_def(case["nodes"], graph_pb2, attr_value_pb2, make_tensor_proto)
    try:
        graph = Graph.from_graph_def(graph_def)
    except errors.OpError as error:
        return "import", error
    options = config_pb2.RunOptions(timeout_in_ms=graph_fuzz.RUN_TIMEOUT_MS)
    try:
        with Session(graph=graph) as session:
            return "ok", np.asarray(session.run(case["fetch"], feed_dict=case["feeds"], options=options))
    except errors.OpError as error:
        return "run", error


def assert_tf_text(ours: str, theirs: str, where: str) -> None:
    """Equal texts, except that TF's op summary may go on past ours (its attrs)."""
    if ">; NodeDef: " not in ours:
        assert ours == theirs, where
        return
    head, tail = ours.rsplit(">; NodeDef: ", 1)
    assert theirs.startswith(head) and theirs.endswith(f"; NodeDef: {tail}"), (
        f"{where}: {ours!r} vs {theirs!r}"
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['name']}-{'+'.join(c['mutations']) or 'none'}")
def test_malformed_graph_fails_as_tensorflow_fails_it(case) -> None:
    theirs = oracle()[case["name"]]
    stage, ours = run_ours(case)
    where = f"{case['name']} {case['mutations']}"
    if theirs["stage"] == "ok":
        assert stage == "ok", f"{where}: TF computed {theirs['value']}, we raised {ours!r}"
        assert ours.dtype.name == theirs["dtype"] and ours.tolist() == theirs["value"], where
        return
    assert stage == theirs["stage"], (
        f"{where}: TF failed at {theirs['stage']} ({theirs['message']}), ours: {stage} {ours!r}"
    )
    expected = (
        errors.InvalidArgumentError if theirs["class"] == "ValueError" else getattr(errors, theirs["class"])
    )
    assert isinstance(ours, expected), f"{where}: {ours!r}, TF: {theirs['class']}"
    assert_tf_text(str(ours), theirs["message"], where)


def test_the_fuzz_covers_every_mutation_and_tf_refuses_the_mutants() -> None:
    """Every mutation appears alone on every base; the unmutated bases run in TF."""
    results = oracle()
    singles = {(c["name"].split(".")[0], c["mutations"][0]) for c in CASES if len(c["mutations"]) == 1}
    assert singles == {(base, m) for base in graph_fuzz.BASES for m in graph_fuzz.MUTATIONS}
    assert all(results[c["name"]]["stage"] == "ok" for c in CASES if not c["mutations"])
    assert sum(results[c["name"]]["stage"] != "ok" for c in CASES) > 0.9 * len(CASES)


def _wrong_attr_kind(nodes: list[dict], r: random.Random) -> None:
    node = r.choice([n for n in nodes if n["attr"]])
    key = r.choice(sorted(node["attr"]))
    node["attr"][key] = r.choice([("i", 3), ("s", b"x"), ("type", 7), ("type", 99), ("f", 0.5), ("b", True)])


def _unknown_op(nodes: list[dict], r: random.Random) -> None:
    r.choice(nodes)["op"] = r.choice(["NoSuchOp", "Placeholder", "Const", "NoOp", "Identity"])


def _junk_input(nodes: list[dict], r: random.Random) -> None:
    node = r.choice(nodes)
    node["input"].append(r.choice(["^", ":", "x:-1", "x:99999999999999999999", "^x:0", "x:0:1", "é"]))


@pytest.mark.parametrize("seed", range(6))
def test_any_mutant_ends_in_a_result_or_an_op_error_naming_the_node(seed) -> None:
    mutations = {**graph_fuzz.MUTATIONS, "wrong_attr_kind": _wrong_attr_kind, "unknown_op": _unknown_op}
    mutations["junk_input"] = _junk_input
    r = random.Random(seed)
    for i in range(60):
        nodes, fetch, feeds = graph_fuzz.BASES[r.choice(sorted(graph_fuzz.BASES))]()
        for name in r.sample(sorted(mutations), r.randint(1, 4)):
            mutations[name](nodes, r)
        stage, outcome = run_ours({"nodes": nodes, "fetch": fetch, "feeds": feeds})
        if stage == "ok":
            continue
        names = {n["name"] for n in nodes} | {n["op"] for n in nodes}
        text = str(outcome)
        cycle = re.fullmatch(r"\d+ nodes in a cycle", text)
        assert cycle or any(f"'{n}'" in text or f"{{node {n}}}" in text or n in text for n in names if n), (
            f"seed {seed} case {i}: {outcome!r} names no node"
        )


@kernel("_TestFailingConstruction", per_node=True)
def _failing_construction(*, n):
    size = range(n)  # ``n`` is no int: the constructor raises TypeError
    return lambda: np.arange(len(size))


@kernel("_TestFailingConstant", constant=True)
def _failing_constant(*, value):
    return np.asarray(value).reshape(2, 3)  # one element: ValueError


@pytest.mark.parametrize("op", ["_TestFailingConstruction", "_TestFailingConstant"])
def test_a_kernel_failing_while_a_plan_is_built_fails_as_an_op_error_naming_the_node(op) -> None:
    """A kernel built per node, or a constant computed once per plan, that raises a Python error
    on a malformed node: the run fails as TF's kernel construction does, naming the node."""
    graph_def = graph_pb2.GraphDef()
    node = graph_def.node.add(name="bad", op=op)
    node.attr["n" if op.endswith("Construction") else "value"].s = b"x"
    with pytest.raises(errors.InvalidArgumentError, match=r"\[\[\{\{node bad\}\}\]\]"):
        Session(graph=Graph.from_graph_def(graph_def)).run("bad:0")
