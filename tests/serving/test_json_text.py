"""serving.rest_api.json_text (rapidjson's reading and its error texts) and serving.rest_api.json_writer (its writing,
protobuf's printing)."""

import math
import random

import numpy as np
import pytest

from apis.tensorflow_serving.apis import get_model_status_pb2, model_pb2
from runtime import errors
from serving.rest_api import json_text, json_writer

# (text, rapidjson's message, offset) for what its iterative parser refuses.
REFUSED = [
    (b"  ", "The document is empty.", 2),
    (b"}", "The document is empty.", 0),
    (b"hello", "Invalid value.", 0),
    (b"\xef\xbb\xbf{}", "Invalid value.", 0),
    (b'{"a":1', "Missing a comma or '}' after an object member.", 6),
    (b'{"a":1 "b":2}', "Missing a comma or '}' after an object member.", 7),
    (b"[1,2", "Missing a comma or ']' after an array element.", 4),
    (b"[01]", "Missing a comma or ']' after an array element.", 2),
    (b"{", "Missing a name for object member.", 1),
    (b'{"a":1,}', "Missing a name for object member.", 7),
    (b'{"a"', "Missing a colon after a name of object member.", 4),
    (b'{"a":', "Invalid value.", 5),
    (b"[1,]", "Invalid value.", 3),
    (b'{"a": tru}', "Invalid value.", 9),
    (b"[-x]", "Invalid value.", 2),
    (b"[Nax]", "Invalid value.", 3),
    (b'"abc', "Missing a closing quotation mark in string.", 4),
    (b'["a\x01"]', "Invalid encoding in string.", 3),
    (b'["\\x"]', "Invalid escape character in string.", 2),
    (b'["\\u12G4"]', "Incorrect hex digit after \\u escape in string.", 2),
    (b'["\\ud800"]', "The surrogate pair in string is invalid.", 2),
    (b'["\\udc00"]', "The surrogate pair in string is invalid.", 2),
    (b"[1.]", "Miss fraction part in number.", 3),
    (b"[1e+]", "Miss exponent in number.", 4),
    (b"[1e400]", "Number too big to be stored in double.", 1),
    (b"[" + b"1" * 310 + b"]", "Number too big to be stored in double.", 1),
]


@pytest.mark.parametrize("text,message,offset", REFUSED)
def test_refused_texts_get_rapidjsons_message_and_offset(text, message, offset):
    assert json_text.diagnose(text) == (message, offset)
    with pytest.raises(errors.InvalidArgumentError) as e:
        json_text.loads(text)
    assert e.value.message == f"JSON Parse error: {message} at offset: {offset}"


def test_empty_body():
    with pytest.raises(errors.InvalidArgumentError, match="^JSON Parse error: The document is empty$"):
        json_text.loads(b"")


def test_what_rapidjson_reads_beyond_strict_json():
    doc = json_text.loads(b'{"a": [NaN, -NaN, Inf, -Inf, Infinity, -Infinity], "s": "Inf NaN"} trailing')
    values = doc["a"]
    assert math.isnan(values[0]) and math.isnan(values[1])
    assert values[2:] == [math.inf, -math.inf, math.inf, -math.inf]
    assert doc["s"] == "Inf NaN"
    big = json_text.loads(b'{"big": 123456789012345678901234567890}')["big"]  # past 64 bits: a double
    assert float(big) == 1.2345678901234568e29
    raw = json_text.loads(b'{"s": "\xff\xfe"}')["s"]  # not UTF-8: kept as the bytes sent
    assert raw.encode("utf-8", "surrogateescape") == b"\xff\xfe"
    assert json_text.diagnose(b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}") is None


def test_decimal_tokens_are_write_decimal():
    """json_tensor_test's FromJsonSingleFloatTensorSixDigitPrecision and NonFinite, and more."""
    floats = np.float32([9000000, 999999, 0.5, 0.0003, 0.00003, 555557.5, np.nan, np.inf, -np.inf, 3, -0.0])
    assert json_writer.decimal_tokens(floats) == [
        "9e+06",
        "999999.0",
        "0.5",
        "0.0003",
        "3e-05",
        "555557.5",
        "NaN",
        "Infinity",
        "-Infinity",
        "3.0",
        "-0.0",
    ]
    assert json_writer.decimal_tokens(np.float32([1435774380, 0.1, 1 / 3])) == [
        "1.43577434e+09",
        "0.1",
        "0.333333343",
    ]
    assert json_writer.decimal_tokens(np.float64([0.1, 1 / 3, 1e300])) == [
        "0.1",
        "0.33333333333333331",
        "1e+300",
    ]


def test_decimal_tokens_read_back_as_the_values():
    values = np.random.default_rng(0).standard_normal(2000).astype(np.float32) * np.float32(1e3) ** np.arange(
        -3, 3
    ).repeat(334)[:2000].astype(np.float32)
    tokens = json_writer.decimal_tokens(values)
    assert np.array_equal(np.float32([float(t) for t in tokens]), values)
    # A few values at a time take the scalar path: the same tokens.
    assert [json_writer.decimal_tokens(values[i : i + 1])[0] for i in range(len(values))] == tokens
    doubles = values.astype(np.float64) / 3
    assert [
        json_writer.decimal_tokens(doubles[i : i + 1])[0] for i in range(len(values))
    ] == json_writer.decimal_tokens(doubles)


def test_double_text_is_rapidjsons_prettify():
    cases = [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (100.0, "100.0"),
        (1e20, "100000000000000000000.0"),
        (1e21, "1e21"),
        (1.5e22, "1.5e22"),
        (1e-6, "0.000001"),
        (1.2e-6, "0.0000012"),
        (1e-7, "1e-7"),
        (-2.5, "-2.5"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
    ]
    assert [(v, json_writer.double_text(v)) for v, _ in cases] == cases
    assert json_writer.double_text(math.nan) is None


def test_debug_string_is_single_line_and_cut_after_256_bytes():
    assert json_writer.debug_string({"instances": [1, 2.5, "x", {"b64": "aGk="}, None, True]}) == (
        '{\n    "instances": [1, 2.5, "x", {\n            "b64": "aGk="\n        }, null, true]\n}'
    )
    long = json_writer.debug_string(list(range(200)))
    assert len(long) >= 256 and long.startswith("[0, 1, 2") and not long.endswith("]")
    assert json_writer.debug_string([1, math.nan, 2]) == "[1"  # rapidjson's writer refuses NaN
    assert json_writer.debug_string('a"b\\\n\x01') == '"a\\"b\\\\\\n\\u0001"'


def test_pretty_writer_places_commas_and_newlines_as_rapidjson():
    writer = json_writer.PrettyWriter()
    writer.start_object()
    writer.key("a")
    writer.start_array()
    writer.single_line = True
    writer.raw("1")
    writer.raw("2")
    writer.single_line = False
    writer.end_array()
    writer.key("b")
    writer.start_array()
    writer.raw("3")
    writer.end_array()
    writer.key("c")
    writer.start_object()
    writer.end_object()
    writer.end_object()
    assert writer.text() == '{\n    "a": [1, 2\n    ],\n    "b": [\n        3\n    ],\n    "c": {}\n}'


def test_nested_renders_arrays_in_both_forms():
    tokens = [str(i) for i in range(6)]
    assert json_writer.nested(tokens, (2, 3), 2, True) == "[[0, 1, 2], [3, 4, 5]]"
    assert json_writer.nested(tokens, (3, 2), 1, False) == (
        "[\n        [\n            0,\n            1\n        ],\n        [\n            2,\n            3\n"
        "        ],\n        [\n            4,\n            5\n        ]\n    ]"
    )
    assert json_writer.nested([], (2, 0), 1, False) == "[\n        [],\n        []\n    ]"
    assert json_writer.nested([], (0, 3), 1, True) == "[]"
    assert json_writer.nested(["7"], (), 1, False) == "7"


def test_proto_json_is_protobufs_printer_in_field_order():
    spec = model_pb2.ModelSpec(name="m")
    spec.version.value = 3
    assert json_writer.proto_json(spec, preserve_names=True) == (
        '{\n "name": "m",\n "version": "3",\n "signature_name": ""\n}\n'
    )
    status = get_model_status_pb2.GetModelStatusResponse()
    status.model_version_status.add(version=2, state=30).status.SetInParent()
    assert json_writer.proto_json(status) == (
        '{\n "model_version_status": [\n  {\n   "version": "2",\n   "state": "AVAILABLE",\n'
        '   "status": {\n    "error_code": "OK",\n    "error_message": ""\n   }\n  }\n ]\n}\n'
    )
    assert (
        json_writer.proto_json(get_model_status_pb2.GetModelStatusResponse())
        == '{\n "model_version_status": []\n}\n'
    )


def test_nested_run_is_each_rows_nested_joined():
    """``nested_run`` (one join for a run of rows) writes what ``nested`` per row, joined, writes:
    generated shapes (empty dimensions too), depths, both layouts and row separators."""
    rng = random.Random(1)
    for _ in range(4000):
        inner = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 4)))
        rows, per_row = rng.randint(0, 6), math.prod(inner)
        tokens = [str(rng.randint(0, 99)) for _ in range(rows * per_row)]
        depth, single_line = rng.randint(0, 3), rng.random() < 0.5
        row_sep = rng.choice([", ", ",\n    ", "|"])
        want = row_sep.join(
            json_writer.nested(tokens[i * per_row : (i + 1) * per_row], inner, depth, single_line)
            for i in range(rows)
        )
        assert json_writer.nested_run(tokens, rows, inner, depth, single_line, row_sep) == want
