"""A new version copied in while clients are busy: no request fails, the new version is served.

Eight models, every export family of the oracle corpus, are served by one ``model_server``:

- TF1 ``Builder``: half_plus_two (an asset no op reads) and pickup_tf1_sharded_assets (two data
  shards; the init op fills a lookup table from assets/vocab.txt);
- Estimator: estimator_classifier (saved with default attrs stripped);
- ``tf.saved_model.save`` of a ``tf.Module``: half_plus_two_tf2 and pickup_module_sharded_assets
  (three data shards, a table from an asset);
- Keras 2 ``model.save``: pickup_keras2_save;
- Keras 3 ``model.export``: keras_mlp and pickup_keras3_sharded (four data shards).

(The TF2 ones restore in a library function; their checkpoint keys are found there.) Version 2
of each is written into its base path the way real tools write it, each step visible to the
server's 1 s polls, all eight at once, while two clients per model send Predict without naming a
version. Every answer must equal the first one (a table filled from half a vocabulary, or a
variable read from half a shard, would answer differently), no request may fail, and once the
copies are complete every model answers from version 2.

The writing orders, on the local file system (each file written in two pieces unless said):
``cp`` (saved_model.pb first, then the rest in name order), ``rsync`` (the same, each file under
a temporary name, then renamed), ``variables first`` (saved_model.pb last), ``index before data``,
``shards one by one`` (the index, then each data shard in turn, each stalled for several polls),
``assets last`` (after the checkpoint; each asset written whole, as ``cp`` writes a file smaller
than its buffer) and ``resumed`` (``cp`` stopped half way through the data for several polls).
On object storage (moto's S3 server) objects appear whole, one at a time, in the orders that
make sense there. With ``--file_system_settle_seconds`` the server does not even try to load a
copy until it has stopped changing.
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
from apis.tensorflow.core.framework import tensor_pb2
from apis.tensorflow_serving.apis import predict_pb2
from runtime.tensor_util import make_ndarray, make_tensor_proto
from tests.e2e.conftest import MODELS_DIR
from tests.e2e.s3_server import BUCKET
from tests.oracle.corpus import load_manifest


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


# committed model -> (its version directory, its input's key, the input)
COMMITTED = {
    "estimator_classifier": ("1", "inputs", _flower()),
    "half_plus_two": ("00000123", "x", np.float32([[1.0]])),
    "half_plus_two_tf2": ("1", "x", np.float32([1.0])),
    "keras_mlp": ("1", "features", np.float32([[0.1, -0.2, 0.3, 0.4]])),
}
# oracle-built models (tests/oracle/builders/pickup_*.py): fed their first case's inputs
BUILT = [
    "pickup_tf1_sharded_assets",
    "pickup_module_sharded_assets",
    "pickup_keras2_save",
    "pickup_keras3_sharded",
]
MODELS = [*COMMITTED, *BUILT]
SOURCE = MODELS_DIR / "half_plus_two" / "00000123"
STEP = 1.2  # longer than the 1 s poll: the server sees every intermediate state
STALL = 4 * STEP
PREDICT = "/tensorflow.serving.PredictionService/Predict"
LOCAL_ORDERS = [
    "cp",
    "rsync",
    "variables first",
    "index before data",
    "shards one by one",
    "assets last",
    "resumed",
]
S3_ORDERS = [
    "saved_model.pb first",
    "variables first",
    "index before data",
    "shards one by one",
    "assets last",
]


def export_of(model: str) -> Path:
    if model in COMMITTED:
        return MODELS_DIR / model / COMMITTED[model][0]
    return load_manifest(model)["export_path"]


def request_of(model: str) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if model in COMMITTED:
        _, key, value = COMMITTED[model]
        request.inputs[key].CopyFrom(make_tensor_proto(value))
        return request
    manifest = load_manifest(model)
    case = manifest["cases"][0]
    request.model_spec.signature_name = case["signature"]
    for key, relative in case["inputs"].items():
        request.inputs[key].CopyFrom(
            tensor_pb2.TensorProto.FromString((Path(manifest["dir"]) / relative).read_bytes())
        )
    return request


def _kind(relative: Path) -> int:
    """0 saved_model.pb, 1 the rest (assets, metadata), 2 the checkpoint index, 3 a data shard."""
    if relative.name.startswith("saved_model.pb"):
        return 0
    if relative.parts[0] == "variables":
        return 3 if ".data-" in relative.name else 2
    return 1


def files_in_order(order: str, source: Path = SOURCE) -> list[Path]:
    """The files of ``source`` (relative) in the order ``order`` writes them."""
    files = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
    if order == "variables first":
        return sorted(files, key=lambda f: _kind(f) == 0)
    if order in ("index before data", "shards one by one"):
        return sorted(files, key=lambda f: (_kind(f), str(f)))
    if order == "assets last":
        return sorted(files, key=lambda f: (f.parts[0] == "assets", _kind(f) != 0, str(f)))
    return sorted(files, key=lambda f: _kind(f) != 0)  # cp, rsync, resumed, saved_model.pb first


def write_in_pieces(src: Path, dst: Path, pause: float = STEP) -> None:
    data = src.read_bytes()
    with open(dst, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        time.sleep(pause)
        f.write(data[len(data) // 2 :])


def copy_like(tool: str, target: Path, source: Path = SOURCE) -> None:
    """Writes ``source`` to ``target`` as ``tool`` would (see the module docstring), pausing
    between steps."""
    target.mkdir()
    time.sleep(STEP)
    for relative in files_in_order(tool, source):
        dst = target / relative
        dst.parent.mkdir(parents=True, exist_ok=True)
        if tool == "rsync":
            temp = dst.with_name(f".{dst.name}.XyZ123")
            write_in_pieces(source / relative, temp)
            time.sleep(STEP)
            os.rename(temp, dst)
        elif tool == "assets last" and relative.parts[0] == "assets":
            dst.write_bytes((source / relative).read_bytes())
        else:
            stalls = tool in ("resumed", "shards one by one") and _kind(relative) == 3
            write_in_pieces(source / relative, dst, STALL if stalls else STEP)
        time.sleep(STEP)


def upload_like(order: str, fs, target: str, source: Path) -> None:
    """Puts ``source`` under ``target`` on object storage one object at a time, in ``order``."""
    for relative in files_in_order(order, source):
        fs.put_file(str(source / relative), f"{target}/{relative.as_posix()}")
        time.sleep(STALL if order == "shards one by one" and _kind(relative) == 3 else STEP)


class Clients:
    """Threads sending Predict for the latest version of one model; failures and versions
    recorded. Every answer must equal the first one (every version holds the same model)."""

    def __init__(self, address: str, model: str = "half_plus_two", threads: int = 4) -> None:
        self.model = model
        self._data = request_of(model).SerializeToString()
        self._first: dict | None = None
        self.failures: list[str] = []
        self.versions: list[int] = []
        self.sent = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(address,)) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self, address: str) -> None:
        channel = grpc.insecure_channel(address)
        call = channel.unary_unary(PREDICT, response_deserializer=predict_pb2.PredictResponse.FromString)
        while not self._stop.is_set():
            try:
                response = call(self._data, timeout=10)
                answer = {k: make_ndarray(v) for k, v in response.outputs.items()}
                self._first = self._first or answer
                if not _same(answer, self._first):
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


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if x.dtype == object or y.dtype == object:
            if x.shape != y.shape or x.tolist() != y.tolist():
                return False
        elif x.shape != y.shape or not np.allclose(x, y, rtol=1e-6, atol=0):
            return False
    return True


def _config(tmp_path: Path, bases: dict[str, str]) -> Path:
    config = tmp_path / "models.config"
    entries = "".join(
        f'  config {{ name: "{model}" base_path: "{base}" model_platform: "tensorflow" }}\n'
        for model, base in bases.items()
    )
    config.write_text(f"model_config_list {{\n{entries}}}\n")
    return config


def _run_under_load(server, write_version_2) -> dict[str, Clients]:
    """Clients on every model while ``write_version_2(model)`` runs for all of them at once;
    returns once every model answers from version 2 (or 60 s have passed)."""
    clients = {model: Clients(server.address, model, threads=2) for model in MODELS}
    try:
        writers = [threading.Thread(target=write_version_2, args=(model,)) for model in MODELS]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            not c.versions or c.versions[-1] != 2 for c in clients.values()
        ):
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        for c in clients.values():
            c.stop()
    return clients


def _check(clients: dict[str, Clients], what: str) -> None:
    for model, c in clients.items():
        print(f"{what} {model}: {c.sent} requests, {len(c.failures)} failed, last version {c.versions[-1:]}")
    assert {model: c.failures[:3] for model, c in clients.items() if c.failures} == {}
    assert {model: (c.versions[0], c.versions[-1]) for model, c in clients.items()} == {
        m: (1, 2) for m in MODELS
    }


@pytest.mark.parametrize("tool", LOCAL_ORDERS)
def test_a_version_copied_in_under_load_fails_no_request(model_server, tmp_path, tool):
    bases = {}
    for model in MODELS:
        bases[model] = str(tmp_path / model)
        (tmp_path / model).mkdir()
        os.symlink(export_of(model), tmp_path / model / "1")
    server = model_server(
        f"--model_config_file={_config(tmp_path, bases)}", "--file_system_poll_wait_seconds=1"
    )
    clients = _run_under_load(
        server, lambda model: copy_like(tool, Path(bases[model]) / "2", export_of(model))
    )
    _check(clients, tool)
    log = server.output()
    if tool == "cp":  # the half-copied states were tried and refused
        assert "has no checkpoint" in log and "Is it still being written?" in log
    if tool == "shards one by one":
        assert "lacks data shard" in log or "cut short" in log
    if tool == "assets last":
        assert "lacks the asset file" in log
    assert server.stop() == 0


@pytest.mark.parametrize("order", S3_ORDERS)
def test_a_version_uploaded_to_object_storage_under_load_fails_no_request(
    model_server, s3, monkeypatch, tmp_path, order
):
    fs, proxy = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    bases = {model: f"{BUCKET}/models/{model}" for model in MODELS}
    for model, base in bases.items():
        fs.put(str(export_of(model)) + "/", f"{base}/1/", recursive=True)
    config = _config(tmp_path, {model: f"s3://{base}" for model, base in bases.items()})
    server = model_server(
        f"--model_config_file={config}",
        "--file_system_poll_wait_seconds=1",
        f"--remote_model_cache_dir={tmp_path / 'cache'}",
    )
    clients = _run_under_load(
        server, lambda model: upload_like(order, fs, f"{bases[model]}/2", export_of(model))
    )
    _check(clients, f"s3 {order}")
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
