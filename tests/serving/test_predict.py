"""serving.inference.predict against a hand-built half_plus_two-style signature set and a numpy Session.

Texts and codes are those of TF Serving's predict_util.cc / predict_util_test.cc and TF's
saved_model::GetInputValues and DirectSession feed check.
"""

import re
import time
from types import SimpleNamespace

import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2, types_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from apis.tensorflow_serving.apis import predict_pb2
from runtime import errors
from serving.inference import tensor_codec
from serving.inference.predict import predict, run_predict
from serving.lifecycle.servable import Servable

FLOAT, STRING = types_pb2.DT_FLOAT, types_pb2.DT_STRING


def tensor_info(name, dtype=FLOAT, dims=(-1,)):
    info = meta_graph_pb2.TensorInfo(name=name, dtype=dtype)
    for d in dims:
        info.tensor_shape.dim.add().size = d
    return info


def signature(inputs, outputs, method_name="tensorflow/serving/predict", defaults=None):
    sig = meta_graph_pb2.SignatureDef(method_name=method_name)
    for alias, info in inputs.items():
        sig.inputs[alias].CopyFrom(info)
    for alias, info in outputs.items():
        sig.outputs[alias].CopyFrom(info)
    for alias, value in (defaults or {}).items():
        sig.defaults[alias].CopyFrom(tensor_codec.make_tensor_proto(value))
    return sig


class NumpySession:
    """A Session whose tensors are numpy functions of the feeds; records each run."""

    def __init__(self, functions):
        self.functions = functions
        self.runs = []

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        self.runs.append((list(fetches), dict(feed_dict or {}), options))
        return [np.asarray(self.functions[name](feed_dict)) for name in fetches]


class FakeCore:
    def __init__(self, servables, options=None):
        self.servables = {s.name: s for s in servables}
        self.options = options

    def pinned(self, model_spec, deadline=None):
        if model_spec.name not in self.servables:
            raise errors.NotFoundError(
                None, None, f"Servable not found for request: Latest({model_spec.name})"
            )
        return self.servables[model_spec.name]


def half_plus_two(options=None, extra_signatures=None):
    session = NumpySession(
        {
            "y:0": lambda f: 0.5 * f["x:0"] + 2,
            "y2:0": lambda f: 0.5 * f["x:0"] + 3,
            "y3:0": lambda f: 0.5 * f["x2:0"] + 3,
            "k_out:0": lambda f: f["k:0"] * 10,
        }
    )
    mgd = meta_graph_pb2.MetaGraphDef()
    defs = {
        "serving_default": signature({"x": tensor_info("x:0")}, {"y": tensor_info("y:0")}),
        "two_outputs": signature(
            {"x": tensor_info("x:0")}, {"y": tensor_info("y:0"), "y2": tensor_info("y2:0")}
        ),
        "classify_x2_to_y3": signature(
            {"inputs": tensor_info("x2:0")}, {"scores": tensor_info("y3:0")}, "tensorflow/serving/classify"
        ),
        "with_default": signature(
            {"x": tensor_info("x:0"), "k": tensor_info("k:0", types_pb2.DT_INT32, ())},
            {"y": tensor_info("y:0"), "k_out": tensor_info("k_out:0", types_pb2.DT_INT32, ())},
            defaults={"k": np.int32(7)},
        ),
        "odd_method": signature({"x": tensor_info("x:0")}, {"y": tensor_info("y:0")}, "not/supported/method"),
        **(extra_signatures or {}),
    }
    for key, sig in defs.items():
        mgd.signature_def[key].CopyFrom(sig)
    bundle = SimpleNamespace(session=session, meta_graph_def=mgd, signature_defs=mgd.signature_def)
    return FakeCore([Servable("half_plus_two", 123, bundle)], options), session


def request(signature_name="", model="half_plus_two", **inputs):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature_name
    for alias, value in inputs.items():
        if isinstance(value, tensor_pb2.TensorProto):
            req.inputs[alias].CopyFrom(value)
        else:
            req.inputs[alias].CopyFrom(tensor_codec.make_tensor_proto(value))
    return req


def float_proto(*values, dims=None):
    proto = tensor_pb2.TensorProto(dtype=FLOAT, float_val=values)
    for d in dims or ():
        proto.tensor_shape.dim.add().size = d
    return proto


def call_error(core, req):
    with pytest.raises(errors.OpError) as info:
        predict(core, req)
    return info.value


# --------------------------------------------------------------------------------------------
# success


def test_prediction_success_matches_tf_serving_expected_response():
    core, _ = half_plus_two()
    response = predict(core, request(x=float_proto(2.0)))
    expected = predict_pb2.PredictResponse()
    expected.model_spec.name = "half_plus_two"
    expected.model_spec.signature_name = "serving_default"
    expected.model_spec.version.value = 123
    expected.outputs["y"].dtype = FLOAT
    expected.outputs["y"].float_val.append(3.0)
    expected.outputs["y"].tensor_shape.SetInParent()
    assert response == expected


def test_batch_input_and_aliases_to_tensor_names():
    core, session = half_plus_two()
    response = predict(core, request(x=np.float32([[1.0], [2.0], [3.0]])))
    out = response.outputs["y"]
    assert [d.size for d in out.tensor_shape.dim] == [3, 1]
    assert list(out.float_val) == [2.5, 3.0, 3.5]
    fetches, feeds, _ = session.runs[-1]
    assert fetches == ["y:0"] and list(feeds) == ["x:0"]


def test_all_outputs_without_filter_and_only_filtered_with_one():
    core, session = half_plus_two()
    response = predict(core, request("two_outputs", x=float_proto(2.0)))
    assert sorted(response.outputs) == ["y", "y2"]
    req = request("two_outputs", x=float_proto(2.0))
    req.output_filter.append("y2")
    response = predict(core, req)
    assert list(response.outputs) == ["y2"] and list(response.outputs["y2"].float_val) == [4.0]
    assert session.runs[-1][0] == ["y2:0"]


def test_named_classification_signature_works_for_predict():
    core, _ = half_plus_two()
    response = predict(core, request("classify_x2_to_y3", inputs=float_proto(2.0)))
    assert list(response.outputs["scores"].float_val) == [4.0]
    assert response.model_spec.signature_name == "classify_x2_to_y3"


def test_signature_defaults_fill_missing_inputs():
    core, session = half_plus_two()
    response = predict(core, request("with_default", x=float_proto(2.0)))
    assert list(response.outputs["k_out"].int_val) == [70]
    assert session.runs[-1][1]["k:0"] == 7
    response = predict(core, request("with_default", x=float_proto(2.0), k=np.int32(1)))
    assert list(response.outputs["k_out"].int_val) == [10]


def test_deadline_becomes_session_timeout():
    core, session = half_plus_two()
    predict(core, request(x=float_proto(2.0)), deadline=2.5)
    assert session.runs[-1][2].timeout_in_ms == 2500
    predict(core, request(x=float_proto(2.0)))
    assert session.runs[-1][2] is None  # no deadline: the Session default, no timeout
    predict(core, request(x=float_proto(2.0)), deadline=-1)
    assert session.runs[-1][2].timeout_in_ms == 1


def test_outputs_as_tensor_content_when_the_server_says_so():
    core, _ = half_plus_two(SimpleNamespace(enable_serialization_as_tensor_content=True))
    out = predict(core, request(x=np.float32([1.0, 2.0]))).outputs["y"]
    assert not out.float_val and np.frombuffer(out.tensor_content, np.float32).tolist() == [2.5, 3.0]


def test_method_name_check_only_when_enabled():
    core, _ = half_plus_two()
    assert predict(core, request("odd_method", x=float_proto(2.0))).outputs["y"].float_val == [3.0]
    core, _ = half_plus_two(SimpleNamespace(enable_signature_method_name_check=True))
    error = call_error(core, request("odd_method", x=float_proto(2.0)))
    assert error.code == errors.INTERNAL
    assert error.message == (
        "Expected prediction signature method_name to be one of {tensorflow/serving/predict, "
        "tensorflow/serving/classify, tensorflow/serving/regress}. Was: not/supported/method"
    )
    assert predict(core, request("classify_x2_to_y3", inputs=float_proto(2.0)))


# --------------------------------------------------------------------------------------------
# errors: (request, code, exact text)


def _extra():
    return request(unknown_key1=np.array([b"any_value"], object), unknown_key2=float_proto(1.0, dims=[1]))


def _filter(*aliases):
    req = request(x=float_proto(2.0))
    req.output_filter.extend(aliases)
    return req


def _no_model_spec():
    req = request(x=float_proto(2.0))
    req.ClearField("model_spec")
    return req


ERRORS = {
    "missing model spec": (_no_model_spec, errors.INVALID_ARGUMENT, "Missing ModelSpec"),
    "unknown model": (
        lambda: request(model="nope", x=float_proto(2.0)),
        errors.NOT_FOUND,
        "Servable not found for request: Latest(nope)",
    ),
    "missing signature": (
        lambda: request("nope", x=float_proto(2.0)),
        errors.FAILED_PRECONDITION,
        'Serving signature key "nope" not found.',
    ),
    "extra inputs": (
        _extra,
        errors.INVALID_ARGUMENT,
        "input size does not match signature: 2!=1 len({unknown_key1,unknown_key2}) != len({x}). "
        "Sent extra: {unknown_key1,unknown_key2}. Missing but required: {x}.",
    ),
    "no inputs": (
        lambda: request(),
        errors.INVALID_ARGUMENT,
        "input size does not match signature: 0!=1 len({}) != len({x}). Sent extra: {}. "
        "Missing but required: {x}.",
    ),
    "wrong input name": (
        lambda: request(wrong=float_proto(2.0)),
        errors.INVALID_ARGUMENT,
        "Signature input alias: x(feed name: x:0) not found in request and no default value "
        "provided. Inputs expected to be in the request {wrong}, or default input alias set: ",
    ),
    "invalid name next to defaults": (
        lambda: request("with_default", x=float_proto(2.0), bogus=float_proto(1.0)),
        errors.INVALID_ARGUMENT,
        "Inputs contains invalid name. Used request inputs: x, request input: bogus,x",
    ),
    "bool for float": (
        lambda: request(x=tensor_pb2.TensorProto(dtype=types_pb2.DT_BOOL, bool_val=[True])),
        errors.INVALID_ARGUMENT,
        "Expects arg[0] to be float but bool is provided",
    ),
    "string for float": (
        lambda: request(x=np.array([b"any_value"], object)),
        errors.INVALID_ARGUMENT,
        "Expects arg[0] to be float but string is provided",
    ),
    "second input with wrong dtype": (
        lambda: request("with_default", x=float_proto(2.0), k=np.int64(1)),
        errors.INVALID_ARGUMENT,
        "Expects arg[0] to be int32 but int64 is provided",
    ),
    "unparsable tensor": (
        lambda: request(
            x=tensor_pb2.TensorProto(dtype=FLOAT, tensor_shape={"dim": [{"size": 3}]}, tensor_content=b"1")
        ),
        errors.INVALID_ARGUMENT,
        "tensor parsing error: x",
    ),
    "huge claimed shape, no data": (
        lambda: request(x=float_proto(dims=[1 << 20, 1 << 20])),
        errors.INVALID_ARGUMENT,
        "tensor parsing error: x",
    ),
    "unknown output filter": (
        lambda: _filter("output_filter"),
        errors.INVALID_ARGUMENT,
        "output tensor alias not found in signature: output_filter Outputs expected to be in the set {y}.",
    ),
    "duplicate output filter": (
        lambda: _filter("y", "y"),
        errors.INVALID_ARGUMENT,
        "duplicate output tensor alias: y",
    ),
}


@pytest.mark.parametrize("make, code, text", ERRORS.values(), ids=ERRORS.keys())
def test_errors_have_tf_serving_codes_and_texts(make, code, text):
    core, session = half_plus_two()
    start = time.perf_counter()
    error = call_error(core, make())
    assert (error.code, error.message) == (code, text)
    assert not session.runs, "nothing runs for a bad request"
    assert time.perf_counter() - start < 0.5


def test_session_errors_pass_through_unchanged():
    core, session = half_plus_two()

    def fail(feeds):
        raise errors.InvalidArgumentError(None, None, "Matrix size-incompatible: In[0]: [1,3], In[1]: [4,1]")

    session.functions["y:0"] = fail
    error = call_error(core, request(x=float_proto(2.0)))
    assert error.code == errors.INVALID_ARGUMENT and error.message.startswith("Matrix size-incompatible")


def test_output_count_mismatch_is_unknown_error():
    core, session = half_plus_two()
    session.run = lambda fetches, feed_dict=None, options=None, run_metadata=None: []
    error = call_error(core, request(x=float_proto(2.0)))
    assert (error.code, error.message) == (errors.UNKNOWN, "Predict internal error")


def test_servable_handle_is_released_after_the_request():
    released = []
    core, _ = half_plus_two()
    servable = core.servables["half_plus_two"]
    core.servables["half_plus_two"] = Servable(
        servable.name, servable.version, servable.bundle, _release=lambda: released.append(1)
    )
    predict(core, request(x=float_proto(2.0)))
    call_error(core, request("nope", x=float_proto(2.0)))
    assert released == [1, 1]


def test_feed_errors_raised_by_the_session_are_invalid_argument():
    core, session = half_plus_two()

    def refuse(feeds):
        raise ValueError("Cannot feed value of shape (2, 1) for Tensor x:0, which has shape (None,)")

    session.functions["y:0"] = refuse
    error = call_error(core, request(x=np.float32([[1.0], [2.0]])))
    assert error.code == errors.INVALID_ARGUMENT and error.message.startswith("Cannot feed value")


def test_output_filter_errors_come_before_the_sessions_dtype_check():
    core, _ = half_plus_two()
    req = request(x=np.int32([1]))
    req.output_filter.append("nope")
    assert call_error(core, req).message.startswith("output tensor alias not found in signature: nope")


def _many_dtypes_servable():
    """A servable whose outputs cover every dtype and shape form; ``values(n)``: its outputs for a batch of n."""

    def values(n):  # outputs whose shapes follow the request's batch size n
        return {
            "f": np.arange(2 * n, dtype=np.float32).reshape(n, 2) - 1.5,
            "d": np.float64([1e300, -0.0])[:n],
            "c": np.complex64([1 + 2j, -3.5j])[:n],
            "z": np.float32(n),
            "i": np.int32(-7 * n),
            "s": np.array([b"a", b"", b"\xff\x00z"][:n], dtype=object),
            "b": np.array([True, False])[:n],
            "bz": np.bool_(n > 1),
            "h": np.float16([0.5, 65504.0])[:n],
            "q": np.int64([-(2**40), 3])[:n],
            "u": np.uint8([0, 255])[:n],
            "e": np.zeros((0, n), np.float32),
            "w": np.float32([1.0, 2.0]),  # a float64 signature output computed as float32: sent as is
            "t": np.array(["h\u00e9", "x", ""])[:n],  # str, not bytes
            "o": np.array(["a", b"b", b""], dtype=object)[:n],
        }

    kinds = {"f": FLOAT, "d": types_pb2.DT_DOUBLE, "c": types_pb2.DT_COMPLEX64, "z": FLOAT}
    kinds |= {"i": types_pb2.DT_INT32, "s": STRING, "b": types_pb2.DT_BOOL, "bz": types_pb2.DT_BOOL}
    kinds |= {"h": types_pb2.DT_HALF, "q": types_pb2.DT_INT64, "u": types_pb2.DT_UINT8, "e": FLOAT}
    kinds |= {"w": types_pb2.DT_DOUBLE, "t": STRING, "o": STRING}
    session = NumpySession({f"{k}:0": (lambda f, k=k: values(len(f["x:0"]))[k]) for k in kinds})
    sig = signature({"x": tensor_info("x:0")}, {k: tensor_info(f"{k}:0", kinds[k]) for k in kinds})
    mgd = meta_graph_pb2.MetaGraphDef()
    mgd.signature_def["serving_default"].CopyFrom(sig)
    bundle = SimpleNamespace(session=session, meta_graph_def=mgd, signature_defs=mgd.signature_def)
    servable = Servable("many", 4, bundle)
    return servable, values, kinds


@pytest.mark.parametrize("as_tensor_content", [False, True])
def test_the_common_request_fast_path_answers_what_the_checked_path_does(as_tensor_content):
    """A plain request (every input, of its dtype, no output_filter) gets its response assembled
    as bytes (outputs whose values are their own bytes from a prefix kept per shape); it must
    equal the field-by-field one a filtered request builds, for every dtype and shape."""
    servable, values, kinds = _many_dtypes_servable()
    for n in (1, 2, 2, 1):  # repeated shapes take the kept prefixes
        plain = request(model="many", x=np.ones(n, np.float32))
        filtered = request(model="many", x=np.ones(n, np.float32))
        filtered.output_filter.extend(sorted(kinds))
        fast = run_predict(servable, plain, as_tensor_content=as_tensor_content)
        checked = run_predict(servable, filtered, as_tensor_content=as_tensor_content)
        assert fast == checked
        assert fast.model_spec.version.value == 4 and fast.model_spec.signature_name == "serving_default"
        assert tensor_codec.decode(fast.outputs["s"]).tolist() == [b"a", b"", b"\xff\x00z"][:n]
        np.testing.assert_array_equal(tensor_codec.decode(fast.outputs["f"]), values(n)["f"])
        assert tensor_codec.decode(fast.outputs["w"]).dtype == np.float32  # the array's own dtype


def test_outputs_as_arrays_are_what_the_response_tensors_decode_to():
    """REST (and V2) write a Predict's outputs from ``PredictOutputs.arrays`` instead of
    decoding the response's TensorProtos: for every dtype and shape, the same dtype and values,
    and the same JSON in both forms."""
    from serving.inference import predict as predict_module
    from serving.rest_api import json_tensor

    servable, values, kinds = _many_dtypes_servable()
    for n in (1, 2, 3, 1):
        for filtered in (False, True):
            req = request(model="many", x=np.ones(n, np.float32))
            if filtered:
                req.output_filter.extend(sorted(kinds, reverse=True))
            answer = predict_module.run(servable, req, 0, method_name_check=False, as_tensor_content=False)
            arrays, message = answer.arrays(), answer.message()
            assert sorted(arrays) == sorted(message.outputs) == sorted(kinds)
            for alias, (array, dtype) in arrays.items():
                proto = message.outputs[alias]
                expected = tensor_codec.decode(proto)
                assert (dtype, array.dtype, array.shape) == (proto.dtype, expected.dtype, expected.shape), (
                    alias
                )
                assert array.tolist() == expected.tolist() or np.array_equal(array, expected, equal_nan=True)
            for form in (json_tensor.ROW, json_tensor.COLUMNAR):
                try:
                    expected_json = json_tensor.predict_response_json(message.outputs, form)
                except errors.OpError as e:
                    with pytest.raises(errors.OpError, match=re.escape(e.message)):
                        json_tensor.outputs_json(arrays, form)
                else:
                    assert json_tensor.outputs_json(arrays, form) == expected_json
