"""ModelService driven by tensorflow-serving-api's own stubs (in the oracle's tf221 venv).

An existing TF Serving client (``tensorflow_serving.apis.model_service_pb2_grpc``) checks model
status, reloads the config through HandleReloadConfigRequest, and reads the error statuses; the
script prints JSON and the test checks states, codes and texts. Skips without the oracle venv.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from tests.oracle import oracle_dir

from .conftest import requires_model

CLIENT = textwrap.dedent(
    r"""
    import json, sys
    import grpc
    from tensorflow_serving.apis import get_model_status_pb2, model_management_pb2, model_service_pb2_grpc

    address, base = sys.argv[1], sys.argv[2]
    stub = model_service_pb2_grpc.ModelServiceStub(grpc.insecure_channel(address))
    out = {}

    def record(name, fn):
        try:
            out[name] = {"ok": True, "value": fn()}
        except grpc.RpcError as e:
            out[name] = {"ok": False, "code": e.code().name, "details": e.details()}

    def status(name, version=None):
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = name
        if version is not None:
            request.model_spec.version.value = version
        reply = stub.GetModelStatus(request, 30)
        return [[s.version, get_model_status_pb2.ModelVersionStatus.State.Name(s.state),
                 s.status.error_code, s.status.error_message] for s in reply.model_version_status]

    def reload(models):
        request = model_management_pb2.ReloadConfigRequest()
        for name, path in models:
            request.config.model_config_list.config.add(name=name, base_path=path, model_platform="tensorflow")
        reply = stub.HandleReloadConfigRequest(request, 60)
        return [reply.status.error_code, reply.status.error_message]

    record("status", lambda: status("default"))
    record("status_version", lambda: status("default", 123))
    record("status_missing_version", lambda: status("default", 7))
    record("status_unknown", lambda: status("nope"))
    record("reload", lambda: reload([("default", base), ("second", base)]))
    record("status_second", lambda: status("second"))
    record("reload_relative", lambda: reload([("x", "relative")]))
    print(json.dumps(out))
    """
)


def test_model_service_with_tensorflow_serving_api_stubs(model_server, model_dir):
    requires_model("half_plus_two")
    python = oracle_dir() / "tf221" / "bin" / "python"
    if not python.exists():
        pytest.fail("no oracle venv: run `python -m tests.oracle build`")
    base = model_dir("half_plus_two")
    server = model_server(f"--model_base_path={base}")
    result = subprocess.run(
        [str(python), "-c", CLIENT, server.address, base],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["status"] == {"ok": True, "value": [[123, "AVAILABLE", 0, ""]]}
    assert out["status_version"] == out["status"]
    assert out["status_missing_version"] == {
        "ok": False,
        "code": "NOT_FOUND",
        "details": "Could not find version 7 of model default",
    }
    assert out["status_unknown"] == {
        "ok": False,
        "code": "NOT_FOUND",
        "details": "Could not find any versions of model nope",
    }
    assert out["reload"] == {"ok": True, "value": [0, ""]}
    assert out["status_second"] == {"ok": True, "value": [[123, "AVAILABLE", 0, ""]]}
    assert out["reload_relative"] == {
        "ok": False,
        "code": "INVALID_ARGUMENT",
        "details": "Expected model x to have an absolute path or URI; got base_path()=relative",
    }
    assert server.stop() == 0
