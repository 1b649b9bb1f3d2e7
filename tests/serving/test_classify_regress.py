"""serving.inference.classify, serving.inference.regress and serving.inference.multi_inference (they share one tf.Example model).

The model is half_plus_two's tf.Example half: "tf_example:0" holds serialized Examples, parsed
here with example_pb2; y = 0.5 * x + 2. Texts and codes are TF Serving's (classifier.cc,
regressor.cc, multi_inference.cc, util.cc).
"""

from types import SimpleNamespace

import numpy as np
import pytest

from apis.tensorflow.core.example import example_pb2
from apis.tensorflow.core.framework import types_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from apis.tensorflow_serving.apis import classification_pb2, inference_pb2, regression_pb2
from runtime import errors
from serving.inference import classify as classify_module
from serving.inference import regress as regress_module
from serving.inference import signatures
from serving.inference.classify import classify
from serving.inference.multi_inference import multi_inference
from serving.inference.regress import regress
from serving.lifecycle.servable import Servable

CLASSIFY, REGRESS = "tensorflow/serving/classify", "tensorflow/serving/regress"


def info(name, dtype=types_pb2.DT_FLOAT):
    return meta_graph_pb2.TensorInfo(name=name, dtype=dtype)


def sig(inputs, outputs, method):
    return meta_graph_pb2.SignatureDef(
        inputs={k: info(v, types_pb2.DT_STRING) for k, v in inputs.items()},
        outputs={k: info(v) for k, v in outputs.items()},
        method_name=method,
    )


def _xs(feeds, name="tf_example:0"):
    values = []
    for serialized in feeds[name]:
        example = example_pb2.Example.FromString(serialized)
        values.append(example.features.feature["x"].float_list.value[0])
    return np.float32(values)


class ExampleSession:
    def __init__(self):
        self.runs = []
        self.functions = {
            "y:0": lambda f: (0.5 * _xs(f) + 2)[:, None],
            "y_flat:0": lambda f: 0.5 * _xs(f) + 2,
            "scores2:0": lambda f: np.stack([_xs(f), -_xs(f)], axis=1),
            "classes2:0": lambda f: np.array([[b"pos", b"neg"]] * len(f["tf_example:0"]), object),
            "y_other_input:0": lambda f: (0.5 * _xs(f, "other:0") + 2)[:, None],
            # badly shaped outputs, for the output checks
            "vec:0": lambda f: _xs(f),
            "wide:0": lambda f: np.ones((len(f["tf_example:0"]), 2), np.float32),
            "double:0": lambda f: _xs(f).astype(np.float64),
            "batch_plus_one:0": lambda f: np.ones((len(f["tf_example:0"]) + 1, 1), np.float32),
            "classes3:0": lambda f: np.array([[b"a", b"b", b"c"]] * len(f["tf_example:0"]), object),
        }

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        self.runs.append((list(fetches), dict(feed_dict), options))
        return [np.asarray(self.functions[name](feed_dict)) for name in fetches]


SIGNATURES = {
    "classify_x_to_y": sig({"inputs": "tf_example:0"}, {"scores": "y:0"}, CLASSIFY),
    "regress_x_to_y": sig({"inputs": "tf_example:0"}, {"outputs": "y:0"}, REGRESS),
    "regress_flat": sig({"inputs": "tf_example:0"}, {"outputs": "y_flat:0"}, REGRESS),
    "regress_other_input": sig({"inputs": "other:0"}, {"outputs": "y_other_input:0"}, REGRESS),
    "classes_and_scores": sig(
        {"inputs": "tf_example:0"}, {"classes": "classes2:0", "scores": "scores2:0"}, CLASSIFY
    ),
    "classes_only": sig({"inputs": "tf_example:0"}, {"classes": "classes2:0"}, CLASSIFY),
    "two_inputs": sig({"inputs": "tf_example:0", "b": "b:0"}, {"scores": "y:0"}, CLASSIFY),
    "three_outputs": sig({"inputs": "tf_example:0"}, {"scores": "y:0", "a": "a:0", "b": "b:0"}, CLASSIFY),
    "no_inputs_key": sig({"examples": "tf_example:0"}, {"scores": "y:0", "outputs": "y:0"}, CLASSIFY),
    "regress_two_outputs": sig({"inputs": "tf_example:0"}, {"outputs": "y:0", "b": "b:0"}, REGRESS),
    "regress_no_outputs_key": sig({"inputs": "tf_example:0"}, {"scores": "y:0"}, REGRESS),
    "scores_vector": sig({"inputs": "tf_example:0"}, {"scores": "vec:0"}, CLASSIFY),
    "classes_float": sig({"inputs": "tf_example:0"}, {"classes": "y:0"}, CLASSIFY),
    "scores_batch": sig({"inputs": "tf_example:0"}, {"scores": "batch_plus_one:0"}, CLASSIFY),
    "classes_scores_mismatch": sig(
        {"inputs": "tf_example:0"}, {"classes": "classes3:0", "scores": "scores2:0"}, CLASSIFY
    ),
    "regress_wide": sig({"inputs": "tf_example:0"}, {"outputs": "wide:0"}, REGRESS),
    "regress_double": sig({"inputs": "tf_example:0"}, {"outputs": "double:0"}, REGRESS),
    "regress_batch": sig({"inputs": "tf_example:0"}, {"outputs": "batch_plus_one:0"}, REGRESS),
}


class FakeCore:
    def __init__(self, options=None):
        self.session = ExampleSession()
        mgd = meta_graph_pb2.MetaGraphDef(signature_def=SIGNATURES)
        bundle = SimpleNamespace(session=self.session, meta_graph_def=mgd, signature_defs=mgd.signature_def)
        self.servable = Servable("half_plus_two", 123, bundle)
        self.options = options

    def pinned(self, model_spec, deadline=None):
        if model_spec.name != "half_plus_two":
            raise errors.NotFoundError(
                None, None, f"Servable not found for request: Latest({model_spec.name})"
            )
        return self.servable


def example(**features):
    ex = example_pb2.Example()
    for key, value in features.items():
        ex.features.feature[key].float_list.value.append(value)
    return ex


def with_examples(req, *xs, context=None):
    if context is None:
        for x in xs:
            req.input.example_list.examples.append(example(x=x) if x is not None else example())
    else:
        req.input.example_list_with_context.context.CopyFrom(example(**context))
        for x in xs:
            req.input.example_list_with_context.examples.append(
                example(x=x) if x is not None else example(z=0)
            )
    return req


def classification(signature_name="classify_x_to_y", *xs, model="half_plus_two", context=None):
    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature_name
    return with_examples(req, *xs, context=context)


def regression(signature_name="regress_x_to_y", *xs, model="half_plus_two", context=None):
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature_name
    return with_examples(req, *xs, context=context)


def error_of(fn, core, req):
    with pytest.raises(errors.OpError) as info:
        fn(core, req)
    return info.value.code, info.value.message


# --------------------------------------------------------------------------------------------
# Classify


def test_classify_scores_only_like_tf_serving_integration_test():
    core = FakeCore()
    response = classify(core, classification("classify_x_to_y", 2.0))
    assert len(response.result.classifications) == 1
    classes = response.result.classifications[0].classes
    assert len(classes) == 1 and classes[0].score == 3.0 and classes[0].label == ""
    assert response.model_spec.name == "half_plus_two"
    assert response.model_spec.signature_name == "classify_x_to_y"
    assert response.model_spec.version.value == 123
    fetches, feeds, _ = core.session.runs[-1]
    assert fetches == ["y:0"] and list(feeds) == ["tf_example:0"]
    assert feeds["tf_example:0"].dtype == object and feeds["tf_example:0"].shape == (1,)


def test_classify_classes_and_scores():
    response = classify(FakeCore(), classification("classes_and_scores", 2.0, 4.0))
    got = [[(c.label, c.score) for c in cl.classes] for cl in response.result.classifications]
    assert got == [[("pos", 2.0), ("neg", -2.0)], [("pos", 4.0), ("neg", -4.0)]]
    response = classify(FakeCore(), classification("classes_only", 1.0))
    assert [(c.label, c.score) for c in response.result.classifications[0].classes] == [
        ("pos", 0),
        ("neg", 0),
    ]


def test_empty_signature_name_is_serving_default_in_response():
    core = FakeCore()
    core.servable.bundle.meta_graph_def.signature_def["serving_default"].CopyFrom(
        SIGNATURES["classify_x_to_y"]
    )
    response = classify(core, classification("", 2.0))
    assert response.model_spec.signature_name == "serving_default"


def test_context_is_merged_into_every_example():
    core = FakeCore()
    response = regress(core, regression("regress_x_to_y", None, 10.0, context={"x": 4.0}))
    assert [r.value for r in response.result.regressions] == [4.0, 7.0]
    serialized = core.session.runs[-1][1]["tf_example:0"]
    merged = example_pb2.Example.FromString(serialized[0])
    assert merged.features.feature["x"].float_list.value == [4.0]
    assert merged.features.feature["z"].float_list.value == [0.0]


CLASSIFY_ERRORS = {
    "missing model spec": (classification_pb2.ClassificationRequest(), "Missing ModelSpec"),
    "missing signature": (classification("nope", 1.0), "No signature was found with the name: nope"),
    "two inputs": (classification("two_inputs", 1.0), "Expected one input Tensor."),
    "three outputs": (classification("three_outputs", 1.0), "Expected one or two output Tensors, found 3"),
    "no inputs key": (
        classification("no_inputs_key", 1.0),
        "No classification inputs found in SignatureDef: "
        + signatures.debug_string(SIGNATURES["no_inputs_key"]),
    ),
    "regression signature": (
        classification("regress_x_to_y", 1.0),
        'Expected classification signature outputs to contain at least one of "classes" or "scores". '
        "Signature was: " + signatures.debug_string(SIGNATURES["regress_x_to_y"]),
    ),
    "empty input": (classification("classify_x_to_y"), "Input is empty."),
    "empty input with context": (classification("classify_x_to_y", context={"x": 1.0}), "Input is empty."),
    "scores not a matrix": (
        classification("scores_vector", 1.0),
        "Expected Tensor shape: [batch_size num_classes] but got [1]",
    ),
    "classes not strings": (
        classification("classes_float", 1.0),
        "Expected classes Tensor of DT_STRING. Got: DT_FLOAT",
    ),
    "scores batch": (classification("scores_batch", 1.0), "Expected scores output batch size of 1. Got: 2"),
    "classes and scores disagree": (
        classification("classes_scores_mismatch", 1.0),
        "Tensors class and score should match in dim_size(1). Got 3 vs. 2",
    ),
}


@pytest.mark.parametrize("req, text", CLASSIFY_ERRORS.values(), ids=CLASSIFY_ERRORS.keys())
def test_classify_errors(req, text):
    assert error_of(classify, FakeCore(), req) == (errors.INVALID_ARGUMENT, text)


def test_classify_method_name_check_when_enabled():
    core = FakeCore(SimpleNamespace(enable_signature_method_name_check=True))
    assert error_of(classify, core, classification("regress_x_to_y", 1.0)) == (
        errors.INVALID_ARGUMENT,
        "Expected classification signature method_name to be tensorflow/serving/classify. "
        "Was: tensorflow/serving/regress",
    )


def test_classify_unknown_model_is_not_found():
    assert (
        error_of(classify, FakeCore(), classification("classify_x_to_y", 1.0, model="x"))[0]
        == errors.NOT_FOUND
    )


# --------------------------------------------------------------------------------------------
# Regress


def test_regress_like_tf_serving_integration_test():
    core = FakeCore()
    response = regress(core, regression("regress_x_to_y", 2.0))
    assert [r.value for r in response.result.regressions] == [3.0]
    assert (response.model_spec.name, response.model_spec.signature_name) == (
        "half_plus_two",
        "regress_x_to_y",
    )
    assert response.model_spec.version.value == 123


def test_regress_batch_vector_output_and_deadline():
    core = FakeCore()
    response = regress(core, regression("regress_flat", 0.0, 2.0, 4.0), deadline=1.0)
    assert [r.value for r in response.result.regressions] == [2.0, 3.0, 4.0]
    assert core.session.runs[-1][2].timeout_in_ms == 1000


REGRESS_ERRORS = {
    "missing model spec": (regression_pb2.RegressionRequest(), "Missing ModelSpec"),
    "missing signature": (regression("nope", 1.0), "No signature was found with the name: nope"),
    "two inputs": (regression("two_inputs", 1.0), "Expected one input Tensor."),
    "two outputs": (regression("regress_two_outputs", 1.0), "Expected one output Tensor."),
    "classification signature": (
        regression("classify_x_to_y", 1.0),
        "No regression outputs found in SignatureDef: "
        + signatures.debug_string(SIGNATURES["classify_x_to_y"]),
    ),
    "empty input": (regression("regress_x_to_y"), "Input is empty."),
    "wide output": (
        regression("regress_wide", 1.0),
        "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got [1,2]",
    ),
    "batch mismatch": (
        regression("regress_batch", 1.0),
        "Input batch size did not match output batch size: 1 vs. 2",
    ),
    "double output": (
        regression("regress_double", 1.0),
        "Expected output Tensor of DT_FLOAT.  Got: DT_DOUBLE",
    ),
}


@pytest.mark.parametrize("req, text", REGRESS_ERRORS.values(), ids=REGRESS_ERRORS.keys())
def test_regress_errors(req, text):
    assert error_of(regress, FakeCore(), req) == (errors.INVALID_ARGUMENT, text)


def test_regress_method_name_check_when_enabled():
    core = FakeCore(SimpleNamespace(enable_signature_method_name_check=True))
    assert error_of(regress, core, regression("classify_x_to_y", 1.0)) == (
        errors.INVALID_ARGUMENT,
        "Expected regression signature method_name to be tensorflow/serving/regress. "
        "Was: tensorflow/serving/classify",
    )


# --------------------------------------------------------------------------------------------
# MultiInference


def multi(*tasks, xs=(2.0,)):
    req = inference_pb2.MultiInferenceRequest()
    for model, signature_name, method in tasks:
        task = req.tasks.add()
        task.model_spec.name = model
        task.model_spec.signature_name = signature_name
        task.method_name = method
    return with_examples(req, *xs)


def test_multi_inference_like_tf_serving_integration_test():
    core = FakeCore()
    req = multi(("half_plus_two", "regress_x_to_y", REGRESS), ("half_plus_two", "classify_x_to_y", CLASSIFY))
    response = multi_inference(core, req, deadline=3.0)
    assert len(response.results) == 2
    assert response.results[0].regression_result.regressions[0].value == 3.0
    assert response.results[1].classification_result.classifications[0].classes[0].score == 3.0
    for result, name in zip(response.results, ["regress_x_to_y", "classify_x_to_y"]):
        assert (result.model_spec.name, result.model_spec.signature_name) == ("half_plus_two", name)
        assert result.model_spec.version.value == 123
    assert len(core.session.runs) == 1, "one Session run for all tasks"
    fetches, feeds, options = core.session.runs[0]
    assert fetches == ["y:0"] and list(feeds) == ["tf_example:0"] and options.timeout_in_ms == 3000


def test_multi_inference_feeds_every_task_input_the_same_examples():
    core = FakeCore()
    req = multi(
        ("half_plus_two", "regress_x_to_y", REGRESS), ("half_plus_two", "regress_other_input", REGRESS)
    )
    response = multi_inference(core, req)
    assert [r.regression_result.regressions[0].value for r in response.results] == [3.0, 3.0]
    feeds = core.session.runs[0][1]
    assert sorted(feeds) == ["other:0", "tf_example:0"]


MULTI_ERRORS = {
    "different models": (
        multi(("half_plus_two", "regress_x_to_y", REGRESS), ("other", "classify_x_to_y", CLASSIFY)),
        errors.INVALID_ARGUMENT,
        "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
    ),
    "empty model name": (
        multi(("half_plus_two", "regress_x_to_y", REGRESS), ("", "classify_x_to_y", CLASSIFY)),
        errors.INVALID_ARGUMENT,
        "Found ModelSpec with an empty model name.",
    ),
    "duplicate signature": (
        multi(("half_plus_two", "regress_x_to_y", REGRESS), ("half_plus_two", "regress_x_to_y", REGRESS)),
        errors.INVALID_ARGUMENT,
        "Duplicate evaluation of signature: regress_x_to_y",
    ),
    "missing signature": (
        multi(("half_plus_two", "nope", REGRESS)),
        errors.INVALID_ARGUMENT,
        "Requested signature not found in model graph: nope",
    ),
    "predict task": (
        multi(("half_plus_two", "regress_x_to_y", "tensorflow/serving/predict")),
        errors.UNIMPLEMENTED,
        "Unsupported signature method_name: tensorflow/serving/predict",
    ),
    "empty input": (
        multi(("half_plus_two", "regress_x_to_y", REGRESS), xs=()),
        errors.INVALID_ARGUMENT,
        "Input is empty.",
    ),
    "wrong signature kind": (
        multi(("half_plus_two", "classify_x_to_y", REGRESS)),
        errors.INVALID_ARGUMENT,
        "No regression outputs found in SignatureDef: "
        + signatures.debug_string(SIGNATURES["classify_x_to_y"]),
    ),
    "first task's model is unknown": (
        multi(("nope", "regress_x_to_y", REGRESS)),
        errors.NOT_FOUND,
        "Servable not found for request: Latest(nope)",
    ),
}


@pytest.mark.parametrize("req, code, text", MULTI_ERRORS.values(), ids=MULTI_ERRORS.keys())
def test_multi_inference_errors(req, code, text):
    core = FakeCore()
    assert error_of(multi_inference, core, req) == (code, text)
    assert not core.session.runs


def test_non_string_inputs_fail_as_tf_sessions_feed_check_does():
    core = FakeCore()
    float_input = meta_graph_pb2.SignatureDef()
    float_input.CopyFrom(SIGNATURES["regress_x_to_y"])
    float_input.inputs["inputs"].dtype = types_pb2.DT_FLOAT
    core.servable.bundle.meta_graph_def.signature_def["float_input"].CopyFrom(float_input)
    expected = (errors.INVALID_ARGUMENT, "Expects arg[0] to be float but string is provided")
    assert error_of(regress, core, regression("float_input", 1.0)) == expected
    assert error_of(multi_inference, core, multi(("half_plus_two", "float_input", REGRESS))) == expected
    assert not core.session.runs


def test_feed_errors_raised_by_the_session_are_invalid_argument():
    core = FakeCore()

    def refuse(feeds):
        raise ValueError("Cannot feed value of shape (2, 1) for Tensor tf_example:0, which has shape (None,)")

    core.session.functions["y:0"] = refuse
    code, text = error_of(classify, core, classification("classify_x_to_y", 1.0))
    assert code == errors.INVALID_ARGUMENT and text.startswith("Cannot feed value of shape")


def test_classification_result_matches_field_by_field_construction():
    """The wire-built result equals the one protobuf's setters build, labels and edge cases included."""
    sig = SIGNATURES["classes_and_scores"]
    rng = np.random.default_rng(0)
    cases = [
        (np.array([[b"a", "é".encode()], [b"\xff", b""]], object), rng.random((2, 2), np.float32)),
        (None, np.float32([[0.0, -1.5], [3.0, 1e-30]])),
        (np.array([[b"x"] * 200] * 3, object), None),
        (np.empty((2, 0), object), np.empty((2, 0), np.float32)),
    ]
    for classes, scores in cases:
        names, outputs = [], []
        if classes is not None:
            names.append("classes2:0")
            outputs.append(classes)
        if scores is not None:
            names.append("scores2:0")
            outputs.append(scores)
        got = classification_pb2.ClassificationResult()
        present = classes if classes is not None else scores
        classify_module.post_process(sig, present.shape[0], names, outputs, got)
        want = classification_pb2.ClassificationResult()
        for i in range(present.shape[0]):
            row = want.classifications.add()
            for c in range(present.shape[1]):
                cls = row.classes.add()
                if classes is not None:
                    cls.label = classes[i, c].decode("utf-8", errors="replace")
                if scores is not None:
                    cls.score = scores[i, c]
        assert got == want


def test_regression_result_matches_field_by_field_construction():
    values = np.float32([0.0, -1.5, 3.25, np.inf, 1e-40])
    got = regression_pb2.RegressionResult()
    regress_module.post_process(SIGNATURES["regress_flat"], 5, ["y_flat:0"], [values], got)
    assert [r.value for r in got.regressions] == values.tolist()
