"""``model_server --prefer_tflite_model=true`` as a process: TF Serving's own TF Lite integration
tests (testPredictOnTfLite, testPredictWithSignatureDefOnTfLite) run unmodified with
tensorflow-serving-api's stubs in the oracle's tf221 venv, then REST, V2 and the metrics page on
TF Lite models, and the start-up error without the ``tflite`` extra.

Models are the oracle's rebuilds of TF Serving's test data (``tests/oracle/builders/tflite_models.py``);
a missing one fails with how to build it.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import urllib.error
import urllib.request

from tests.e2e.conftest import REPO_ROOT, server_command
from tests.e2e.test_tfs_api_client import oracle_python
from tests.serving.test_tflite import layout_base

# TF Serving's tensorflow_model_server_test.py: the two tests, VerifyPredictRequest,
# _VerifyModelSpec and _GetModelVersion as they are there; RunServer gives the address of the
# server this test started with RunServer's flags.
TF_SERVING_TESTS = textwrap.dedent(
    r"""
    import json, os, sys, unittest
    import grpc
    from tensorflow.core.framework import types_pb2
    from tensorflow.python.saved_model import signature_constants
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    RPC_TIMEOUT = 5.0
    ADDRESS, TFLITE_PATH, TFLITE_WITH_SIGDEF_PATH, TEST = sys.argv[1:5]


    class TensorflowModelServerTest(unittest.TestCase):

      @classmethod
      def RunServer(cls, model_name, model_path, model_type='tf'):
        assert model_name == 'default' and model_type == 'tflite'
        return None, ADDRESS, None

      def _GetTfLiteModelPath(self):
        return TFLITE_PATH

      def _GetTfLiteModelWithSigDefPath(self):
        return TFLITE_WITH_SIGDEF_PATH

      def _GetModelVersion(self, model_path):
        return int(os.listdir(model_path)[0])

      def _VerifyModelSpec(self, actual_model_spec, exp_model_name, exp_signature_name, exp_version):
        self.assertEqual(actual_model_spec.name, exp_model_name)
        self.assertEqual(actual_model_spec.signature_name, exp_signature_name)
        self.assertEqual(actual_model_spec.version.value, exp_version)

      def VerifyPredictRequest(
          self,
          model_server_address,
          expected_output,
          expected_version,
          model_name='default',
          specify_output=True,
          batch_input=False,
          signature_name=signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY,
          rpc_timeout=RPC_TIMEOUT):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model_name
        request.model_spec.signature_name = signature_name
        request.inputs['x'].dtype = types_pb2.DT_FLOAT
        request.inputs['x'].float_val.append(2.0)
        dim = request.inputs['x'].tensor_shape.dim.add()
        dim.size = 1
        if batch_input:
          request.inputs['x'].tensor_shape.dim.add().size = 1

        if specify_output:
          request.output_filter.append('y')
        channel = grpc.insecure_channel(model_server_address)
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        result = stub.Predict(request, rpc_timeout)  # 5 secs timeout
        self.assertTrue('y' in result.outputs)
        self.assertEqual(types_pb2.DT_FLOAT, result.outputs['y'].dtype)
        self.assertEqual(1, len(result.outputs['y'].float_val))
        self.assertEqual(expected_output, result.outputs['y'].float_val[0])
        self._VerifyModelSpec(result.model_spec, request.model_spec.name,
                              signature_name, expected_version)

      def testPredictOnTfLite(self):
        model_server_address = TensorflowModelServerTest.RunServer(
            'default', self._GetTfLiteModelPath(), model_type='tflite')[1]
        self.VerifyPredictRequest(
            model_server_address,
            expected_output=3.0,
            specify_output=False,
            expected_version=self._GetModelVersion(self._GetTfLiteModelPath()))

      def testPredictWithSignatureDefOnTfLite(self):
        model_server_address = TensorflowModelServerTest.RunServer(
            'default', self._GetTfLiteModelWithSigDefPath(), model_type='tflite')[1]
        self.VerifyPredictRequest(
            model_server_address,
            expected_output=3.0,
            specify_output=False,
            expected_version=self._GetModelVersion(self._GetTfLiteModelPath()))


    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(
        unittest.TestSuite([TensorflowModelServerTest(TEST)]))
    print(json.dumps({"ran": result.testsRun, "failures": [str(f[1]) for f in result.failures + result.errors]}))
    """
)


def run_server_as_tf_serving_does(model_server, free_port, tmp_path, base):
    """RunServer's command line with --prefer_tflite_model=true (model_type='tflite')."""
    return model_server(
        f"--rest_api_port={free_port()}",
        "--rest_api_timeout_in_ms=5000",
        f"--grpc_socket_path={tmp_path / 'tf-serving.sock'}",
        "--model_name=default",
        f"--model_base_path={base}",
        "--prefer_tflite_model=true",
        "--grpc_channel_arguments=grpc.so_reuseaddr=1",
    )


def run_tf_serving_test(model_server, free_port, tmp_path, test: str, layout: str) -> None:
    plain = layout_base("tflite_half_plus_two", "saved_model_half_plus_two_tflite", tmp_path / "tflite")
    with_sigdef = layout_base(
        "tflite_half_plus_two",
        "saved_model_half_plus_two_tflite_with_sigdef",
        tmp_path / "tflite_with_sigdef",
    )
    served = {
        "saved_model_half_plus_two_tflite": plain,
        "saved_model_half_plus_two_tflite_with_sigdef": with_sigdef,
    }
    server = run_server_as_tf_serving_does(model_server, free_port, tmp_path, served[layout])
    result = subprocess.run(
        [str(oracle_python()), "-c", TF_SERVING_TESTS, server.address, str(plain), str(with_sigdef), test],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"ran": 1, "failures": []}, result.stderr
    assert server.stop() == 0


def test_tf_servings_testPredictOnTfLite_passes(model_server, free_port, tmp_path):
    run_tf_serving_test(
        model_server, free_port, tmp_path, "testPredictOnTfLite", "saved_model_half_plus_two_tflite"
    )


def test_tf_servings_testPredictWithSignatureDefOnTfLite_passes(model_server, free_port, tmp_path):
    run_tf_serving_test(
        model_server,
        free_port,
        tmp_path,
        "testPredictWithSignatureDefOnTfLite",
        "saved_model_half_plus_two_tflite_with_sigdef",
    )


def http(port: int, path: str, document=None) -> tuple[int, dict | str]:
    data = None if document is None else json.dumps(document).encode()
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data), timeout=30
        ) as r:
            status, body = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read().decode()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


def test_rest_v2_and_metrics_serve_tflite_models(model_server, free_port, tmp_path):
    half = layout_base("tflite_half_plus_two", "saved_model_half_plus_two_tflite", tmp_path / "half")
    dense = layout_base("tflite_dense", "dense_float", tmp_path / "dense")
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f"  config {{ name: 'half' base_path: '{half}' model_platform: 'tensorflow' }}\n"
        f"  config {{ name: 'dense' base_path: '{dense}' model_platform: 'tensorflow' }}\n"
        "}\n"
    )
    monitoring = tmp_path / "monitoring_config.txt"
    monitoring.write_text(
        'prometheus_config {\n  enable: true,\n  path: "/monitoring/prometheus/metrics"\n}\n'
    )
    rest = free_port()
    server = model_server(
        f"--rest_api_port={rest}",
        f"--model_config_file={config}",
        f"--monitoring_config_file={monitoring}",
        "--prefer_tflite_model=true",
        "--num_tflite_pools=2",
    )
    assert http(rest, "/v1/models/half:predict", {"instances": [[2.0]]}) == (200, {"predictions": [[3.0]]})
    status, metadata = http(rest, "/v1/models/half/metadata")
    assert status == 200
    signature = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["inputs"]["x"]["name"] == "x" and signature["outputs"]["y"]["name"] == "y"
    assert http(rest, "/v1/models/dense:predict", {"instances": [[0.0] * 65]}) == (
        500,
        {"error": "Failed to allocate tensors"},
    )
    document = {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [2.0]}]}
    status, answer = http(rest, "/v2/models/half/infer", document)
    assert status == 200 and answer["outputs"] == [
        {"name": "y", "datatype": "FP32", "shape": [1, 1], "data": [3.0]}
    ]
    status, v2_metadata = http(rest, "/v2/models/half")
    assert status == 200 and v2_metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [1, 1]}]
    assert v2_metadata["platform"] == "tensorflow_lite"
    status, page = http(rest, "/monitoring/prometheus/metrics")
    assert status == 200
    assert ':tensorflow:serving:request_count{model_name="half",status="OK"} 2' in page
    assert ':tensorflow:serving:request_count{model_name="dense",status="INTERNAL"} 1' in page
    assert (
        ':tensorflow:serving:runtime_latency_count{model_name="half",API="Predict",runtime="TF1"} 2' in page
    )
    assert server.stop() == 0


def test_without_the_extra_the_flag_ends_the_start_with_one_line_naming_the_package(tmp_path, monkeypatch):
    shadow = tmp_path / "shadow" / "ai_edge_litert"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named ai_edge_litert')\n")
    base = layout_base("tflite_half_plus_two", "saved_model_half_plus_two_tflite", tmp_path / "m")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(REPO_ROOT)])}
    result = subprocess.run(
        [
            *server_command(),
            "--port=0",
            "--grpc_socket_path=" + str(tmp_path / "s.sock"),
            "--model_name=m",
            f"--model_base_path={base}",
            "--prefer_tflite_model=true",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=str(tmp_path),
    )
    assert result.returncode == 255, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == (
        "Failed to start server. Error: FAILED_PRECONDITION: --prefer_tflite_model=true serves TensorFlow Lite "
        "models through LiteRT's interpreter, which is not installed: pip install 'savedmodel-server[tflite]' "
        "(the ai-edge-litert package)"
    )
