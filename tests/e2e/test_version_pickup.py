"""A new version copied in while clients are busy: no request fails, the new version is served.

Version 2 of a TF1 export (half_plus_two), of an Estimator's (estimator_classifier, saved with
default attrs stripped), of a ``tf.saved_model.save`` of a ``tf.Module``
(half_plus_two_tf2) and of a Keras 3 ``model.export`` (keras_mlp; these two restore in a library
function) is written into the served base path the way real tools write it,
each step visible to the server's 1 s polls: ``cp -r`` (saved_model.pb first, every file written
in pieces), ``rsync`` (each file written under a temporary name, then renamed; saved_model.pb
first) and an upload that sends the variables before saved_model.pb. Meanwhile four clients send
Predict without naming a version. Every request must succeed, and once the copy is complete the
responses come from version 2. With ``--file_system_settle_seconds`` the server does not even try to
load the copy until it has stopped changing.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from apis.tensorflow.core.example import example_pb2
from apis.tensorflow_serving.apis import predict_pb2
from runtime.tensor_util import make_tensor_proto
from tests.e2e.conftest import MODELS_DIR


def _flower() -> np.ndarray:
    """One serialized tf.Example of the estimator_classifier's four float features."""
    example = example_pb2.Example()
    for name, value in (
        ("sepal_length", 5.1),
        ("sepal_width", 3.5),
        ("petal_length", 1.4),
        ("petal_width", 0.2),
    ):
        example.features.feature[name].float_list.value.append(value)
    return np.array([example.SerializeToString()], dtype=object)


# model -> (its version directory, the input it is fed)
MODELS = {
    "estimator_classifier": ("1", "inputs", _flower()),
    "half_plus_two": ("00000123", "x", np.float32([[1.0]])),
    "half_plus_two_tf2": ("1", "x", np.float32([1.0])),
    "keras_mlp": ("1", "features", np.float32([[0.1, -0.2, 0.3, 0.4]])),
}
SOURCE = MODELS_DIR / "half_plus_two" / "00000123"
STEP = 1.2  # longer than the 1 s poll: the server sees every intermediate state
PREDICT = "/tensorflow.serving.PredictionService/Predict"


def files_in_order(saved_model_first: bool, source: Path = SOURCE) -> list[Path]:
    files = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
    pb = [f for f in files if f.name == "saved_model.pb"]
    rest = [f for f in files if f.name != "saved_model.pb"]
    return pb + rest if saved_model_first else rest + pb


def write_in_pieces(src: Path, dst: Path, pause: float = STEP) -> None:
    data = src.read_bytes()
    with open(dst, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        time.sleep(pause)
        f.write(data[len(data) // 2 :])


def copy_like(tool: str, target: Path, source: Path = SOURCE) -> None:
    """Writes ``source`` to ``target`` as ``tool`` would, pausing between steps: ``cp`` and
    ``rsync`` (saved_model.pb first), ``variables first``, ``index before data`` (saved_model.pb,
    then the checkpoint index, then its data) and ``resumed`` (cp, stopped half way through the
    data for several polls, then resumed)."""
    target.mkdir()
    time.sleep(STEP)
    files = files_in_order(tool != "variables first", source)
    if tool == "index before data":
        files.sort(key=lambda f: (f.name != "saved_model.pb", "data" in f.name))
    for relative in files:
        dst = target / relative
        dst.parent.mkdir(parents=True, exist_ok=True)
        if tool == "rsync":
            temp = dst.with_name(f".{dst.name}.XyZ123")
            write_in_pieces(source / relative, temp)
            time.sleep(STEP)
            os.rename(temp, dst)
        else:
            stalls = tool == "resumed" and "data" in relative.name
            write_in_pieces(source / relative, dst, 4 * STEP if stalls else STEP)
        time.sleep(STEP)


class Clients:
    """Four threads sending Predict for the latest version; failures and versions recorded. Every
    answer must equal the first one (half_plus_two: y = 2.5; every version holds the same model)."""

    def __init__(self, address: str, model: str = "half_plus_two") -> None:
        _, key, value = MODELS[model]
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.inputs[key].CopyFrom(make_tensor_proto(value))
        self._data = request.SerializeToString()
        self._first: dict = {"y": [2.5]} if model == "half_plus_two" else {}
        self.failures: list[str] = []
        self.versions: list[int] = []
        self.sent = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(address,)) for _ in range(4)]
        for thread in self._threads:
            thread.start()

    def _run(self, address: str) -> None:
        channel = grpc.insecure_channel(address)
        call = channel.unary_unary(PREDICT, response_deserializer=predict_pb2.PredictResponse.FromString)
        while not self._stop.is_set():
            try:
                response = call(self._data, timeout=10)
                answer = {k: list(v.float_val) for k, v in response.outputs.items()}
                self._first = self._first or answer
                if answer != self._first:
                    self.failures.append(f"answer {answer} != {self._first}")
                self.versions.append(response.model_spec.version.value)
            except grpc.RpcError as e:
                self.failures.append(f"{e.code().name}: {e.details()}")
            self.sent += 1
            time.sleep(0.005)
        channel.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("tool", ["cp", "rsync", "variables first", "index before data", "resumed"])
def test_a_version_copied_in_under_load_fails_no_request(model_server, model_dir, tool, model):
    version = MODELS[model][0]
    base = Path(model_dir(model, versions={version: "1"}))
    server = model_server(f"--model_base_path={base}", f"--model_name={model}")
    clients = Clients(server.address, model)
    try:
        copy_like(tool, base / "2", MODELS_DIR / model / version)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not clients.versions or clients.versions[-1] != 2):
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        clients.stop()
    print(f"{model} {tool}: {clients.sent} requests, {len(clients.failures)} failed")
    assert clients.failures == []
    assert clients.versions[0] == 1 and clients.versions[-1] == 2
    if tool == "cp":  # the half-copied states were tried and refused
        assert "has no checkpoint" in server.output()
    assert server.stop() == 0


def test_a_version_still_changing_is_not_tried(model_server, model_dir):
    base = Path(model_dir("half_plus_two", versions={"00000123": "1"}))
    server = model_server(
        f"--model_base_path={base}", "--model_name=half_plus_two", "--file_system_settle_seconds=3"
    )
    clients = Clients(server.address)
    try:
        copy_like("cp", base / "2")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not clients.versions or clients.versions[-1] != 2):
            time.sleep(0.1)
    finally:
        clients.stop()
    assert clients.failures == []
    assert clients.versions[-1] == 2
    log = server.output()
    assert "is still changing" in log
    assert "Loading servable: {name: half_plus_two version: 2} failed" not in log
    assert server.stop() == 0
