"""The high-level client's own logic, over a scripted transport: retries, deadlines, inputs'
dtypes, examples, model specs."""

from __future__ import annotations

import time

import numpy as np
import pytest
from savedmodel_client import client as client_module
from savedmodel_client.errors import ServingError
from savedmodel_client.examples import make_example
from savedmodel_client.model_spec import ModelSpec
from savedmodel_client.tensorflow.core.example import example_pb2
from savedmodel_client.tensorflow.core.framework import types_pb2

METADATA = {
    "model_spec": {"name": "m", "version": "3"},
    "signature_def": {
        "serving_default": {
            "inputs": {
                "x": {"name": "x:0", "dtype": "DT_DOUBLE"},
                "s": {"name": "s:0", "dtype": "DT_STRING"},
            },
            "outputs": {"y": {"name": "y:0", "dtype": "DT_FLOAT"}},
            "method_name": "tensorflow/serving/predict",
        }
    },
}


class Scripted:
    """A transport whose calls fail as scripted (a list of ServingErrors), then answer."""

    def __init__(self, failures=(), delay=0.0):
        self.failures = list(failures)
        self.delay = delay
        self.calls = []

    def _answer(self, name, *args):
        self.calls.append((name, args))
        if self.delay:
            time.sleep(self.delay)
        if self.failures:
            raise self.failures.pop(0)

    def predict(self, spec, feeds, output_filter, signature, timeout):
        self._answer("predict", spec, feeds, timeout)
        return {"y": np.zeros(1, np.float32)}

    def metadata(self, spec, timeout):
        self._answer("metadata", spec)
        return METADATA

    def status(self, spec, timeout):
        self._answer("status", spec, timeout)
        return []

    def classify(self, spec, examples, context, timeout):
        self._answer("classify", spec, examples, context)
        return []

    def close(self):
        pass


def client_over(transport, **kwargs) -> client_module.Client:
    client = client_module.Client("localhost:1", **kwargs)
    client._transport.close()
    client._transport = transport
    return client


def unavailable():
    return ServingError("UNAVAILABLE", "failed to connect")


def test_unavailable_is_retried_until_it_answers():
    transport = Scripted([unavailable(), unavailable()])
    client = client_over(transport, retries=3, backoff=0.001)
    assert client.status("m") == []
    assert [name for name, _ in transport.calls] == ["status"] * 3


def test_retries_stop_after_their_number():
    transport = Scripted([unavailable()] * 10)
    client = client_over(transport, retries=2, backoff=0.001)
    with pytest.raises(ServingError) as caught:
        client.status("m")
    assert caught.value.code == "UNAVAILABLE"
    assert len(transport.calls) == 3


@pytest.mark.parametrize(
    "code", ["NOT_FOUND", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "DEADLINE_EXCEEDED", "INTERNAL"]
)
def test_only_unavailable_is_retried(code):
    transport = Scripted([ServingError(code, "no")])
    client = client_over(transport, retries=5, backoff=0.001)
    with pytest.raises(ServingError) as caught:
        client.status("m")
    assert (caught.value.code, caught.value.message) == (code, "no")
    assert len(transport.calls) == 1


def test_the_backoff_doubles_up_to_its_cap():
    transport = Scripted([unavailable()] * 4)
    client = client_over(transport, retries=4, backoff=0.02, max_backoff=0.05)
    started = time.monotonic()
    client.status("m")
    # pauses of 0.02, 0.04, 0.05, 0.05 at most, each at least half of that (jitter)
    assert 0.08 <= time.monotonic() - started < 1.0


def test_the_timeout_bounds_the_call_retries_included():
    transport = Scripted([unavailable()] * 100)
    client = client_over(transport, retries=100, backoff=0.05, max_backoff=0.05)
    started = time.monotonic()
    with pytest.raises(ServingError) as caught:
        client.status("m", timeout=0.3)
    assert caught.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    assert time.monotonic() - started < 0.6
    # each attempt was given what was left of the deadline, never more
    timeouts = [args[-1] for _, args in transport.calls]
    assert all(0 < t <= 0.3 for t in timeouts) and timeouts == sorted(timeouts, reverse=True)


def test_the_client_default_timeout_applies_and_a_call_overrides_it():
    transport = Scripted()
    client = client_over(transport, timeout=7.0)
    client.status("m")
    client.status("m", timeout=2.0)
    (_, first), (_, second) = transport.calls
    assert 6.0 < first[-1] <= 7.0 and 1.0 < second[-1] <= 2.0


def test_plain_inputs_take_the_signature_dtype_and_arrays_keep_theirs():
    transport = Scripted()
    client = client_over(transport)
    array = np.ones(2, np.float32)
    client.predict("m", {"x": [1, 2], "s": ["a"]})
    client.predict("m", {"x": array})
    (_, _), (_, (_, feeds, _)), (_, (_, arrays, _)) = transport.calls
    assert feeds == {"x": ([1, 2], types_pb2.DT_DOUBLE), "s": (["a"], types_pb2.DT_STRING)}
    assert arrays["x"][0] is array and arrays["x"][1] is None
    # the signature was read once (metadata, then two predicts), without the signature name
    assert [name for name, _ in transport.calls] == ["metadata", "predict", "predict"]
    assert transport.calls[0][1][0] == ModelSpec("m")


def test_a_signature_the_model_lacks_is_left_to_the_server():
    transport = Scripted()
    client = client_over(transport)
    with pytest.raises(ServingError) as caught:
        client.signature(ModelSpec("m", signature_name="nope"))
    assert caught.value.code == "FAILED_PRECONDITION"
    assert caught.value.message == 'Serving signature key "nope" not found.'
    client.predict("m", {"x": [1.0]}, signature_name="nope")  # the server's refusal is the one to give
    assert transport.calls[-1][0] == "predict" and transport.calls[-1][1][1] == {"x": ([1.0], None)}


def test_model_specs():
    with pytest.raises(ValueError):
        ModelSpec("m", version=1, label="stable")
    with pytest.raises(ValueError):
        ModelSpec("")
    assert ModelSpec("a b", version=3).rest_path() == "/v1/models/a%20b/versions/3"
    assert ModelSpec("m", label="canary").rest_path() == "/v1/models/m/labels/canary"
    assert ModelSpec("m").rest_path() == "/v1/models/m"


def test_examples_from_dicts():
    example = make_example(
        {
            "s": "héllo",
            "b": b"\xff",
            "i": 3,
            "t": True,
            "f": 2.5,
            "fs": [1, 2.5],
            "a": np.arange(3, dtype=np.int16),
        }
    )
    feature = example.features.feature
    assert feature["s"].bytes_list.value == ["héllo".encode()]
    assert feature["b"].bytes_list.value == [b"\xff"]
    assert feature["i"].int64_list.value == [3]
    assert feature["t"].int64_list.value == [1]
    assert feature["f"].float_list.value == [2.5]
    assert feature["fs"].float_list.value == [1.0, 2.5]
    assert feature["a"].int64_list.value == [0, 1, 2]
    proto = example_pb2.Example()
    assert make_example(proto) is proto


@pytest.mark.parametrize(
    "features, error",
    [
        ({"x": []}, ValueError),
        ({"x": ["a", 1]}, TypeError),
        ({"x": [None]}, TypeError),
        ({"x": 2**63}, ValueError),
        ("x", TypeError),
    ],
)
def test_examples_that_are_not(features, error):
    with pytest.raises(error):
        make_example(features)


def test_one_dict_is_not_a_list_of_examples():
    client = client_over(Scripted())
    with pytest.raises(TypeError):
        client.classify("m", {"x": 1.0})


def test_unknown_transport():
    with pytest.raises(ValueError):
        client_module.Client("localhost:1", transport="carrier-pigeon")
