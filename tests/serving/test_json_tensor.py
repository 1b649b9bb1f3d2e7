"""serving.rest_api.json_tensor and json_examples: TF Serving's json_tensor_test.cc cases, and the fast path
against the walk."""

import json
import math

import numpy as np
import pytest

from apis.tensorflow.core.framework import types_pb2
from apis.tensorflow_serving.apis import classification_pb2, predict_pb2, regression_pb2
from runtime import errors
from serving.inference import tensor_codec
from serving.rest_api import json_examples, json_tensor, json_text

F, D, I32, I64, S, B, U64, U32, I8 = (
    types_pb2.DT_FLOAT,
    types_pb2.DT_DOUBLE,
    types_pb2.DT_INT32,
    types_pb2.DT_INT64,
    types_pb2.DT_STRING,
    types_pb2.DT_BOOL,
    types_pb2.DT_UINT64,
    types_pb2.DT_UINT32,
    types_pb2.DT_INT8,
)


def fill(text: str, infos: dict[str, int]):
    request = predict_pb2.PredictRequest()
    form = json_tensor.fill_predict_request(json_text.loads(text.encode()), request, lambda name: infos)
    return form, {k: tensor_codec.decode(v) for k, v in request.inputs.items()}, request


def fill_error(text: str, infos: dict[str, int]) -> str:
    with pytest.raises(errors.OpError) as e:
        fill(text, infos)
    return e.value.message


def test_single_unnamed_tensor():
    form, tensors, request = fill('{"instances": [[1,2],[3,4],[5,6]]}', {"default": I32})
    assert form == json_tensor.ROW
    assert tensors["default"].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert request.inputs["default"].dtype == I32
    assert list(request.inputs["default"].tensor_shape.dim) == list(
        tensor_codec.make_tensor_proto(np.int32([[1, 2], [3, 4], [5, 6]])).tensor_shape.dim
    )


def test_mixed_numbers_for_floats_and_precision_loss():
    _, tensors, _ = fill('{"instances": [1, 2.0, 3, 4, 5.003, 0.007, 0.0, 1435774380]}', {"default": F})
    assert tensors["default"].dtype == np.float32
    assert tensors["default"].tolist() == np.float32([1, 2, 3, 4, 5.003, 0.007, 0, 1435774380]).tolist()
    _, tensors, _ = fill('{"instances": [1.0, 2, 0.662, 0]}', {"default": D})
    assert tensors["default"].tolist() == [1.0, 2.0, 0.662, 0.0]
    max_double = json.dumps(1.7976931348623157e308)
    _, tensors, _ = fill(f'{{"instances": [{max_double}, -{max_double}, 2.2250738585072014e-308]}}', {"d": F})
    assert tensors["d"].tolist() == [math.inf, -math.inf, 0.0]


def test_signature_name_and_base64():
    form, tensors, request = fill(
        '{"signature_name": "predict_images", "instances": [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}]}',
        {"default": S},
    )
    assert request.model_spec.signature_name == "predict_images"
    assert tensors["default"].tolist() == [b"hello", b"world"]
    _, tensors, _ = fill('{"instances": [[{"b64": "aGVsbG8="}], [{"b64": "d29ybGQ"}]]}', {"default": S})
    assert tensors["default"].tolist() == [[b"hello"], [b"world"]]  # unpadded b64 is read too
    _, tensors, _ = fill('{"instances": [{"default": [[{"b64": "aGVs bG8="}]]}]}', {"default": S})
    assert tensors["default"].shape == (1, 1, 1)


def test_multiple_named_tensors_rows_and_columns():
    infos = {"int_tensor": I32, "str_tensor": S, "float_tensor": F, "dbl_tensor": D}
    form, tensors, _ = fill(
        """{"instances": [
          {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"], "float_tensor": [1.0, NaN],
           "dbl_tensor": [NaN]},
          {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"], "float_tensor": [2.0, Infinity],
           "dbl_tensor": [2.0]}]}""",
        infos,
    )
    assert form == json_tensor.ROW
    assert tensors["int_tensor"].shape == (2, 3, 2)
    assert tensors["str_tensor"].tolist() == [[b"foo", b"bar"], [b"baz", b"bat"]]
    assert np.isnan(tensors["float_tensor"][0, 1]) and tensors["float_tensor"][1, 1] == np.inf
    assert tensors["dbl_tensor"].shape == (2, 1)
    form, tensors, _ = fill(
        '{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]], "str_tensor": ["foo", "bar"], '
        '"bin_tensor": {"b64": "aGVsbG8="}}}',
        {"int_tensor": I32, "str_tensor": S, "bin_tensor": S},
    )
    assert form == json_tensor.COLUMNAR
    assert tensors["int_tensor"].shape == (1, 3, 2)
    assert tensors["bin_tensor"].shape == () and tensors["bin_tensor"].item() == b"hello"
    _, tensors, _ = fill('{"inputs": [[[1,2],[3,4],[5,6]]]}', {"int_tensor": I32})
    assert tensors["int_tensor"].shape == (1, 3, 2)


def test_single_tensor_errors():
    infos = {"default": I32}
    assert "must be a string value" in fill_error('{"signature_name": 5, "instances": [[1,2]]}', infos)
    assert fill_error('{"instances": [[1,2]], "inputs": [[1,2]]}', infos).endswith(
        "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "
    )
    assert fill_error('{"instances": [[1,2],[3,4],[5,6,7]]}', infos) == (
        "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 "
        "but got: 3"
    )
    assert fill_error('{"instances": [[1,2],[3,4],[[5,6]]]}', infos) == (
        "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [2] but "
        "got: [1,2]"
    )
    assert "Expecting shape" in fill_error('{"instances": [1, [1]]}', infos)
    assert fill_error('{"instances": [[1,2],["a", "b"]]}', infos) == (
        "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"a\" Type: "
        "String is not of expected type: int32"
    )
    assert (
        fill_error('{"instances": []}', infos)
        == "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array"
    )
    assert fill_error("[1]", infos) == "JSON Value: [1] Is not object"
    assert fill_error('{"inputs": [[1, 2], [3]]}', infos) == (
        "Encountered list at unexpected size: 1 at level: 1 expected size: 2"
    )
    assert fill_error('{"inputs": [[1, 2], 3]}', infos) == (
        "JSON Value: 3 found at incorrect level: 2 in the JSON DOM. Expected at level: 2"
    )
    assert fill_error('{"inputs": [1, [2]]}', infos) == "Encountered list at unexpected level: 1 expected < 1"
    assert (
        fill_error('{"inputs": [true]}', {"x": F})
        == "JSON Value: true Type: True is not of expected type: float"
    )
    assert fill_error('{"inputs": [2147483648]}', infos).endswith("is not of expected type: int32")
    assert (
        fill_error('{"inputs": [1.5]}', {"x": types_pb2.DT_HALF})
        == "Conversion of JSON Value: 1.5 to type: half"
    )
    assert fill_error('{"inputs": [{"b64": "a"}]}', {"x": S}) == "Unable to base64 decode"
    assert fill_error('{"inputs": [{"b64": 1}]}', {"x": S}) == (
        'JSON Value: {\n    "b64": 1\n} not formatted correctly for base64 data'
    )
    assert fill_error('{"x": 1}', infos) == "Missing 'inputs' or 'instances' key"


def test_multiple_named_tensor_errors():
    infos = {"int_tensor": I32, "str_tensor": S}
    assert "Expecting shape" in fill_error(
        '{"instances": [{"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]},'
        '{"int_tensor": [[[7,8],[9,0],[1,2]]], "str_tensor": ["baz", "bat"]}]}',
        infos,
    )
    assert fill_error(
        '{"instances": [{"int_tensor": [[1,2],[3,4],[5,6],[7,8]], "str_tensor": ["foo", "bar"]},'
        '{"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"]}]}',
        infos,
    ) == (
        "Failed to process element: 1 key: int_tensor of 'instances' list. Error: INVALID_ARGUMENT: "
        "Expecting tensor size: 8 but got: 6"
    )
    assert fill_error(
        '{"instances": [{"int_tensor": [[1,2]], "str_tensor": ["foo"]}, [1, 20, 30]]}', infos
    ) == ("Expecting object but got list at item 1 of input list")
    assert fill_error(
        '{"instances": [["baz", "bar"], {"str_tensor": ["baz", "bat"]}]}', {"str_tensor": S}
    ) == ("Expecting value/list but got object at item 1 of input list")
    assert fill_error('{"instances": [{"int_tensor": [1]}]}', infos) == (
        "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"int_tensor\": [1]\n} keys must "
        "be equal to: int_tensor,str_tensor"
    )
    assert fill_error('{"instances": [{"int_tensor": [1], "nope": 1, "str_tensor": ["a"]}]}', infos) == (
        "Failed to process element: 0 key: nope of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does "
        "not have named input: nope"
    )
    assert fill_error('{"instances": [1, 2]}', infos) == (
        "instances is a plain list, but expecting list of objects as multiple input tensors required as per "
        "tensorinfo_map"
    )
    assert fill_error('{"inputs": [1, 2]}', infos) == (
        "inputs is a plain value/list, but expecting an object as multiple input tensors required as per "
        "tensorinfo_map"
    )
    assert (
        fill_error('{"inputs": {"int_tensor": [1]}}', infos)
        == "Missing named input: str_tensor in 'inputs' object."
    )


DENSE_CASES = [
    ("[[1, 2], [3, 4]]", I32),
    ("[[1, 2], [3, 4]]", I8),
    ("[[1, 2], [3, 4]]", F),
    ("[1.5, 2, -0.0, 1e300]", F),
    ("[1.5, 2, 1e300]", D),
    ('[["a", "b"], ["c", "\\u00e9"]]', S),
    ("[true, false]", B),
    ("[18446744073709551615, 0]", U64),
    ("[4294967295]", U32),
    ("[9223372036854775807, -9223372036854775808]", I64),
    ("[[], []]", F),
    ("5", F),
    ('"x"', S),
    ('[{"b64": "aGk="}, {"b64": ""}, {"b64": "AAEC"}]', S),
    ('[[{"b64": "aGk="}], [{"b64": "aA=="}]]', S),
]
NOT_DENSE_CASES = [
    ("[[1, 2], [3]]", I32),
    ("[1, true]", F),
    ("[1.5]", I32),
    ("[2147483648]", I32),
    ("[-1]", U32),
    ('[{"b64": "aGk"}]', S),  # base64 the bulk decoder leaves to the walk: unpadded,
    ('[{"b64": "a Gk="}]', S),  # with whitespace,
    ('[{"b64": "aGk=", "x": 1}]', S),  # not a b64 object
    ('[{"b64": "aGk="}, "hi"]', S),
    ("[[1], [[2]]]", I32),
    ('[1, "a"]', F),
    ("[null]", F),
]


@pytest.mark.parametrize("text,dtype", DENSE_CASES)
def test_the_fast_path_gives_what_the_walk_gives(text, dtype):
    value = json_text.loads(text.encode())
    fast = json_tensor._dense(value, dtype)
    assert fast is not None
    columns = json_tensor._Columns({"": dtype})
    columns.add("", value)
    slow = columns.single("")
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    assert np.array_equal(fast, slow, equal_nan=fast.dtype.kind == "f")


@pytest.mark.parametrize("text,dtype", NOT_DENSE_CASES)
def test_the_fast_path_declines_what_only_the_walk_can_answer(text, dtype):
    assert json_tensor._dense(json_text.loads(text.encode()), dtype) is None


def outputs(**arrays):
    return {name: tensor_codec.make_tensor_proto(np.asarray(v), dtype) for name, (v, dtype) in arrays.items()}


def test_row_and_columnar_responses_byte_for_byte():
    single = outputs(int_tensor=(np.int32([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]]), I32))
    assert json_tensor.predict_response_json(single, json_tensor.ROW) == (
        '{\n    "predictions": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]\n    ]\n}'
    )
    scalars = outputs(int_tensor=(np.int32([1, 2, 3, 4, 5]), I32))
    assert json_tensor.predict_response_json(scalars, json_tensor.ROW) == (
        '{\n    "predictions": [1, 2, 3, 4, 5\n    ]\n}'
    )
    assert json.loads(json_tensor.predict_response_json(scalars, json_tensor.COLUMNAR)) == {
        "outputs": [1, 2, 3, 4, 5]
    }
    several = outputs(
        int_tensor=(np.int32([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]]), I32),
        str_tensor=(np.array([[b"foo", b"bar"], [b"baz", b"bat"]], object), S),
        float_tensor=(np.float32([[1.0], [2.0]]), F),
        double_scalar_tensor=(np.float64([8.0, 9.0]), D),
        str_tensor_bytes=(np.array([[b"hello", b"world"], [b"tf", b"serving"]], object), S),
    )
    row = json_tensor.predict_response_json(several, json_tensor.ROW)
    assert json.loads(row) == {
        "predictions": [
            {
                "double_scalar_tensor": 8.0,
                "float_tensor": [1.0],
                "int_tensor": [[1, 2], [3, 4], [5, 6]],
                "str_tensor": ["foo", "bar"],
                "str_tensor_bytes": [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}],
            },
            {
                "double_scalar_tensor": 9.0,
                "float_tensor": [2.0],
                "int_tensor": [[7, 8], [9, 0], [1, 2]],
                "str_tensor": ["baz", "bat"],
                "str_tensor_bytes": [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}],
            },
        ]
    }
    assert '"str_tensor_bytes": [{\n                    "b64": "aGVsbG8="\n                }, {' in row
    columnar = json_tensor.predict_response_json(several, json_tensor.COLUMNAR)
    assert json.loads(columnar)["outputs"]["str_tensor_bytes"] == [
        [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}],
        [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}],
    ]
    assert columnar.startswith('{\n    "outputs": {\n        "double_scalar_tensor": [\n            8.0,\n')
    floats = outputs(float_tensor=(np.float32([[np.nan, np.inf], [3, -np.inf]]), F))
    assert json_tensor.predict_response_json(floats, json_tensor.ROW) == (
        '{\n    "predictions": [[NaN, Infinity], [3.0, -Infinity]\n    ]\n}'
    )
    empty = outputs(
        str_tensor=(np.empty((0, 1, 2), object), S), float_tensor=(np.empty((0, 3, 4), np.float32), F)
    )
    assert json_tensor.predict_response_json(empty, json_tensor.ROW) == '{\n    "predictions": []\n}'
    big = outputs(x=(np.uint64([2**64 - 1]), U64), y=(np.int64([-(2**63)]), I64), z=(np.bool_([True]), B))
    assert json.loads(json_tensor.predict_response_json(big, json_tensor.ROW)) == {
        "predictions": [{"x": 2**64 - 1, "y": -(2**63), "z": True}]
    }
    assert json_tensor.predict_response_json(
        outputs(s=(np.array(b'a\x01"', object), S)), json_tensor.COLUMNAR
    ) == ('{\n    "outputs": "a\\u0001\\""\n}')


SHAPES = [(7,), (5, 3), (4, 3, 2), (3, 0), (0, 2), (6, 1, 1, 2), ()]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("form", [json_tensor.ROW, json_tensor.COLUMNAR])
def test_a_response_rendered_in_runs_of_values_is_the_one_rendered_at_once(monkeypatch, shape, form):
    """Large outputs are rendered _CHUNK values at a time (memory); runs of one, two or three
    values, and of one, two or several rows, give the same bytes, for every writable type."""
    rng = np.random.default_rng(sum(shape) + len(shape))
    size = int(np.prod(shape))
    values = {
        "f": (rng.standard_normal(shape).astype(np.float32), F),
        "d": (rng.standard_normal(shape) * 1e10, D),
        "i": (rng.integers(-9, 9, shape).astype(np.int32), I32),
        "b": (rng.integers(0, 2, shape).astype(bool), B),
        "s": (np.array([f"v{i}".encode() for i in range(size)], object).reshape(shape), S),
        "s_bytes": (np.array([bytes([i % 256]) for i in range(size)], object).reshape(shape), S),
    }
    cases = [outputs(**{name: value}) for name, value in values.items()] + [outputs(**values)]
    for case in cases:
        if form == json_tensor.ROW and not shape:
            continue  # a scalar has no rows: an error either way
        monkeypatch.setattr(json_tensor, "_CHUNK", 1 << 30)
        whole = json_tensor.predict_response_json(case, form)
        for chunk in (1, 2, 3):
            monkeypatch.setattr(json_tensor, "_CHUNK", chunk)
            assert json_tensor.predict_response_json(case, form) == whole


def test_response_errors():
    with pytest.raises(errors.InvalidArgumentError, match="Cannot convert empty tensor map to JSON"):
        json_tensor.predict_response_json({}, json_tensor.ROW)
    with pytest.raises(
        errors.InvalidArgumentError, match="^Failed to write JSON value for tensor type: complex64$"
    ):
        json_tensor.predict_response_json(
            outputs(t=(np.complex64([1, 2]), types_pb2.DT_COMPLEX64)), json_tensor.ROW
        )
    with pytest.raises(errors.InvalidArgumentError, match="^Tensor name: t has no shape information $"):
        json_tensor.predict_response_json(outputs(t=(np.int32(1), I32)), json_tensor.ROW)
    mixed = outputs(a=(np.int32([[1, 2], [3, 4]]), I32), b=(np.array([[b"foo"]], object), S))
    with pytest.raises(
        errors.InvalidArgumentError, match="^Tensor name: b has inconsistent batch size: 1 expecting: 2$"
    ):
        json_tensor.predict_response_json(mixed, json_tensor.ROW)


def test_classify_regress_requests():
    request = regression_pb2.RegressionRequest()
    json_examples.fill_regression_request(
        json_text.loads(
            b"""{"signature_name": "custom", "context": {"query": "pizza", "location": ["sfo"]},
                "examples": [{"names": ["foo", "bar"], "ratings": [8.0, 9.0, NaN, Infinity], "age": 20},
                             {"names": ["baz", {"b64": "aGVsbG8="}], "ratings": 6.0, "intboolmix": [1, true, false]},
                             {"names": "bar", "ratings": -Infinity, "empty": []}]}"""
        ),
        request,
    )
    assert request.model_spec.signature_name == "custom"
    context = request.input.example_list_with_context.context.features.feature
    assert list(context["query"].bytes_list.value) == [b"pizza"]
    examples = request.input.example_list_with_context.examples
    assert list(examples[0].features.feature["age"].int64_list.value) == [20]
    ratings = list(examples[0].features.feature["ratings"].float_list.value)
    assert ratings[:2] == [8.0, 9.0] and math.isnan(ratings[2]) and ratings[3] == math.inf
    assert list(examples[1].features.feature["names"].bytes_list.value) == [b"baz", b"hello"]
    assert list(examples[1].features.feature["intboolmix"].int64_list.value) == [1, 1, 0]
    assert examples[2].features.feature["empty"].WhichOneof("kind") is None
    plain = classification_pb2.ClassificationRequest()
    json_examples.fill_classification_request(json_text.loads(b'{"examples": [{"x": 1}]}'), plain)
    assert plain.input.WhichOneof("kind") == "example_list"


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"signature_name": ["hello"], "examples": []}', "'signature_name' key must be a string"),
        ('{"context": [{"names": ["foo"]}]}', "Example must be JSON object but got JSON Array"),
        ('{"examples": {"names": ["foo", "bar"]}}', "Expecting 'examples' value to be an list/array"),
        ('{"examples": []}', "'examples' value is an empty array"),
        ('{"x": 1}', "When method is classify, key 'examples' is expected and was not found"),
        ('{"examples": [[{"names": ["foo"]}]]}', "Example must be JSON object but got JSON Array"),
        (
            '{"examples": [{"names": [10, null]}]}',
            "Feature: names has element with unexpected JSON type: Null",
        ),
        (
            '{"examples": [{"names": [10, 10.0]}]}',
            "Unexpected element type in feature: names expecting type: int64",
        ),
        (
            '{"examples": [{"names": [10, {"test": 10}]}]}',
            "names has element with unexpected JSON type: Object",
        ),
        ('{"examples": [{"names": [[10], 20]}]}', "names has element with unexpected JSON type: Array"),
        (
            '{"examples": [{"names": [20, 18446744073709551603]}]}',
            "has uint64_t element. Only int64_t is supported.",
        ),
    ],
)
def test_classify_regress_request_errors(text, message):
    with pytest.raises(errors.InvalidArgumentError) as e:
        json_examples.fill_classification_request(
            json_text.loads(text.encode()), classification_pb2.ClassificationRequest()
        )
    assert message in e.value.message


def test_classify_regress_results():
    result = classification_pb2.ClassificationResult()
    for scores in ((0.2, 0.7, 0.1), (0.7, 0.1, 0.2)):
        classes = result.classifications.add().classes
        for label, score in zip(("car", "bike", "bus"), scores):
            classes.add(label=label, score=score)
    assert json_examples.classification_json(result) == (
        '{\n    "results": [[["car", 0.2], ["bike", 0.7], ["bus", 0.1]], [["car", 0.7], ["bike", 0.1], '
        '["bus", 0.2]]\n    ]\n}'
    )
    regression = regression_pb2.RegressionResult()
    for value in (0.2, math.inf, 1.0, -math.inf, math.nan):
        regression.regressions.add(value=value)
    assert (
        json_examples.regression_json(regression)
        == '{\n    "results": [0.2, Infinity, 1.0, -Infinity, NaN]\n}'
    )
    with pytest.raises(errors.InvalidArgumentError, match="empty ClassificationResults"):
        json_examples.classification_json(classification_pb2.ClassificationResult())
    with pytest.raises(errors.InvalidArgumentError, match="empty RegressionResults"):
        json_examples.regression_json(regression_pb2.RegressionResult())
    assert json.loads(json_tensor.error_json('Bad key: "key"')) == {"error": 'Bad key: "key"'}
