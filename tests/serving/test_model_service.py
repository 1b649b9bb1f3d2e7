"""ModelService over a real in-process gRPC server: GetModelStatus, HandleReloadConfigRequest."""

from __future__ import annotations

import os

import grpc
import pytest
from test_manager import FakeLoader, config_for, make_version, wait_until

from apis.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
)
from runtime import errors
from serving.lifecycle import model_config
from serving.lifecycle.model_service import to_status_proto
from serving.options import ServerOptions
from serving.server import build_server, parse_channel_arguments, server_options
from serving.server_core import ServerCore

State = get_model_status_pb2.ModelVersionStatus.State


@pytest.fixture
def served(tmp_path):
    make_version(tmp_path / "a", 1)
    make_version(tmp_path / "b", 3)
    options = ServerOptions(
        port=0,
        grpc_socket_path=str(tmp_path / "sock"),
        file_system_poll_wait_seconds=0,
        max_num_load_retries=0,
    )
    core = ServerCore(options, load_fn=FakeLoader())
    config = config_for([("a", tmp_path / "a"), ("b", tmp_path / "b")])
    config.model_config_list.config[1].model_version_policy.all.SetInParent()
    core.reload_config(config)
    make_version(tmp_path / "b", 4, broken=True)  # a bad version arrives later
    core.reload_config(config)  # the same config again: polls the base paths
    server, health = build_server(options, core)
    server.start()
    health.set_serving()
    channel = grpc.insecure_channel(f"unix:{tmp_path / 'sock'}")
    yield core, model_service_pb2_grpc.ModelServiceStub(channel), tmp_path
    channel.close()
    server.stop(None)
    core.stop()


def status_request(name, version=None):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    return request


def test_get_model_status(served):
    core, stub, _ = served
    reply = stub.GetModelStatus(status_request("a"))
    assert [
        (s.version, s.state, s.status.error_code, s.status.error_message) for s in reply.model_version_status
    ] == [(1, State.AVAILABLE, 0, "")]


def test_get_model_status_reports_failed_load(served):
    core, stub, _ = served
    wait_until(lambda: len(core.model_status("b")) == 2 and core.model_status("b")[0].state == 50)
    reply = stub.GetModelStatus(status_request("b"))
    failed, ok = reply.model_version_status
    assert (failed.version, failed.state, failed.status.error_code) == (4, State.END, errors.DATA_LOSS)
    assert "corrupt export" in failed.status.error_message
    assert (ok.version, ok.state) == (3, State.AVAILABLE)
    only = stub.GetModelStatus(status_request("b", 3))
    assert [s.version for s in only.model_version_status] == [3]


def test_get_model_status_not_found(served):
    _, stub, _ = served
    with pytest.raises(grpc.RpcError) as e:
        stub.GetModelStatus(status_request("nope"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert e.value.details() == "Could not find any versions of model nope"
    with pytest.raises(grpc.RpcError) as e:
        stub.GetModelStatus(status_request("a", 9))
    assert e.value.details() == "Could not find version 9 of model a"
    with pytest.raises(grpc.RpcError) as e:
        stub.GetModelStatus(get_model_status_pb2.GetModelStatusRequest())
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "Missing ModelSpec"


def test_reload_config_adds_and_removes(served):
    core, stub, tmp_path = served
    make_version(tmp_path / "c", 7)
    request = model_management_pb2.ReloadConfigRequest(
        config=config_for([("a", tmp_path / "a"), ("c", tmp_path / "c")])
    )
    reply = stub.HandleReloadConfigRequest(request)
    assert reply.status.error_code == 0
    assert core.servable_handle(model_config_spec("c")).version == 7
    wait_until(lambda: not core.has_available_version("b"))
    states = stub.GetModelStatus(status_request("b")).model_version_status
    assert {s.state for s in states} == {State.END}


def model_config_spec(name):
    from apis.tensorflow_serving.apis import model_pb2

    return model_pb2.ModelSpec(name=name)


def test_reload_config_errors_are_both_status_and_grpc_code(served):
    _, stub, tmp_path = served
    bad = config_for([("a", "relative/path")])
    with pytest.raises(grpc.RpcError) as e:
        stub.HandleReloadConfigRequest(model_management_pb2.ReloadConfigRequest(config=bad))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        e.value.details() == "Expected model a to have an absolute path or URI; got base_path()=relative/path"
    )
    custom = model_config.ModelServerConfig()
    custom.custom_model_config.type_url = "x"
    with pytest.raises(grpc.RpcError) as e:
        stub.HandleReloadConfigRequest(model_management_pb2.ReloadConfigRequest(config=custom))
    assert e.value.details().startswith("ServerModelConfig type not supported by HandleReloadConfigRequest.")


def test_health_per_model(served):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    _, _, tmp_path = served
    with grpc.insecure_channel(f"unix:{tmp_path / 'sock'}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "a", "tensorflow.serving.PredictionService", "ModelService"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, service
        with pytest.raises(grpc.RpcError) as e:
            stub.Check(health_pb2.HealthCheckRequest(service="nope"))
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_to_status_proto():
    assert to_status_proto(None).error_code == 0
    proto = to_status_proto(errors.NotFoundError(None, None, "gone"))
    assert (proto.error_code, proto.error_message) == (errors.NOT_FOUND, "gone")


CHANNEL_ARGS = {
    "": [],
    "grpc.max_connection_age_ms=2000,grpc.lb_policy_name=grpclb": [
        ("grpc.max_connection_age_ms", 2000),
        ("grpc.lb_policy_name", "grpclb"),
    ],
    "grpc.so_reuseaddr=1": [("grpc.so_reuseaddr", 1)],
    "a=99999999999": [("a", "99999999999")],
    "novalue,b=-3": [("b", -3)],
}


@pytest.mark.parametrize("text, expected", CHANNEL_ARGS.items())
def test_parse_channel_arguments(text, expected):
    assert parse_channel_arguments(text) == expected


def test_message_sizes_raised_and_overridable():
    opts = dict(server_options(ServerOptions(grpc_channel_arguments="grpc.max_receive_message_length=10")))
    assert opts["grpc.max_send_message_length"] == 2**31 - 1
    assert opts["grpc.max_receive_message_length"] == 10


def test_unix_socket_only_when_asked(tmp_path):
    assert not os.path.exists(tmp_path / "nothing")
