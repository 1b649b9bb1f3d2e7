"""The general Example parser reads a batch key by key (``_rows_by_column``) and only falls back
to the example-by-example loop (``_rows_by_example``, TF's checks and errors) when some example
lacks a key or holds an empty or mistyped list: on random batches, regular and not, both give the
same outputs, or the same error. ParseExampleV2 keeps each node's Config between runs of the same
key and default arrays, and rebuilds it for others."""

from __future__ import annotations

import random
import types

import numpy as np
import pytest

from apis.tensorflow.core.example import example_pb2
from runtime import dtypes, errors
from runtime.example import parser as example_parser
from runtime.example.specs import Config, DenseSpec, RaggedSpec, SparseSpec
from runtime.kernels import parsing_ops
from runtime.kernels.parsing_ops import parse_example_v2

CONFIG = Config(
    dense=(
        DenseSpec("age", dtypes.DT_FLOAT, (1,), np.array([30.0], np.float32)),
        DenseSpec("pair", dtypes.DT_INT64, (2,), np.zeros(0, np.int64)),
        DenseSpec("many", dtypes.DT_FLOAT, (None,), np.zeros(0, np.float32)),
    ),
    sparse=(SparseSpec("city", dtypes.DT_STRING), SparseSpec("tag", dtypes.DT_INT64)),
    ragged=(RaggedSpec("words", dtypes.DT_STRING, dtypes.DT_INT64),),
)
KINDS = {"age": "float", "pair": "int64", "many": "float", "city": "bytes", "tag": "int64", "words": "bytes"}
LENGTHS = {"age": 1, "pair": 2}


def _example(rng: random.Random, irregular: bool) -> bytes:
    example = example_pb2.Example()
    for key, kind in KINDS.items():
        if irregular and rng.random() < 0.15:
            continue  # absent
        if irregular and rng.random() < 0.1:
            kind = rng.choice(["float", "int64", "bytes"])  # perhaps mistyped
        count = LENGTHS.get(key, rng.randrange(1, 4))
        if irregular and rng.random() < 0.1:
            count = rng.randrange(0, 4)  # perhaps empty or of the wrong length
        values = [rng.randrange(9) for _ in range(count)]
        lists = getattr(example.features.feature[key], f"{kind}_list").value
        lists.extend([str(v).encode() for v in values] if kind == "bytes" else values)
        if not count:
            example.features.feature[key].SetInParent()
            getattr(example.features.feature[key], f"{kind}_list").SetInParent()
    return example.SerializeToString()


def _outcome(getters, read_rows):
    try:
        return example_parser.parse_features(getters, [], CONFIG)
    except errors.InvalidArgumentError as exc:
        return str(exc)


@pytest.mark.parametrize("irregular", [False, True])
def test_key_by_key_reads_equal_the_example_by_example_loop(irregular, monkeypatch) -> None:
    rng = random.Random(irregular)
    columns = 0
    for _ in range(300):
        batch = [_example(rng, irregular) for _ in range(rng.randrange(1, 40))]
        getters = [example_pb2.Example.FromString(data).features.feature.get for data in batch]
        columns += example_parser._rows_by_column(getters, CONFIG) is not None
        got = _outcome(getters, None)
        with monkeypatch.context() as patch:
            patch.setattr(example_parser, "_rows_by_column", lambda getters, config: None)
            want = _outcome(getters, None)
        if isinstance(want, str):
            assert got == want
            continue
        for a, b in zip(_flat(got), _flat(want), strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()
    assert columns == 300 if not irregular else 0 < columns < 100


def _flat(outputs) -> list:
    return [array for group in outputs for array in group]


NO_KEYS = np.zeros(0, object)  # as a graph's Const gives: the same array every run


def _parse(keys: np.ndarray, ctx) -> tuple:
    example = example_pb2.Example()
    example.features.feature["a"].int64_list.value.append(1)
    example.features.feature["b"].int64_list.value.extend([2, 3])
    return parse_example_v2(
        np.array([example.SerializeToString()], object), np.zeros(0, object), keys,
        NO_KEYS, NO_KEYS, [], num_sparse=1, sparse_types=[dtypes.DT_INT64],
        ragged_value_types=[], ragged_split_types=[], dense_shapes=[], ctx=ctx,
    )  # fmt: skip


def test_each_node_keeps_its_config_for_the_same_key_arrays(monkeypatch) -> None:
    built = []
    build = parsing_ops._config
    monkeypatch.setattr(parsing_ops, "_config", lambda *args: built.append(args[0]) or build(*args))
    ctx = types.SimpleNamespace(cached=None)
    a, b = np.array([b"a"], object), np.array([b"b"], object)
    runs = ((a, [1]), (a, [1]), (b, [2, 3]), (np.array([b"a"], object), [1]), (b, [2, 3]), (b, [2, 3]))
    for keys, values in runs:
        got = _parse(keys, ctx)
        assert got[1].tolist() == values and ctx.cached[0][0] is keys
    # built on the first run, on each change of key arrays, never for the same arrays again
    assert [id(keys) for keys in built] == [id(a), id(b), id(runs[3][0]), id(b)]
    for keys, _ in runs:
        assert [x.tolist() for x in _parse(keys, ctx)] == [x.tolist() for x in _parse(keys, None)]
