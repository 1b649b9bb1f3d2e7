"""tf.Example parsing (ParseExample, ParseExampleV2, ParseSingleExample), DecodeRaw, StringToNumber
against TensorFlow's outputs and error texts, plus the helpers the other breadth tests share.

TF's side: ``tests/oracle/builders/breadth_records.py`` (``python -m tests.oracle build --only
breadth_records``). Every record runs twice: through the kernel (inputs read back from the cache,
attrs decoded from the NodeDef TF built) and as TF's one-node GraphDef through ``runtime.Session``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2
from runtime import Graph, Session, dtypes, errors, kernels
from runtime import attrs as attr_lib
from tests.oracle import cache_dir
from tests.runtime import breadth_records
from tests.runtime.op_records import DType
from tests.runtime.test_op_records import BUILD_ERRORS, assert_same, read_tensor

REBUILD = "run `python -m tests.oracle build --force --only breadth_records`"

# Errors whose text cannot be TF's (every other error must match TF's message exactly).
MESSAGE_DIFFERENCES = {
    "RegexReplace.b002": "Python's re words pattern errors differently from RE2",
    "StringToHashBucketFast.b003": "TF rejects num_buckets=0 when building the graph, in Python",
    # StringJoin's kernel is the loader's (runtime/kernels/io_ops.py); TF says "[2] vs. [3]".
    "StringJoin.b003": "io_ops.StringJoin prints the shapes as Python tuples",
}


def records_dir() -> Path:
    return cache_dir() / "breadth_records"


@functools.cache
def oracle() -> dict:
    path = records_dir() / "records.json"
    if not path.is_file():
        pytest.fail(f"no TensorFlow outputs for breadth records at {path}: {REBUILD}")
    data = json.loads(path.read_text())
    current = hashlib.sha256(Path(breadth_records.__file__).read_bytes()).hexdigest()
    if data.get("records_sha256") != current:
        pytest.fail(f"TensorFlow outputs in {path} are for another version of breadth_records.py: {REBUILD}")
    return data


def records_of(*modules: str, ops: tuple[str, ...] = ()) -> list:
    """The records whose kernel lives in one of ``modules`` (e.g. "string_ops"), or whose op is in ``ops``."""
    chosen = []
    for record in breadth_records.RECORDS:
        definition = kernels.lookup(record.op)
        module = definition.fn.__module__.rsplit(".", 1)[-1] if definition else None
        if module in modules or record.op in ops:
            chosen.append(record)
    return chosen


def _node_attrs(name: str) -> dict:
    graph = graph_pb2.GraphDef()
    graph.ParseFromString((records_dir() / "records" / name / "graph.pb").read_bytes())
    (node,) = [n for n in graph.node if n.name == "op"]
    return attr_lib.decode_attrs(node.attr)


def _kernel_inputs(record, entry) -> list:
    folder = records_dir() / "records" / record.name
    count = sum(len(v) if isinstance(v, list) else 1 for v in record.inputs)
    flat = [read_tensor(folder / f"in_{i}.pb") for i in range(count)]
    if "args" not in entry:
        out, i = [], 0
        for value in record.inputs:
            n = len(value) if isinstance(value, list) else 1
            out.append(flat[i : i + n] if isinstance(value, list) else flat[i])
            i += n
        return out
    return [
        [flat[i] for i in indices] if is_list else flat[indices[0]]
        for indices, is_list in zip(entry["args"], entry["list_args"])
    ]


def _record_attrs(record) -> dict:
    def value(v):
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, DType):
            return next(e for e in range(1, 24) if dtypes.is_supported(e) and dtypes.name(e) == v)
        return v

    return {k: value(v) for k, v in record.attrs.items()}


def check_record(record) -> None:
    entry = oracle()["records"].get(record.name)
    if entry is None:
        pytest.fail(f"{record.name} has no TensorFlow result: {REBUILD}")
    definition = kernels.lookup(record.op)
    assert definition is not None, f"no kernel registered for {record.op}"
    attrs = _node_attrs(record.name) if "args" in entry else _record_attrs(record)
    attrs = definition.select_attrs(attrs)
    if definition.needs_context:
        attrs["ctx"] = None
    error = entry.get("error")
    if error is not None:
        expected = BUILD_ERRORS.get(error["class"]) or getattr(errors, error["class"])
        with pytest.raises(errors.OpError) as raised:
            definition.fn(*_kernel_inputs(record, entry), **attrs)
        assert type(raised.value) is expected, (
            f"{record.name}: raised {type(raised.value).__name__}({raised.value}), TF raised "
            f"{error['class']}({error['message']})"
        )
        if record.name not in MESSAGE_DIFFERENCES:
            assert str(raised.value) == error["message"], f"{record.name}: TF's message differs"
        return
    results = definition.fn(*_kernel_inputs(record, entry), **attrs)
    results = results if isinstance(results, tuple) else (results,)
    folder = records_dir() / "records" / record.name
    assert len(results) == len(entry["outputs"]), f"{record.name}: {len(results)} outputs"
    for index, path in enumerate(entry["outputs"]):
        if record.compare is None or index in record.compare:
            assert_same(results[index], read_tensor(folder / path), record, index)


def check_record_through_session(record) -> None:
    entry = oracle()["records"].get(record.name)
    if entry is None:
        pytest.fail(f"{record.name} has no TensorFlow result: {REBUILD}")
    if "args" not in entry:
        assert entry["error"]["stage"] == "build"
        return
    folder = records_dir() / "records" / record.name
    graph_def = graph_pb2.GraphDef.FromString((folder / "graph.pb").read_bytes())
    count = sum(len(indices) for indices in entry["args"])
    feeds = {f"in_{i}:0": read_tensor(folder / f"in_{i}.pb") for i in range(count)}
    graph = Graph.from_graph_def(graph_def)
    outputs = entry.get("outputs")
    n_out = len(outputs) if outputs is not None else graph.get_operation_by_name("op").num_outputs
    fetches = [f"op:{i}" for i in range(n_out)]
    with Session(graph=graph) as session:
        if "error" in entry:
            with pytest.raises(errors.OpError) as raised:
                session.run(fetches, feed_dict=feeds)
            assert type(raised.value) is getattr(errors, entry["error"]["class"])
            return
        results = session.run(fetches, feed_dict=feeds)
    for index, path in enumerate(outputs):
        if record.compare is None or index in record.compare:
            assert_same(_as_fetched(results[index]), read_tensor(folder / path), record, index)


def _as_fetched(value):
    """A fetched string scalar comes back as bytes (as from TF's Session); compare as TF's array."""
    array = np.asarray(value)
    return array.astype(object) if array.dtype.kind == "S" else array


class _Scenario:
    """Stands in for an OpRecord in ``assert_same``'s messages and tolerances."""

    def __init__(self, name: str):
        self.name = name
        self.rtol = self.atol = None


def check_scenario(name: str) -> None:
    entry = oracle()["scenarios"].get(name)
    if entry is None:
        pytest.fail(f"scenario {name} has no TensorFlow result: {REBUILD}")
    folder = records_dir() / "scenarios" / name
    graph = Graph.from_graph_def(graph_pb2.GraphDef.FromString((folder / "graph.pb").read_bytes()))
    paths = {
        t: np.array(str((folder / f).resolve()).encode(), dtype=object)
        for t, f in entry["path_feeds"].items()
    }
    feeds = {t: read_tensor(folder / f) for t, f in entry["feeds"].items()}
    with Session(graph=graph) as session:
        stage = "init"
        try:
            for op in entry["init"]:
                session.run(op, feed_dict=paths)
            stage = "run"
            results = session.run(entry["fetches"], feed_dict={**feeds, **paths})
        except errors.OpError as raised:
            error = entry.get("error")
            assert error is not None, f"{name}: raised {raised!r} at {stage}; TF succeeded"
            assert (type(raised).__name__, stage) == (error["class"], error["stage"]), f"{name}: {raised!r}"
            expected = error["message"].replace("{folder}", str(folder.resolve()))
            assert re.sub(r"\s*\[\[\{\{node .*", "", str(raised), flags=re.S) == expected, name
            return
    assert "error" not in entry, f"{name}: TF raised {entry['error']}, we did not"
    for index, path in enumerate(entry["outputs"]):
        assert_same(_as_fetched(results[index]), read_tensor(folder / path), _Scenario(name), index)


# --------------------------------------------------------------------------------- tests

PARSING = records_of("parsing_ops")


@pytest.mark.parametrize("record", PARSING, ids=lambda r: r.name)
def test_parsing_record(record) -> None:
    check_record(record)


@pytest.mark.parametrize("record", PARSING, ids=lambda r: r.name)
def test_parsing_record_through_session(record) -> None:
    check_record_through_session(record)


def test_parsing_records_cover_the_ops() -> None:
    ops = {r.op for r in PARSING}
    wanted = {
        "ParseExample",
        "ParseExampleV2",
        "ParseSingleExample",
        "DecodeRaw",
        "StringToNumber",
        "ParseTensor",
    }
    assert wanted | {"DecodeCSV", "ParseSequenceExampleV2"} <= ops


def test_scenario_parse_then_lookup_feature_column() -> None:
    check_scenario("parse_then_lookup_feature_column")


def test_example_encoder_matches_the_generated_classes() -> None:
    from apis.tensorflow.core.example import example_pb2

    parsed = example_pb2.Example.FromString(breadth_records.ex(a=1.5, b=[1, 2], c=["x"]))
    features = parsed.features.feature
    assert list(features["a"].float_list.value) == [1.5]
    assert list(features["b"].int64_list.value) == [1, 2]
    assert list(features["c"].bytes_list.value) == [b"x"]


# --------------------------------------------------------------------------------- end to end

# Corpus models whose serving signatures parse tf.Example batches, look strings up in vocabularies
# and cross, hash, bucketize and embed features; every case must match TF's outputs.
BREADTH_MODELS = (
    "est_dnn_classifier",
    "est_linear_regressor",
    "est_wide_deep",
    "example_estimator_classifier",
    "tf1_vocab_table",
    "keras_text_vectorization",
    "keras_lookup_layers",
    "tf1_feature_columns_partitioned",
)


@pytest.mark.parametrize("name", BREADTH_MODELS)
def test_corpus_model_matches_tensorflow(name) -> None:
    from loader.bundle import load_saved_model
    from tests.oracle import corpus

    manifest = corpus.load_manifest(name)
    checked = 0
    for tags in {tuple(case["tags"]) for case in manifest["cases"]}:
        bundle = load_saved_model(str(manifest["export_path"]), tags=tags)
        try:
            for case in (c for c in manifest["cases"] if tuple(c["tags"]) == tags):
                signature = bundle.signature_defs[case["signature"]]
                feeds = {
                    signature.inputs[key].name: read_tensor(manifest["dir"] / path)
                    for key, path in case["inputs"].items()
                }
                keys = sorted(case["outputs"])
                results = bundle.session.run([signature.outputs[k].name for k in keys], feed_dict=feeds)
                for key, value in zip(keys, results):
                    expected = read_tensor(manifest["dir"] / case["outputs"][key])
                    where = f"{name} {case['signature']} {key}"
                    value = _as_fetched(value)
                    assert value.shape == expected.shape, where
                    if expected.dtype.kind in "fc":
                        np.testing.assert_allclose(value, expected, case["rtol"], case["atol"], err_msg=where)
                    else:
                        np.testing.assert_array_equal(value, expected, err_msg=where, strict=True)
                    checked += 1
        finally:
            bundle.close()
    assert checked, f"{name}: no outputs compared"


# --------------------------------------------------------------------------------- robustness


def _parse_v2(serialized, dense_default):
    definition = kernels.lookup("ParseExampleV2")
    return definition.fn(
        serialized,
        np.array([], dtype=object),
        np.array([b"ids"], dtype=object),
        np.array([b"age"], dtype=object),
        np.array([], dtype=object),
        [dense_default],
        Tdense=[dtypes.DT_FLOAT],
        num_sparse=1,
        sparse_types=[dtypes.DT_INT64],
        ragged_value_types=[],
        ragged_split_types=[],
        dense_shapes=[()],
    )


def test_cached_configs_follow_the_defaults() -> None:
    batch = np.array([breadth_records.ex(ids=[1, 2])], dtype=object)
    first = _parse_v2(batch, np.array(1.5, np.float32))[3]
    second = _parse_v2(batch, np.array(2.5, np.float32))[3]
    assert first.tolist() == [1.5] and second.tolist() == [2.5]


def test_corrupted_examples_fail_with_invalid_argument_only() -> None:
    rng = np.random.default_rng(7)
    valid = breadth_records.ex(ids=[1, 2, 3], age=4.5, other=["x", "y"])
    outcomes = {"parsed": 0, "rejected": 0}
    for _ in range(2000):
        data = bytearray(valid)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        if rng.random() < 0.2:
            data = data[: int(rng.integers(0, len(data)))]
        try:
            _parse_v2(np.array([bytes(data)], dtype=object), np.array(0.0, np.float32))
            outcomes["parsed"] += 1
        except errors.InvalidArgumentError:
            outcomes["rejected"] += 1
    assert outcomes["parsed"] and outcomes["rejected"]


def test_tables_serve_concurrent_lookups() -> None:
    import threading

    from apis.tensorflow.core.framework import types_pb2

    graph_def = graph_pb2.GraphDef()
    table = graph_def.node.add(name="table", op="HashTableV2")
    table.attr["key_dtype"].type = types_pb2.DT_STRING
    table.attr["value_dtype"].type = types_pb2.DT_INT64
    for name, dtype in (
        ("keys", types_pb2.DT_STRING),
        ("values", types_pb2.DT_INT64),
        ("query", types_pb2.DT_STRING),
    ):
        graph_def.node.add(name=name, op="Placeholder").attr["dtype"].type = dtype
    graph_def.node.add(name="init", op="InitializeTableV2", input=["table", "keys", "values"])
    default = graph_def.node.add(name="default", op="Const")
    default.attr["dtype"].type = types_pb2.DT_INT64
    default.attr["value"].tensor.dtype = types_pb2.DT_INT64
    default.attr["value"].tensor.int64_val.append(-1)
    graph_def.node.add(name="find", op="LookupTableFindV2", input=["table", "query", "default"])
    words = np.array([f"w{i}".encode() for i in range(1000)], dtype=object)
    with Session(graph=Graph.from_graph_def(graph_def)) as session:
        session.run("init", {"keys:0": words, "values:0": np.arange(1000)})
        failures = []

        def worker(seed: int) -> None:
            picks = np.random.default_rng(seed).integers(0, 1200, size=200)
            query = np.array([f"w{i}".encode() for i in picks], dtype=object)
            found = session.run("find:0", {"query:0": query})
            if found.tolist() != [int(i) if i < 1000 else -1 for i in picks]:
                failures.append(seed)

        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failures
