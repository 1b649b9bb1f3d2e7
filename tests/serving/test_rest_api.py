"""serving.rest_api.routes and serving.lifecycle.health.Readiness: paths, the functions REST calls, readiness."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_manager import FakeLoader, config_for, make_version

from apis.tensorflow_serving.apis import get_model_status_pb2, predict_pb2
from runtime import errors
from serving.lifecycle.health import NOT_SERVING, SERVING, ModelHealth, Readiness
from serving.options import ServerOptions
from serving.rest_api import routes as rest_api
from serving.rest_api.routes import ModelRequest, RequestFunctions, RestApi, parse_path
from serving.server_core import ServerCore

PATHS = [
    ("POST", "/v1/models/m:predict", ModelRequest("m", None, None, "predict", True)),
    ("POST", "/v1/models/m/versions/12:classify", ModelRequest("m", 12, None, "classify", True)),
    ("POST", "/v1/models/m/labels/canary:regress", ModelRequest("m", None, "canary", "regress", True)),
    ("POST", "/V1/MODELS/m:PREDICT", ModelRequest("m", None, None, "PREDICT", True)),
    ("POST", "/v1/models/my%20model:predict", ModelRequest("my model", None, None, "predict", True)),
    ("POST", "/v1/models/m:predict?x=1", ModelRequest("", None, None, "", False)),
    ("POST", "/v1/models/m", ModelRequest("", None, None, "", False)),
    ("GET", "/v1/models/m", ModelRequest("m", None, None, "", True)),
    ("GET", "/v1/models/m/versions/3/metadata", ModelRequest("m", 3, None, "metadata", True)),
    ("GET", "/v1/models/m/labels/a%2Fb", ModelRequest("m", None, "a/b", "", True)),
    ("GET", "/v1/models/metadata", ModelRequest("metadata", None, None, "", True)),
    ("GET", "/v1/models", ModelRequest("", None, None, "", True)),
    ("GET", "/v1/models/", ModelRequest("", None, None, "", False)),
    ("GET", "/v1/models/versions/1", ModelRequest("", 1, None, "", True)),
    ("GET", "/v1/models/m:predict", ModelRequest("", None, None, "", False)),
    ("PUT", "/v1/models/m", ModelRequest("", None, None, "", False)),
]


@pytest.mark.parametrize("method,path,expected", PATHS)
def test_paths_match_as_tf_servings_regular_expressions(method, path, expected):
    assert parse_path(method, path) == expected


def test_a_version_past_int64_is_refused():
    with pytest.raises(
        errors.InvalidArgumentError, match="^Failed to convert version: 9223372036854775808 to numeric.$"
    ):
        parse_path("GET", "/v1/models/m/versions/9223372036854775808")


@pytest.fixture
def core(tmp_path):
    make_version(tmp_path / "a", 1)
    options = ServerOptions(port=0, file_system_poll_wait_seconds=0, max_num_load_retries=0)
    core = ServerCore(options, load_fn=FakeLoader())
    core.reload_config(config_for([("a", tmp_path / "a")]))
    yield core
    core.stop()


def test_rest_calls_the_request_functions_with_the_timeout_as_deadline(core):
    """One wrapper replaces every function REST calls (what metrics will do); the deadline is
    --rest_api_timeout_in_ms, as gRPC's is the call's."""
    calls = []

    def fake_predict(core_, request, deadline):
        calls.append((request.model_spec.name, request.model_spec.signature_name, deadline))
        raise errors.UnavailableError(None, None, "busy")

    functions = dataclasses.replace(RequestFunctions(), predict_outputs=fake_predict)
    api = RestApi(core, 2500, functions)
    api._input_dtypes = lambda spec, name: {"x": 1}
    reply = api.process("POST", "/v1/models/a:predict", b'{"instances": [1.0]}')
    assert calls == [("a", "", 2.5)]
    assert (reply.status, json.loads(reply.body), reply.model_name, reply.api) == (
        503,
        {"error": "busy"},
        "a",
        "predict",
    )
    no_timeout = RestApi(core, 0, functions)
    no_timeout._input_dtypes = api._input_dtypes
    no_timeout.process("POST", "/v1/models/a:predict", b'{"inputs": [1.0]}')
    assert calls[-1][2] is None


@pytest.mark.parametrize(
    "code,status",
    [
        (errors.CANCELLED, 499),
        (errors.NOT_FOUND, 404),
        (errors.FAILED_PRECONDITION, 400),
        (errors.UNIMPLEMENTED, 501),
    ],
)
def test_errors_answer_the_http_status_of_their_code(core, code, status):
    def failing(core_, request):
        raise errors.error_for_code(code, "no")

    api = RestApi(core, 0, dataclasses.replace(RequestFunctions(), get_model_status=failing))
    assert api.process("GET", "/v1/models/a", b"").status == status


def test_an_unexpected_exception_is_an_internal_error_answer(core):
    def broken(core_, request):
        raise ZeroDivisionError("oops")

    api = RestApi(core, 0, dataclasses.replace(RequestFunctions(), get_model_status=broken))
    reply = api.process("GET", "/v1/models/a", b"")
    assert (reply.status, json.loads(reply.body)) == (500, {"error": "ZeroDivisionError: oops"})


def test_model_list(core, tmp_path):
    assert json.loads(RestApi(core).process("GET", "/v1/models", b"").body) == {
        "models": [
            {
                "name": "a",
                "model_version_status": [
                    {
                        "version": "1",
                        "state": "AVAILABLE",
                        "status": {"error_code": "OK", "error_message": ""},
                        "resident": True,
                        "memory_bytes": {"arrays": 0, "onnxruntime": 0},  # (a fake bundle)
                    }
                ],
            }
        ]
    }
    make_version(tmp_path / "broken", 1, broken=True)
    with pytest.raises(errors.OpError):
        core.reload_config(config_for([("a", tmp_path / "a"), ("broken", tmp_path / "broken")]))
    models = json.loads(RestApi(core).process("GET", "/v1/models", b"").body)["models"]
    assert [(m["name"], [s["state"] for s in m["model_version_status"]]) for m in models] == [
        ("a", ["AVAILABLE"]),
        ("broken", ["END"]),
    ]


def test_readiness_is_one_answer_for_grpc_health_and_readyz(core, tmp_path):
    health = ModelHealth(core)
    readiness = health.readiness
    assert readiness.reason() == "The server is not serving (starting or shutting down)."
    assert rest_api.readiness_json(readiness.reason()).status == 503
    health.set_serving()
    assert readiness.reason() is None and rest_api.readiness_json(readiness.reason()).status == 200
    assert health.servicer._server_status[""] == SERVING
    make_version(tmp_path / "broken", 1, broken=True)
    with pytest.raises(errors.OpError):
        core.reload_config(config_for([("a", tmp_path / "a"), ("broken", tmp_path / "broken")]))
    assert readiness.reason() == "No version of these models is available: broken"
    assert health.servicer._server_status[""] == NOT_SERVING
    reply = rest_api.readiness_json(readiness.reason())
    assert (reply.status, json.loads(reply.body)) == (
        503,
        {"error": "No version of these models is available: broken"},
    )
    core.reload_config(config_for([("a", tmp_path / "a")]))  # no version changes state: the config does
    assert health.servicer._server_status[""] == SERVING
    readiness.set_not_serving()  # the lame-duck switch: both say no at once
    assert health.servicer._server_status[""] == NOT_SERVING
    assert rest_api.readiness_json(readiness.reason()).status == 503


def test_readiness_listens_to_version_states(core, tmp_path):
    readiness = Readiness(core)
    readiness.set_serving()
    seen = []
    readiness.add_listener(lambda: seen.append(readiness.ready()))
    make_version(tmp_path / "b", 1)
    core.reload_config(config_for([("a", tmp_path / "a"), ("b", tmp_path / "b")]))
    assert seen and seen[-1] is True


def test_predict_request_proto_is_the_one_grpc_receives(core):
    got = []

    def capture(core_, request, deadline):
        got.append(request)
        raise errors.InternalError(None, None, "stop")

    api = RestApi(core, 0, dataclasses.replace(RequestFunctions(), predict_outputs=capture))
    api._input_dtypes = lambda spec, name: {"x": 1}
    api.process(
        "POST", "/v1/models/a/versions/1:predict", b'{"signature_name": "s", "instances": [[1.5, 2.0]]}'
    )
    (request,) = got
    assert isinstance(request, predict_pb2.PredictRequest)
    assert (request.model_spec.name, request.model_spec.version.value, request.model_spec.signature_name) == (
        "a",
        1,
        "s",
    )
    assert list(request.inputs) == ["x"] and request.inputs["x"].dtype == 1
    assert [d.size for d in request.inputs["x"].tensor_shape.dim] == [1, 2]


def test_status_goes_through_get_model_status(core):
    got = []

    def status(core_, request):
        got.append(request.model_spec.version.value)
        return get_model_status_pb2.GetModelStatusResponse()

    api = RestApi(core, 0, dataclasses.replace(RequestFunctions(), get_model_status=status))
    assert api.process("GET", "/v1/models/a/versions/1", b"").body == b'{\n "model_version_status": []\n}\n'
    assert got == [1]
