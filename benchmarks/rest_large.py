"""Large Predict bodies over REST against the same requests over gRPC, on one ``model_server``.

    .venv/bin/python benchmarks/rest_large.py [--sizes 1,4,16] [--repeats 5]

One ``model_server`` serves ``models/half_plus_two`` (floats in, floats out) and the oracle's
``tf1_vocab_table`` (``ids_to_words``: ints in, strings out; ``serving_default``: strings in,
ints out). For each body size (MB), kind and form (row: ``instances``; columnar: ``inputs``),
the same values go as a REST ``:predict`` JSON body (built before timing; strings as
``{"b64": ...}``) and as a gRPC PredictRequest (serialized before timing). The table gives the median
round-trip time of each transport over ``--repeats`` calls, answer read, and REST/gRPC. Run it
with the oracle built (``python -m tests.oracle build``). A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apis.tensorflow_serving.apis import predict_pb2  # noqa: E402
from benchmarks.predict_qps import GRPC_OPTIONS, model_server_command, stop  # noqa: E402
from serving.inference import tensor_codec  # noqa: E402
from tests.e2e.conftest import free_port  # noqa: E402
from tests.oracle import corpus  # noqa: E402

PREDICT = "/tensorflow.serving.PredictionService/Predict"


def float_values(count: int) -> np.ndarray:
    return (np.arange(count, dtype=np.float32) % 1000 / 7).reshape(-1, 1)


def id_values(count: int) -> np.ndarray:
    return np.arange(count, dtype=np.int64) % 5


def word_values(count: int) -> np.ndarray:
    return np.array([b"word-%d" % (i % 97) for i in range(count)], object)


def json_value(array: np.ndarray):
    if array.dtype == object:
        return [{"b64": base64.b64encode(v).decode()} for v in array.tolist()]
    return array.tolist()


def cases(sizes: list[int]):
    """(label, model, signature, REST body, gRPC request bytes) per size and form, each body of
    about the size: floats (half_plus_two's x), ints (tf1_vocab_table's ids_to_words) and base64
    strings (its serving_default), in the row and the columnar form."""
    for mb in sizes:
        target = mb * 1_000_000
        for kind, model, signature, name, values in (
            ("floats", "half", "", "x", float_values),
            ("ints", "vocab", "ids_to_words", "ids", id_values),
            ("b64 strings", "vocab", "", "words", word_values),
        ):
            per_value = len(json.dumps(json_value(values(10_000)))) / 10_000
            array = values(int(target / per_value))
            for form, doc in (
                ("row", {"instances": json_value(array)}),
                ("columnar", {"inputs": {name: json_value(array)}}),
            ):
                if signature:
                    doc["signature_name"] = signature
                body = json.dumps(doc).encode()
                yield f"{mb:>3} MB {kind}, {form}", model, body, grpc_request(model, signature, {name: array})


def grpc_request(model: str, signature: str, inputs: dict[str, np.ndarray]) -> bytes:
    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature
    for name, value in inputs.items():
        tensor_codec.encode_into(request.inputs[name], value)
    return request.SerializeToString()


def timed(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,4,16", help="REST body sizes, MB")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    manifest = corpus.load_manifest("tf1_vocab_table")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(REPO / "models" / "half_plus_two" / "00000123", work / "half" / "1")
        shutil.copytree(manifest["export_path"], work / "vocab" / "1")
        config = work / "models.config"
        config.write_text(
            "model_config_list {\n"
            + "".join(
                f'  config {{ name: "{n}" base_path: "{work / n}" model_platform: "tensorflow" }}\n'
                for n in ("half", "vocab")
            )
            + "}\n"
        )
        port, rest = free_port(), free_port()
        server = subprocess.Popen(
            [
                *model_server_command(),
                f"--port={port}",
                f"--rest_api_port={rest}",
                f"--model_config_file={config}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
            predict = channel.unary_unary(PREDICT)
            connection = http.client.HTTPConnection("127.0.0.1", rest, timeout=300)
            wait_ready(connection, server)
            print(f"REST :predict against gRPC Predict of the same values, median of {args.repeats} calls")
            header = f"{'body':40} | {'REST s':>8} {'gRPC s':>8} | {'REST/gRPC':>9}"
            print(header)
            print("-" * len(header))
            for label, model, body, data in cases([int(s) for s in args.sizes.split(",")]):

                def rest_call(model=model, body=body):
                    connection.request("POST", f"/v1/models/{model}:predict", body)
                    response = connection.getresponse()
                    answer = response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{response.status}: {answer[:200]!r}")

                rest_call()
                predict(data, timeout=300)
                r = timed(rest_call, args.repeats)
                g = timed(lambda data=data: predict(data, timeout=300), args.repeats)
                print(
                    f"{label:28} {len(body) / 1e6:>7.1f} MB | {r:>8.3f} {g:>8.3f} | {r / g:>9.1f}", flush=True
                )
        finally:
            stop(server)


def wait_ready(connection: http.client.HTTPConnection, server) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("model_server exited")
        try:
            ready = True
            for model in ("half", "vocab"):
                connection.request("GET", f"/v1/models/{model}")
                response = connection.getresponse()
                ready &= response.status == 200 and b"AVAILABLE" in response.read()
            if ready:
                return
        except OSError:
            connection.close()
        time.sleep(0.2)
    raise SystemExit("models did not load")


if __name__ == "__main__":
    main()
