"""serving.rest_api.json_bulk and the other bulk paths of REST answers and bodies, each held
equal to its per-value twin: float32 values written as ``WriteDecimal`` writes them (every
class of bit pattern, the edges of six and nine digits, ties), rows and separators as
``nested_run`` lays them out, whole answers as the per-value path writes them, several outputs
as rapidjson's PrettyWriter lays them out, b64 objects decoded and strings quoted in bulk."""

from __future__ import annotations

import base64
import math
import random

import numpy as np
import pytest

from runtime import dtypes, errors
from serving.rest_api import json_bulk, json_tensor, json_text, json_writer


def rendered(values: np.ndarray) -> list[str]:
    rows = json_bulk.decimal_rows(values)
    return [row[row != 0].tobytes().decode("ascii") for row in rows]


def per_value(values: np.ndarray) -> list[str]:
    return [json_writer._decimal_token(float(v), True) for v in values.reshape(-1)]


def edge_values() -> np.ndarray:
    """Powers of ten and their neighbours, whole numbers about six and nine digits, values with
    exactly six and seven significant digits, ties of %.6g, the ends of float32's range."""
    tens = np.float32([10.0**k for k in range(-45, 39)])
    whole = np.float32([99999, 100000, 999999, 1000000, 9999999, 16777216, 123456789, 999999999, 1e9])
    digits = np.float32([1.015625, 0.1234565, 1.234565, 555557.5, 0.30000001, 3.4028235e38, 1.17549435e-38])
    base = np.concatenate([tens, whole, digits, np.float32([0, 1, 2.5, 1e-5, 1e-4, 1.4e-45])])
    with np.errstate(over="ignore"):
        neighbours = [np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))]
    values = np.concatenate([base, *neighbours])
    values = values[np.isfinite(values)]
    return np.concatenate([values, -values, np.float32([np.nan, -np.nan, np.inf, -np.inf, -0.0])])


@pytest.mark.parametrize("seed", range(3))
def test_decimal_rows_are_write_decimal_on_any_bit_pattern(seed):
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        assert rendered(patterns) == per_value(patterns)


def test_decimal_rows_are_write_decimal_on_edges_and_model_like_values():
    rng = np.random.default_rng(7)
    for values in (
        edge_values(),
        (rng.standard_normal(50_000) * 10.0 ** rng.integers(-8, 9, 50_000)).astype(np.float32),
        (rng.integers(-(10**7), 10**7, 50_000) / 10.0 ** rng.integers(0, 8, 50_000)).astype(np.float32),
        (np.arange(50_000, dtype=np.float32) % 1000 / 7) * np.float32(0.5) + np.float32(2),
    ):
        assert rendered(values) == per_value(values)
    assert rendered(np.float32([9000000, 999999, 0.5, 0.00003, 3, -0.0, 0.1])) == [
        "9e+06",
        "999999.0",
        "0.5",
        "3e-05",
        "3.0",
        "-0.0",
        "0.1",
    ]


def test_doubtful_values_take_the_per_value_path(monkeypatch):
    """Where float64 cannot settle a value's digits, the per-value path writes it: a tie
    (1.015625 to six digits) is one; every value is one when the margin is made huge."""
    monkeypatch.setattr(json_bulk, "_digits", _doubting(json_bulk._digits))
    calls = []
    real = json_writer._decimal_token
    monkeypatch.setattr(json_writer, "_decimal_token", lambda v, is32: calls.append(v) or real(v, is32))
    values = (np.random.default_rng(3).standard_normal(500)).astype(np.float32)
    assert rendered(values) == [real(float(v), True) for v in values]
    assert len(calls) == len(values)


def _doubting(digits):
    def doubting(magnitude, precision):
        rounded, exponent, scaled, doubt = digits(magnitude, precision)
        return rounded, exponent, scaled, np.ones_like(doubt)

    return doubting


def test_nested_rows_are_nested_run_of_decimal_tokens():
    rng = random.Random(4)
    values_rng = np.random.default_rng(4)
    for _ in range(300):
        inner = tuple(rng.randint(1, 5) for _ in range(rng.randint(0, 4)))
        rows = rng.randint(1, 40)
        values = (values_rng.standard_normal((rows, *inner)) * 10.0 ** rng.randint(-6, 9)).astype(np.float32)
        depth, single_line = rng.randint(0, 3), rng.random() < 0.5
        row_sep = rng.choice([", ", ",\n    ", "|"])
        want = json_writer.nested_run(
            json_writer.decimal_tokens(values), rows, inner, depth, single_line, row_sep
        )
        assert json_bulk.nested_rows(values, rows, inner, depth, single_line, row_sep) == want


@pytest.mark.parametrize("form", ["row", "columnar"])
def test_answers_are_the_per_value_paths(monkeypatch, form):
    """Whole answers with the bulk path on and off: large float32 outputs of several shapes,
    alone and beside other outputs, and runs of rows that end part-way (``_CHUNK``)."""
    rng = np.random.default_rng(5)
    monkeypatch.setattr(json_tensor, "_CHUNK", 700)
    cases = [
        {"y": (rng.standard_normal((3000, 1)).astype(np.float32), dtypes.DT_FLOAT)},
        {"y": (rng.standard_normal((50, 7, 3)).astype(np.float32), dtypes.DT_FLOAT)},
        {"y": (rng.standard_normal(2500).astype(np.float32), dtypes.DT_FLOAT)},
        {
            "a": (rng.standard_normal((400, 2)).astype(np.float32), dtypes.DT_FLOAT),
            "b": (np.arange(400, dtype=np.int64), dtypes.DT_INT64),
            "c_bytes": (np.array([b"\x00\xff"] * 400, object), dtypes.DT_STRING),
        },
    ]
    for outputs in cases:
        bulk = json_tensor.outputs_json(outputs, form)
        with monkeypatch.context() as off:
            off.setattr(json_bulk, "renders", lambda *args: False)
            assert json_tensor.outputs_json(outputs, form) == bulk


def pretty_writer_rows(arrays: dict) -> str:
    """``MakeRowFormatJsonFromTensors`` of several outputs through PrettyWriter, call by call
    as TF Serving makes them: the reference the one format per row is held to."""
    writer = json_writer.PrettyWriter()
    writer.start_object()
    writer.key(json_tensor.PREDICTIONS_KEY)
    writer.start_array()
    depth = writer.depth + 1
    items = {
        name: [
            text
            for rows in json_tensor._row_chunks(name, array, dtype, depth + array.ndim - 1, depth, True)
            for text in rows
        ]
        for name, (array, dtype) in arrays.items()
    }
    for i in range(len(next(iter(arrays.values()))[0])):
        writer.start_object()
        writer.single_line = True
        for name in arrays:
            writer.key(name)
            writer.raw(items[name][i])
        writer.single_line = False
        writer.end_object()
    writer.end_array()
    writer.end_object()
    return writer.text()


def test_several_outputs_in_rows_are_what_pretty_writer_writes():
    rng = random.Random(6)
    names = ["a", "b_bytes", 'q"uote', "per%cent", "s", "z"]
    for _ in range(300):
        batch = rng.randint(0, 5)
        arrays = {}
        for name in rng.sample(names, rng.randint(2, 4)):
            shape = (batch, *(rng.randint(1, 3) for _ in range(rng.randint(0, 2))))
            kind = rng.choice(["float", "int", "bool", "str"])
            if kind == "float":
                arrays[name] = (
                    np.float32(np.random.default_rng(batch).standard_normal(shape)),
                    dtypes.DT_FLOAT,
                )
            elif kind == "int":
                arrays[name] = (np.arange(math.prod(shape), dtype=np.int64).reshape(shape), dtypes.DT_INT64)
            elif kind == "bool":
                arrays[name] = (np.ones(shape, bool), dtypes.DT_BOOL)
            else:
                strings = np.empty(math.prod(shape), object)
                strings[:] = [rng.choice([b"w", b'q"', b"\xff", b"\n"]) for _ in range(strings.size)]
                arrays[name] = (strings.reshape(shape), dtypes.DT_STRING)
        arrays = {name: arrays[name] for name in sorted(arrays)}
        assert json_tensor.outputs_json(arrays, "row") == pretty_writer_rows(arrays)


def test_b64_objects_decoded_in_bulk_are_decode_base64():
    rng = random.Random(8)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= \n-_"
    taken = 0
    for _ in range(20_000):
        values = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.5:
                values.append({"b64": base64.b64encode(rng.randbytes(rng.randint(0, 7))).decode()})
            elif kind < 0.9:
                values.append({"b64": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))})
            elif kind < 0.95:
                values.append({"b64": 5})
            else:
                values.append({"b64": "QQ==", "x": 1})
        bulk = json_text.decode_base64_all(values)
        try:
            each = [json_text.decode_base64(v) for v in values]
        except errors.OpError:
            each = None
        if bulk is not None:
            taken += 1
            assert bulk == each, values
    assert taken > 5000


def test_strings_quoted_in_bulk_are_quote(monkeypatch):
    rng = random.Random(9)
    each = []
    real = json_writer.quote
    with monkeypatch.context() as counted:
        counted.setattr(json_writer, "quote", lambda text: each.append(text) or real(text))
        assert json_writer.quote_all(["word-1", "é", "", "\udcff %"]) == [
            '"word-1"',
            '"é"',
            '""',
            '"\udcff %"',
        ]
    assert not each  # plain texts: not one at a time
    plain, special = ["a", "é", "\udcff", " ", "%"], ['"', "\\", "\x00", "\x01", "\x1f", "\n"]
    for _ in range(20_000):
        pool = plain + special if rng.random() < 0.3 else plain
        texts = [
            "".join(rng.choice(pool) for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(0, 5))
        ]
        assert json_writer.quote_all(texts) == [json_writer.quote(t) for t in texts]
