"""TensorFlow's outputs for the breadth records of ``tests/runtime/breadth_records.py``.

Runs inside the oracle venv named by ``VENV`` (``python -m tests.oracle build --only breadth_records``).
Single-op records are evaluated exactly as the dense op records are (``op_records._run_record``:
a one-node graph of placeholders feeding the op) and exported as one SavedModel, one signature per
record. Graph scenarios (tables, vocabulary files, parsing feeding lookups) are built here with
TF's Python API, one function per name in ``SCENARIOS``. Everything lands under
``<cache>/breadth_records/``::

    records.json          {"records_sha256", "tf_version", "records": {name: entry},
                           "scenarios": {name: scenario entry}}
    records/<name>/...    as op_records (graph.pb, in_<i>.pb, out_<i>.pb)
    scenarios/<name>/graph.pb, feed_<i>.pb, out_<i>.pb and any vocabulary file

A scenario entry is ``{"init": [op names], "fetches": [tensor names], "feeds": {tensor: file},
"path_feeds": {tensor: file in the scenario folder}, "sort_rows": bool}`` plus ``"outputs"``
(files) or ``"error"`` (``{"class", "message", "stage"}`` with stage "init" or "run").
``path_feeds`` are fed the file's absolute path on each side, so the cache can move.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.oracle import REPO_ROOT
from tests.oracle.builders import op_records as single
from tests.oracle.tfside import Case, model
from tests.runtime import breadth_records

VENV = "tf221"
FAMILY = "op_records"
DEPENDS = ["tests/runtime/breadth_records.py"]
RECORDS_FILE = REPO_ROOT / "tests" / "runtime" / "breadth_records.py"
SCENARIO_BUILDERS = {}

v1 = tf.compat.v1


def scenario(fn):
    SCENARIO_BUILDERS[fn.__name__] = fn
    return fn


def _vocab(folder: Path, name: str, text: bytes):
    """A vocabulary file in the scenario folder, and the placeholder its path is fed to."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(text)
    path = v1.placeholder(tf.string, shape=[], name=name.replace(".", "_"))
    return path, {path: name}


def _table(key_dtype, value_dtype, **kwargs):
    return tf.raw_ops.HashTableV2(key_dtype=key_dtype, value_dtype=value_dtype, **kwargs)


def _find(handle, keys, default):
    return tf.raw_ops.LookupTableFindV2(table_handle=handle, keys=keys, default_value=default)


def _size(handle):
    return tf.raw_ops.LookupTableSizeV2(table_handle=handle)


def _import(handle, keys, values):
    return tf.raw_ops.LookupTableImportV2(table_handle=handle, keys=keys, values=values)


_KEYS = tf.constant  # readability below


@scenario
def static_table_string_to_int64(folder):
    h = _table(tf.string, tf.int64, shared_name="vocab")
    init = tf.raw_ops.InitializeTableV2(
        table_handle=h, keys=_KEYS(["a", "b", "c"]), values=_KEYS([0, 1, 2], tf.int64)
    )
    keys = v1.placeholder(tf.string, [None, 2], name="keys")
    feeds = {keys: np.array([[b"a", b"z"], [b"c", b""]], dtype=object)}
    return dict(init=[init], fetches=[_find(h, keys, _KEYS(-1, tf.int64)), _size(h)], feeds=feeds)


@scenario
def static_table_int64_to_string(folder):
    h = _table(tf.int64, tf.string)
    init = _import(h, _KEYS([10, 20, -5], tf.int64), _KEYS(["ten", "twenty", "minus five"]))
    keys = v1.placeholder(tf.int64, [None], name="keys")
    return dict(init=[init], fetches=[_find(h, keys, _KEYS("UNK"))], feeds={keys: np.array([20, 0, -5, 10])})


@scenario
def static_table_lookup_before_init(folder):
    h = _table(tf.string, tf.int64)
    return dict(init=[], fetches=[_find(h, _KEYS(["a"]), _KEYS(-1, tf.int64))], feeds={})


@scenario
def static_table_duplicate_keys(folder):
    h = _table(tf.string, tf.int64)
    init = _import(h, _KEYS(["a", "b", "a"]), _KEYS([1, 2, 3], tf.int64))
    return dict(init=[init], fetches=[_size(h)], feeds={})


@scenario
def static_table_reinitialize_same(folder):
    h = _table(tf.string, tf.float32)
    init = tf.raw_ops.InitializeTableV2(table_handle=h, keys=_KEYS(["x", "y"]), values=_KEYS([0.5, 1.5]))
    with tf.control_dependencies([init]):
        again = tf.raw_ops.InitializeTableV2(table_handle=h, keys=_KEYS(["x", "y"]), values=_KEYS([0.5, 1.5]))
    return dict(init=[init, again], fetches=[_find(h, _KEYS(["y", "q"]), _KEYS(-1.0)), _size(h)], feeds={})


@scenario
def static_table_reinitialize_different(folder):
    h = _table(tf.string, tf.float32)
    init = tf.raw_ops.InitializeTableV2(table_handle=h, keys=_KEYS(["x", "y"]), values=_KEYS([0.5, 1.5]))
    with tf.control_dependencies([init]):
        again = tf.raw_ops.InitializeTableV2(table_handle=h, keys=_KEYS(["x"]), values=_KEYS([2.5]))
    return dict(init=[init, again], fetches=[_find(h, _KEYS(["x"]), _KEYS(-1.0))], feeds={})


@scenario
def text_file_initialize_twice(folder):
    path, path_feeds = _vocab(folder, "vocab.txt", b"a\nb\n")
    h = _table(tf.string, tf.int64)
    init = tf.raw_ops.InitializeTableFromTextFileV2(
        table_handle=h, filename=path, key_index=-2, value_index=-1
    )
    with tf.control_dependencies([init]):
        again = tf.raw_ops.InitializeTableFromTextFileV2(
            table_handle=h, filename=path, key_index=-2, value_index=-1
        )
    fetches = [_find(h, _KEYS(["b", "c"]), _KEYS(-1, tf.int64)), _size(h)]
    return dict(init=[init, again], fetches=fetches, feeds={}, path_feeds=path_feeds)


_VOCAB = b"apple\t3\t0.5\nbanana\t7\t1.25\ncherry pie\t11\t-2\r\ndate\t13\t4e3\n"


def _text_file(folder, text, key_dtype, key_index, value_dtype, value_index, keys, default, **attrs):
    path, path_feeds = _vocab(folder, "vocab.txt", text)
    h = _table(key_dtype, value_dtype)
    init = tf.raw_ops.InitializeTableFromTextFileV2(
        table_handle=h, filename=path, key_index=key_index, value_index=value_index, **attrs
    )
    fetches = [_find(h, _KEYS(keys, key_dtype), _KEYS(default, value_dtype)), _size(h)]
    return dict(init=[init], fetches=fetches, feeds={}, path_feeds=path_feeds)


@scenario
def text_file_whole_line_to_line_number(folder):
    text = b"apple\nbanana\ncherry pie\r\ndate"
    return _text_file(folder, text, tf.string, -2, tf.int64, -1, ["banana", "date", "cherry pie", "fig"], -1)


@scenario
def text_file_columns(folder):
    return _text_file(folder, _VOCAB, tf.string, 0, tf.int64, 1, ["banana", "cherry pie", "x"], -1)


@scenario
def text_file_line_number_offset(folder):
    return _text_file(folder, _VOCAB, tf.int64, -1, tf.string, -2, [0, 1, 2, 4, 5], "?", offset=2)


@scenario
def text_file_vocab_size(folder):
    return _text_file(
        folder, _VOCAB, tf.string, 0, tf.int64, -1, ["apple", "banana", "date"], -1, vocab_size=2
    )


@scenario
def text_file_vocab_size_too_large(folder):
    return _text_file(folder, _VOCAB, tf.string, 0, tf.int64, -1, ["apple"], -1, vocab_size=9)


@scenario
def text_file_empty_line(folder):
    return _text_file(folder, b"a\nb\n\nc\n", tf.string, -2, tf.int64, -1, ["a"], -1)


@scenario
def text_file_missing_columns(folder):
    return _text_file(folder, b"a\t1\nb\n", tf.string, 0, tf.int64, 1, ["a"], -1)


@scenario
def text_file_bad_int(folder):
    return _text_file(folder, _VOCAB, tf.string, 1, tf.int64, 0, ["3"], -1)


@scenario
def text_file_float_values(folder):
    return _text_file(folder, _VOCAB, tf.int64, 1, tf.float32, 2, [3, 7, 11, 13, 0], -1.0)


@scenario
def text_file_duplicate_lines(folder):
    return _text_file(folder, b"a\nb\na\n", tf.string, -2, tf.int64, -1, ["a"], -1)


@scenario
def static_vocabulary_table_oov_buckets(folder):
    path, path_feeds = _vocab(folder, "words.txt", b"the\nquick\nbrown\nfox\n")
    init = tf.lookup.TextFileInitializer(path, tf.string, -2, tf.int64, -1)
    table = tf.lookup.StaticVocabularyTable(init, num_oov_buckets=5)
    keys = v1.placeholder(tf.string, [None], name="keys")
    feeds = {keys: np.array([b"fox", b"jumps", b"the", b"", b"over", b"lazy"], dtype=object)}
    return dict(init=[v1.tables_initializer()], fetches=[table.lookup(keys), table.size()], feeds=feeds,
                path_feeds=path_feeds)  # fmt: skip


@scenario
def index_table_from_tensor_oov(folder):
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(_KEYS([3, 5, 7], tf.int64), _KEYS([0, 1, 2], tf.int64)),
        num_oov_buckets=3,
    )
    keys = v1.placeholder(tf.int64, [None], name="keys")
    return dict(
        init=[v1.tables_initializer()], fetches=[table.lookup(keys)], feeds={keys: np.array([5, 6, 7, -1])}
    )


@scenario
def mutable_table_insert_find_remove(folder):
    h = tf.raw_ops.MutableHashTableV2(key_dtype=tf.string, value_dtype=tf.int64)
    insert = tf.raw_ops.LookupTableInsertV2(
        table_handle=h, keys=_KEYS(["a", "b", "c"]), values=_KEYS([1, 2, 3], tf.int64)
    )
    with tf.control_dependencies([insert]):
        overwrite = tf.raw_ops.LookupTableInsertV2(
            table_handle=h, keys=_KEYS(["b"]), values=_KEYS([20], tf.int64)
        )
    with tf.control_dependencies([overwrite]):
        remove = tf.raw_ops.LookupTableRemoveV2(table_handle=h, keys=_KEYS(["a", "zz"]))
    fetches = [_find(h, _KEYS(["a", "b", "c"]), _KEYS(0, tf.int64)), _size(h)]
    return dict(init=[insert, overwrite, remove], fetches=fetches, feeds={})


@scenario
def mutable_table_import_size(folder):
    h = tf.raw_ops.MutableHashTableV2(key_dtype=tf.int64, value_dtype=tf.float32)
    first = _import(h, _KEYS([1, 2, 3], tf.int64), _KEYS([0.1, 0.2, 0.3]))
    with tf.control_dependencies([first]):
        second = _import(h, _KEYS([4, 2], tf.int64), _KEYS([4.0, 2.0]))  # import replaces everything
    keys, values = tf.raw_ops.LookupTableExportV2(table_handle=h, Tkeys=tf.int64, Tvalues=tf.float32)
    order = tf.argsort(keys)
    fetches = [_find(h, _KEYS([1, 2, 4], tf.int64), _KEYS(-1.0)), _size(h), tf.gather(keys, order),
               tf.gather(values, order)]  # fmt: skip
    return dict(init=[first, second], fetches=fetches, feeds={})


@scenario
def mutable_table_of_tensors(folder):
    h = tf.raw_ops.MutableHashTableOfTensorsV2(key_dtype=tf.string, value_dtype=tf.float32, value_shape=[2])
    insert = tf.raw_ops.LookupTableInsertV2(
        table_handle=h, keys=_KEYS(["a", "b"]), values=_KEYS([[1.0, 2.0], [3.0, 4.0]])
    )
    fetches = [_find(h, _KEYS([["b", "x"], ["a", "a"]]), _KEYS([-1.0, -2.0])), _size(h)]
    return dict(init=[insert], fetches=fetches, feeds={})


@scenario
def dense_hash_table(folder):
    h = tf.raw_ops.MutableDenseHashTableV2(
        empty_key=_KEYS(-1, tf.int64),
        deleted_key=_KEYS(-2, tf.int64),
        value_dtype=tf.int64,
        initial_num_buckets=8,
    )
    insert = tf.raw_ops.LookupTableInsertV2(
        table_handle=h, keys=_KEYS([5, 6, 7], tf.int64), values=_KEYS([50, 60, 70], tf.int64)
    )
    with tf.control_dependencies([insert]):
        remove = tf.raw_ops.LookupTableRemoveV2(table_handle=h, keys=_KEYS([6], tf.int64))
    fetches = [_find(h, _KEYS([5, 6, 7, 8], tf.int64), _KEYS(0, tf.int64)), _size(h)]
    return dict(init=[insert, remove], fetches=fetches, feeds={})


@scenario
def string_lookup_layer_style(folder):
    # What Keras StringLookup builds: a static table from tensors, OOV mapped to index 0, ids + 1.
    h = _table(tf.string, tf.int64, shared_name="string_lookup_table")
    init = _import(h, _KEYS(["red", "green", "blue"]), _KEYS([1, 2, 3], tf.int64))
    text = v1.placeholder(tf.string, [None], name="text")
    words = tf.strings.split(tf.strings.lower(tf.strings.regex_replace(text, "[.,!?]", "")))
    ids = tf.ragged.map_flat_values(lambda w: _find(h, w, _KEYS(0, tf.int64)), words)
    feeds = {text: np.array([b"Red, green!", b"BLUE sky", b""], dtype=object)}
    return dict(init=[init], fetches=[ids.to_tensor(default_value=-1)], feeds=feeds)


@scenario
def parse_then_lookup_feature_column(folder):
    serialized = v1.placeholder(tf.string, [None], name="examples")
    parsed = tf.io.parse_example(
        serialized,
        {"color": tf.io.VarLenFeature(tf.string), "size": tf.io.FixedLenFeature([1], tf.float32, [0.0])},
    )
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(_KEYS(["red", "green"]), _KEYS([0, 1], tf.int64)),
        num_oov_buckets=2,
    )
    ids = tf.SparseTensor(
        parsed["color"].indices, table.lookup(parsed["color"].values), parsed["color"].dense_shape
    )
    embeddings = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3) / 3)
    embedded = tf.nn.safe_embedding_lookup_sparse(embeddings, ids, combiner="mean")
    crossed = tf.sparse.cross_hashed([parsed["color"], tf.as_string(tf.cast(parsed["size"], tf.int64))], 17)
    rows = [
        breadth_records.ex(color=["red", "blue"], size=2.0),
        breadth_records.ex(size=1.0),
        breadth_records.ex(color=["green"]),
    ]
    feeds = {serialized: np.array(rows, dtype=object)}
    return dict(
        init=[v1.tables_initializer()],
        fetches=[embedded, parsed["size"], crossed.indices, crossed.values, crossed.dense_shape],
        feeds=feeds,
    )


def _message(error, folder: Path) -> str:
    """TF's own text: without the Python traceback TF prepends and with ``{folder}`` for the folder."""
    text = getattr(error, "message", None) or str(error)
    text = re.split(r"Node: '[^']*'\n", text)[-1]
    text = re.sub(r"\s*\[\[\{\{node .*", "", text, flags=re.S).strip()
    return text.replace(str(folder.resolve()), "{folder}")


def _run_scenario(name: str, out: Path) -> dict:
    graph = tf.Graph()
    with graph.as_default():
        spec = SCENARIO_BUILDERS[name](out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "graph.pb").write_bytes(graph.as_graph_def().SerializeToString())
    path_feeds = spec.get("path_feeds", {})
    entry = {
        "init": [op.name for op in spec["init"]],
        "fetches": [t.name for t in spec["fetches"]],
        "feeds": {},
        "path_feeds": {t.name: file for t, file in path_feeds.items()},
    }
    for i, (tensor, value) in enumerate(spec["feeds"].items()):
        single._write(out / f"feed_{i}.pb", value)
        entry["feeds"][tensor.name] = f"feed_{i}.pb"
    paths = {t: str((out / file).resolve()).encode() for t, file in path_feeds.items()}
    with tf.compat.v1.Session(graph=graph) as sess:
        stage = "init"
        try:
            for op in spec["init"]:
                sess.run(op, feed_dict=paths)
            stage = "run"
            results = sess.run(spec["fetches"], feed_dict={**spec["feeds"], **paths})
        except tf.errors.OpError as error:
            entry["error"] = {"class": type(error).__name__, "message": _message(error, out), "stage": stage}
            return entry
    entry["outputs"] = []
    for i, value in enumerate(results):
        single._write(out / f"out_{i}.pb", value)
        entry["outputs"].append(f"out_{i}.pb")
    return entry


@model("breadth_records")
def build_breadth_records(export_dir: str) -> list[Case]:
    out = Path(export_dir).parent
    missing = set(breadth_records.SCENARIOS) ^ set(SCENARIO_BUILDERS)
    if missing:
        raise KeyError(f"scenarios without a builder or record: {sorted(missing)}")
    records = breadth_records.RECORDS
    entries = {r.name: single._run_record(r, out / "records" / r.name) for r in records}
    scenarios = {name: _run_scenario(name, out / "scenarios" / name) for name in breadth_records.SCENARIOS}
    cases = single._export(export_dir, records, entries)
    for entry in entries.values():
        entry.pop("_feeds", None)
    manifest = {
        "records_sha256": hashlib.sha256(RECORDS_FILE.read_bytes()).hexdigest(),
        "tf_version": tf.__version__,
        "records": entries,
        "scenarios": scenarios,
    }
    (out / "records.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return cases


@model("keras_lookup_layers", family="keras")
def build_keras_lookup_layers(export_dir: str) -> list[Case]:
    """Keras preprocessing layers that look up, hash and n-gram strings and ints, exported as Keras
    exports them (``model.export``): StringLookup, IntegerLookup, Hashing (plain and salted),
    TextVectorization with bigrams and multi-hot output."""
    import keras

    keras.utils.set_random_seed(36)
    color = keras.Input(shape=(1,), dtype="string", name="color")
    code = keras.Input(shape=(1,), dtype="int64", name="code")
    text = keras.Input(shape=(1,), dtype="string", name="text")
    vectorize = keras.layers.TextVectorization(max_tokens=12, ngrams=2, output_mode="multi_hot")
    vectorize.adapt(["red green blue", "green green sky", "blue sky at night"])
    outputs = {
        "color_id": keras.layers.StringLookup(vocabulary=["red", "green", "blue"], num_oov_indices=2)(color),
        "code_id": keras.layers.IntegerLookup(vocabulary=[7, 11, 13], num_oov_indices=1)(code),
        "color_hash": keras.layers.Hashing(num_bins=7)(color),
        "color_salted": keras.layers.Hashing(num_bins=9, salt=[3, 4])(color),
        "code_hash": keras.layers.Hashing(num_bins=5)(code),
        "words": vectorize(text),
    }
    net = keras.Model({"color": color, "code": code, "text": text}, outputs)
    net.export(export_dir, format="tf_saved_model", verbose=False)
    inputs = {
        "color": np.array([[b"red"], [b"purple"], [b"blue"], [b""]], dtype=object),
        "code": np.array([[7], [8], [13], [-1]], dtype=np.int64),
        "text": np.array([[b"red sky"], [b"green green"], [b""], [b"night at blue"]], dtype=object),
    }
    return [Case(key, inputs) for key in ("serving_default", "serve")]


@model("tf1_feature_columns_partitioned", family="tf1")
def build_tf1_feature_columns_partitioned(export_dir: str) -> list[Case]:
    """A TF1 graph doing by hand what feature columns do, with embeddings over partitioned
    variables (``mod`` and ``div`` partition strategies): tf.Example parsing, a vocabulary-file
    asset, hash buckets, a hashed cross, bucketized floats, safe sparse embedding lookups."""
    vocab = Path(export_dir).parent / "colors.txt"
    vocab.write_bytes(b"red\ngreen\nblue\n")
    graph = tf.Graph()
    with graph.as_default():
        serialized = v1.placeholder(tf.string, [None], name="input_example_tensor")
        parsed = tf.io.parse_example(
            serialized,
            {
                "color": tf.io.VarLenFeature(tf.string),
                "city": tf.io.VarLenFeature(tf.string),
                "age": tf.io.FixedLenFeature([1], tf.float32, [30.0]),
            },
        )
        path = tf.constant(str(vocab), name="vocab_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, path)
        table = tf.lookup.StaticVocabularyTable(
            tf.lookup.TextFileInitializer(path, tf.string, -2, tf.int64, -1), 2
        )
        color = parsed["color"]
        color_ids = tf.SparseTensor(color.indices, table.lookup(color.values), color.dense_shape)
        city = parsed["city"]
        city_ids = tf.SparseTensor(
            city.indices, tf.strings.to_hash_bucket_fast(city.values, 10), city.dense_shape
        )
        crossed = tf.sparse.cross_hashed([color, city], num_buckets=13)
        age_bucket = tf.raw_ops.Bucketize(input=parsed["age"], boundaries=[18.0, 35.0, 60.0])
        init = v1.random_normal_initializer(seed=1)
        embedded = []
        for name, ids, rows, strategy in (
            ("color", color_ids, 5, "mod"),
            ("city", city_ids, 10, "div"),
            ("cross", crossed, 13, "mod"),
        ):
            weights = v1.get_variable(
                f"{name}_embedding", [rows, 3], initializer=init, partitioner=v1.fixed_size_partitioner(3)
            )
            embedded.append(
                v1.nn.safe_embedding_lookup_sparse(
                    list(weights),
                    ids,
                    combiner="sqrtn" if name == "city" else "mean",
                    partition_strategy=strategy,
                )
            )
        features = tf.concat(embedded + [tf.cast(age_bucket, tf.float32)], axis=1)
        kernel = v1.get_variable("logits/kernel", [10, 2], initializer=init)
        bias = v1.get_variable("logits/bias", [2], initializer=v1.zeros_initializer())
        logits = tf.matmul(features, kernel) + bias
        scores = tf.nn.softmax(logits, name="scores")
        with v1.Session(graph=graph) as sess:
            sess.run([v1.global_variables_initializer(), v1.tables_initializer()])
            signature = v1.saved_model.build_signature_def(
                {"inputs": v1.saved_model.build_tensor_info(serialized)},
                {
                    "scores": v1.saved_model.build_tensor_info(scores),
                    "crossed_values": v1.saved_model.build_tensor_info(crossed.values),
                },  # fmt: skip
                "tensorflow/serving/predict",
            )
            builder = v1.saved_model.Builder(export_dir)
            builder.add_meta_graph_and_variables(
                sess,
                ["serve"],
                signature_def_map={"serving_default": signature},
                main_op=v1.tables_initializer(),
                assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS),
            )
            builder.save()
    rows = [
        breadth_records.ex(color=["red", "blue"], city=["paris"], age=70.0),
        breadth_records.ex(color=["purple"], city=["oslo", "rome", "lima"]),
        breadth_records.ex(age=12.0),
        breadth_records.ex(color=["green"], age=40.0),
    ]
    return [Case("serving_default", {"inputs": np.array(rows, dtype=object)})]
