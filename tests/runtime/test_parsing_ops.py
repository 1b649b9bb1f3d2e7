"""tf.Example parsing (ParseExample, ParseExampleV2, ParseSingleExample), DecodeRaw, StringToNumber
(``decode_ops``) against TensorFlow's outputs and error texts, plus the helpers the other breadth
tests share.

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
from tests.oracle import cache_dir
from tests.runtime import breadth_records
from tests.runtime.op_records import DType
from tests.runtime.test_op_records import BUILD_ERRORS, assert_same, kernel_inputs, node_attrs, read_tensor

REBUILD = "run `python -m tests.oracle build --force --only breadth_records`"

# Errors whose text cannot be TF's (every other error must match TF's message exactly).
MESSAGE_DIFFERENCES = {
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
    attrs = node_attrs(record.name, records_dir()) if "args" in entry else _record_attrs(record)
    attrs = definition.select_attrs(attrs)
    if definition.needs_context:
        attrs["ctx"] = None
    error = entry.get("error")
    if error is not None:
        expected = BUILD_ERRORS.get(error["class"]) or getattr(errors, error["class"])
        with pytest.raises(errors.OpError) as raised:
            definition.fn(*kernel_inputs(record, entry, records_dir()), **attrs)
        assert type(raised.value) is expected, (
            f"{record.name}: raised {type(raised.value).__name__}({raised.value}), TF raised "
            f"{error['class']}({error['message']})"
        )
        if record.name not in MESSAGE_DIFFERENCES:
            assert str(raised.value) == error["message"], f"{record.name}: TF's message differs"
        return
    results = definition.fn(*kernel_inputs(record, entry, records_dir()), **attrs)
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

PARSING = records_of("parsing_ops", "decode_ops")


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
        bundle = load_saved_model(str(manifest["export_path"]), tags=tags, delegation=False)
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
    init = graph_def.node.add(name="init", op="InitializeTableV2", input=["table", "keys", "values"])
    init.attr["Tkey"].type, init.attr["Tval"].type = types_pb2.DT_STRING, types_pb2.DT_INT64
    default = graph_def.node.add(name="default", op="Const")
    default.attr["dtype"].type = types_pb2.DT_INT64
    default.attr["value"].tensor.dtype = types_pb2.DT_INT64
    default.attr["value"].tensor.int64_val.append(-1)
    find = graph_def.node.add(name="find", op="LookupTableFindV2", input=["table", "query", "default"])
    find.attr["Tin"].type, find.attr["Tout"].type = types_pb2.DT_STRING, types_pb2.DT_INT64
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


# --------------------------------------------------------------------------------- batch fast path

# ``example_fast_path`` parses batches of canonically encoded Examples column-wise and hands anything
# else to ``example_parser``'s general path; both must agree on every output and every error, word
# for word.

_LONG = "a_feature_key_longer_than_sixteen_bytes"


def _fast_config():
    from runtime.example.specs import Config, DenseSpec, RaggedSpec, SparseSpec

    f32, i64, s = dtypes.DT_FLOAT, dtypes.DT_INT64, dtypes.DT_STRING
    return Config(
        dense=(
            DenseSpec("f", f32, (), np.array(-1.0, np.float32)),
            DenseSpec("v", f32, (3,), np.zeros(0, np.float32)),  # required
            DenseSpec("i", i64, (1,), np.array([7], np.int64)),
            DenseSpec("m", i64, (2, 2), np.arange(4, dtype=np.int64).reshape(2, 2)),
            DenseSpec("s", s, (), np.array(b"none", dtype=object)),
            DenseSpec("pf", f32, (None,), np.array(0.5, np.float32)),
            DenseSpec("pi", i64, (None, 2), np.array(-1, np.int64)),
            DenseSpec("ps", s, (None,), np.array(b"pad", dtype=object)),
            DenseSpec(_LONG, f32, (2,), np.array([1.0, 2.0], np.float32)),
        ),
        sparse=(SparseSpec("sf", f32), SparseSpec("si", i64), SparseSpec("ss", s)),
        ragged=(RaggedSpec("ri", i64, dtypes.DT_INT32), RaggedSpec("rs", s, dtypes.DT_INT64)),
    )


_SIZES = {"f": 1, "v": 3, "i": 1, "m": 4, "s": 1, _LONG: 2}
_KINDS = {"f": "float", "v": "float", "i": "int64", "m": "int64", "s": "bytes", "pf": "float",
          "pi": "int64", "ps": "bytes", _LONG: "float", "sf": "float", "si": "int64", "ss": "bytes",
          "ri": "int64", "rs": "bytes"}  # fmt: skip


def _values(rng, kind: str, count: int) -> list:
    if kind == "float":
        return rng.normal(size=count).astype(np.float32).tolist()
    if kind == "int64":  # negative values take ten-byte varints
        return [int(v) for v in rng.integers(-(2**63), 2**63 - 1, size=count, dtype=np.int64)]
    return [
        bytes(rng.integers(0, 256, size=int(rng.integers(0, 200))).astype(np.uint8)) for _ in range(count)
    ]


def _random_example(rng, odd: float) -> bytes:
    """An Example of the fast config's features; with probability ``odd`` per choice, something the
    fast path does not take: other encodings, wrong types or sizes, missing, duplicate or extra keys."""
    entries = []
    for key, kind in _KINDS.items():
        roll = rng.random()
        if roll < odd:
            continue  # missing
        count = _SIZES.get(key) or int(rng.integers(0, 40)) * (2 if key == "pi" else 1)
        if roll < 2 * odd:
            count += 1  # wrong size for fixed-length features
        use = kind if rng.random() >= odd else str(rng.choice(["float", "int64", "bytes", "none"]))
        packed = rng.random() >= odd
        entries.append((key, breadth_records.feature(_values(rng, use, count), kind=use, packed=packed)))
    if rng.random() < odd:
        entries.append((str(rng.choice(["extra", "ключ", "x" * 20])), breadth_records.feature([1.5])))
    if rng.random() < odd and entries:
        entries.append(entries[int(rng.integers(0, len(entries)))])  # a duplicate key: the last wins
    rng.shuffle(entries)
    data = breadth_records.example_entries(entries)
    if rng.random() < odd / 2:
        data += b"\x10\x05"  # an unknown varint field
    if rng.random() < odd / 4:
        data = data[: int(rng.integers(0, len(data) + 1))]
    return data if rng.random() >= odd / 4 else b""


def _both_paths(batch: list, config, monkeypatch) -> tuple:
    from runtime.example import parser as example_parser

    results = []
    for threshold in (0, 10**9):  # the fast path (when it takes the batch), then the general one
        monkeypatch.setattr(example_parser, "_FAST_CELLS", threshold)
        try:
            results.append(example_parser.parse_examples(batch, [], config))
        except errors.OpError as error:
            results.append((type(error), str(error)))
    return results


def _assert_identical(fast, general, where: str) -> None:
    if isinstance(general, tuple) and general and isinstance(general[0], type):
        assert fast == general, where
        return
    flat_fast = [a for group in fast for a in group]
    flat_general = [a for group in general for a in group]
    assert len(flat_fast) == len(flat_general), where
    for index, (a, b) in enumerate(zip(flat_fast, flat_general)):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{where} output {index}"
        assert a.tolist() == b.tolist(), f"{where} output {index}"


@pytest.mark.parametrize("odd", [0.0, 0.02, 0.1, 0.3])
def test_fast_path_agrees_with_general_path(odd, monkeypatch) -> None:
    from runtime.example import fast_path as example_fast_path

    rng = np.random.default_rng(int(odd * 1000))
    config = _fast_config()
    taken = 0
    for trial in range(60):
        batch = [_random_example(rng, odd) for _ in range(int(rng.integers(2, 40)))]
        fast, general = _both_paths(batch, config, monkeypatch)
        _assert_identical(fast, general, f"odd={odd} trial={trial}")
        taken += example_fast_path.parse_fast(batch, config) is not None
    if odd == 0.0:
        assert taken == 60  # canonical batches all take the fast path


_V = ("v", breadth_records.feature([1.0, 2.0, 3.0]))  # the config's required feature

_EDGE_BATCHES = {  # name -> (batch, whether the fast path takes it)
    "features without a kind": ([breadth_records.example_entries([_V, ("f", b""), (_LONG, b""), ("ss", b"")])] * 2, True),
    "an empty example": ([b"", breadth_records.ex(f=1.0, v=[1.0, 2.0, 3.0])], False),  # v is required
    "only the required feature": ([breadth_records.example_entries([_V])] * 3, True),
    "one float in all": ([breadth_records.ex(v=[1.0, 2.0, 3.0], sf=[0.5])] * 2, True),
    "empty lists": (
        [breadth_records.example_entries(
            [_V] + [(k, breadth_records.feature([], kind=_KINDS[k])) for k in ("ri", "rs", "ss", "sf", "pi")]
        )] * 2,
        True,
    ),
    "long lists and strings": ([breadth_records.ex(v=[1.0, 2.0, 3.0], pf=[0.25] * 100, ps=["x" * 300])] * 2, True),
    "strings ending in NUL": ([breadth_records.ex(v=[1.0, 2.0, 3.0], s="a\0", ss=["\0", "b\0\0"])] * 2, True),
    "unpacked and packed": (
        [breadth_records.example_entries([("v", breadth_records.feature([1.0, 2.0, 3.0], packed=p))])
         for p in (True, False)],
        False,
    ),
    "non-ASCII key": ([breadth_records.ex(v=[1.0, 2.0, 3.0], ключ=1)] * 2, False),
    "missing required": ([breadth_records.ex(f=1.0)] * 2, False),
}  # fmt: skip


@pytest.mark.parametrize("name", list(_EDGE_BATCHES))
def test_fast_path_agrees_on_edge_batches(name, monkeypatch) -> None:
    from runtime.example import fast_path as example_fast_path

    batch, fast_path = _EDGE_BATCHES[name]
    assert (example_fast_path.parse_fast(batch, _fast_config()) is not None) == fast_path
    fast, general = _both_paths(batch, _fast_config(), monkeypatch)
    _assert_identical(fast, general, name)


def test_fast_path_takes_what_serializers_write() -> None:
    """Examples built with the generated classes (packed lists, one features field) go fast."""
    from apis.tensorflow.core.example import example_pb2
    from runtime.example import fast_path as example_fast_path

    examples = []
    for i in range(8):
        example = example_pb2.Example()
        example.features.feature["f"].float_list.value.append(i / 2)
        example.features.feature["v"].float_list.value.extend([i, -i, 0.25])
        example.features.feature["i"].int64_list.value.append(-i)
        example.features.feature["ri"].int64_list.value.extend(range(i))
        example.features.feature["s"].bytes_list.value.append(b"x" * i)
        examples.append(example.SerializeToString())
    config = _fast_config()
    fast = example_fast_path.parse_fast(examples, config)
    assert fast is not None
    dense = fast[3]
    assert dense[0].tolist() == [i / 2 for i in range(8)]
    assert dense[2].tolist() == [[-i] for i in range(8)]
    assert dense[4].tolist() == [b"x" * i for i in range(8)]
    assert fast[5][0].tolist() == [sum(range(i)) for i in range(9)]


@pytest.mark.parametrize(
    "record", [r for r in PARSING if r.op in ("ParseExample", "ParseExampleV2")], ids=lambda r: r.name
)
def test_parsing_record_on_general_path(record, monkeypatch) -> None:
    """TF's records, through the general path only (small batches take it anyway)."""
    from runtime.example import parser as example_parser

    monkeypatch.setattr(example_parser, "_FAST_CELLS", 10**9)
    check_record(record)


def test_parsing_records_exercise_the_fast_path(monkeypatch) -> None:
    """TF's records again, every batch offered to the fast path: those it takes must match TF's."""
    from runtime.example import fast_path as example_fast_path
    from runtime.example import parser as example_parser

    monkeypatch.setattr(example_parser, "_FAST_CELLS", 0)
    taken = []
    original = example_fast_path.parse_fast

    def spy(serialized, config):
        result = original(serialized, config)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(example_fast_path, "parse_fast", spy)
    for record in PARSING:
        if record.op in ("ParseExample", "ParseExampleV2"):
            check_record(record)
    assert sum(taken) >= 8, taken
