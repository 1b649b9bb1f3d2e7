"""TF Serving's own REST integration tests, run against ``model_server``.

``tensorflow_model_server_test.py``'s testPredictREST, testPredictColumnarREST, testClassifyREST,
testRegressREST, testGetStatusREST and testGetModelMetadataREST (and testPrometheusEndpoint,
below, with its monitoring config), reproduced as scripts run in
the oracle's tf221 venv (TensorFlow 2.21 and tensorflow-serving-api): the same server flags as
its ``RunServer`` (``--port``, ``--rest_api_port``, ``--rest_api_timeout_in_ms=5000``,
``--grpc_socket_path``, ``--model_name=default``, ``--model_base_path``), the same model
(``half_plus_two``: TF Serving's testdata model, rebuilt here), the same requests sent the way
its ``CallREST`` sends them (urllib, a JSON body, any Content-Type), the same assertions on the
parsed responses. The metadata test compares with what TensorFlow's own protobuf library
prints for the SignatureDefs of the model's saved_model.pb (TF Serving compares with a JSON
file made that way for its testdata model), with its ``SortedObject``.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

from tests.e2e.test_tfs_api_client import oracle_python

from .conftest import requires_model

SCRIPT = textwrap.dedent(
    r"""
    import json, sys, time, urllib.request
    from google.protobuf import json_format
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow_serving.apis import get_model_metadata_pb2, model_pb2

    host_port, export_dir = sys.argv[1], sys.argv[2]
    failures = []

    def call_rest(url, req):  # tensorflow_model_server_test_base.CallREST
        json_data = json.dumps(req).encode("utf-8") if req is not None else None
        resp = urllib.request.urlopen(urllib.request.Request(url, data=json_data))
        data = resp.read()
        resp.close()
        return data

    def sorted_object(obj):  # tensorflow_model_server_test_base.SortedObject
        if isinstance(obj, dict):
            return sorted((k, sorted_object(v)) for k, v in obj.items())
        if isinstance(obj, list):
            return sorted(sorted_object(x) for x in obj)
        return obj

    def check(name, got, expected):
        if got != expected:
            failures.append(f"{name}: got {got!r}, expected {expected!r}")

    def to_dict(message):
        try:
            return json_format.MessageToDict(
                message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
        except TypeError:  # protobuf before 26
            return json_format.MessageToDict(
                message, preserving_proto_field_name=True, including_default_value_fields=True)

    def expected_metadata():
        saved_model = saved_model_pb2.SavedModel()
        with open(export_dir + "/saved_model.pb", "rb") as f:
            saved_model.ParseFromString(f.read())
        (meta_graph,) = [m for m in saved_model.meta_graphs if list(m.meta_info_def.tags) == ["serve"]]
        signature_def_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature in meta_graph.signature_def.items():
            signature_def_map.signature_def[key].CopyFrom(signature)
        spec = model_pb2.ModelSpec(name="default")
        spec.version.value = 123
        return {"model_spec": to_dict(spec), "metadata": {"signature_def": to_dict(signature_def_map)}}

    base = "http://" + host_port
    # testClassifyREST
    got = call_rest(base + "/v1/models/default:classify",
                    {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]})
    check("testClassifyREST", json.loads(got.decode()), {"results": [[["", 3.0]]]})
    # testRegressREST
    got = call_rest(base + "/v1/models/default:regress",
                    {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]})
    check("testRegressREST", json.loads(got.decode()), {"results": [3.0]})
    # testPredictREST
    got = call_rest(base + "/v1/models/default:predict", {"instances": [2.0, 3.0, 4.0]})
    check("testPredictREST", json.loads(got.decode()), {"predictions": [3.0, 3.5, 4.0]})
    # testPredictColumnarREST
    got = call_rest(base + "/v1/models/default:predict", {"inputs": [2.0, 3.0, 4.0]})
    check("testPredictColumnarREST", json.loads(got.decode()), {"outputs": [3.0, 3.5, 4.0]})
    # testGetStatusREST
    got = call_rest(base + "/v1/models/default", None)
    check("testGetStatusREST", json.loads(got.decode()), {
        "model_version_status": [{
            "version": "123", "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""}}]})
    # testGetModelMetadataREST
    got = call_rest(base + "/v1/models/default/metadata", None)
    check("testGetModelMetadataREST", sorted_object(json.loads(got.decode())), sorted_object(expected_metadata()))
    print(json.dumps({"failures": failures}))
    """
)


def test_tensorflow_serving_rest_integration_tests_pass(model_server, model_dir, free_port, tmp_path):
    requires_model("half_plus_two")
    base = model_dir("half_plus_two")
    rest_port = free_port()
    model_server(
        f"--rest_api_port={rest_port}",
        "--rest_api_timeout_in_ms=5000",
        f"--grpc_socket_path={tmp_path / 'tf-serving.sock'}",
        "--model_name=default",
        f"--model_base_path={base}",
    )
    result = subprocess.run(
        [str(oracle_python()), "-c", SCRIPT, f"localhost:{rest_port}", f"{base}/00000123"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"failures": []}


PROMETHEUS_SCRIPT = textwrap.dedent(
    r"""
    import json, sys, urllib.request
    url = "http://{}/monitoring/prometheus/metrics".format(sys.argv[1])
    resp = urllib.request.urlopen(urllib.request.Request(url, data=None))  # CallREST(url, None)
    data = resp.read()
    resp.close()
    print(json.dumps({"has_type": "# TYPE" in data.decode("utf-8")}))
    """
)


def test_tensorflow_serving_prometheus_endpoint_test_passes(model_server, model_dir, free_port, tmp_path):
    """testPrometheusEndpoint: RunServer with TF Serving's testdata monitoring_config.txt, then
    CallREST on the page, which must hold metric type information ("# TYPE")."""
    requires_model("half_plus_two")
    config = tmp_path / "monitoring_config.txt"
    config.write_text('prometheus_config {\n  enable: true,\n  path: "/monitoring/prometheus/metrics"\n}\n')
    rest_port = free_port()
    model_server(
        f"--rest_api_port={rest_port}",
        "--rest_api_timeout_in_ms=5000",
        "--model_name=default",
        f"--model_base_path={model_dir('half_plus_two')}",
        f"--monitoring_config_file={config}",
    )
    result = subprocess.run(
        [str(oracle_python()), "-c", PROMETHEUS_SCRIPT, f"localhost:{rest_port}"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"has_type": True}
