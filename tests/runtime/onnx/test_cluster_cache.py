"""The cluster cache (``runtime/onnx/cluster_cache.py``): a second load of a model reads its
delegated graph and converted clusters instead of rewriting, converting and validating again; a
corrupt entry, another converter version or another model is a miss, rebuilt; entries are
whole or absent, whoever writes them at the same time. Outputs are TF's throughout.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from loader import load_saved_model, model_identity, read_fingerprint
from runtime import tensor_util
from runtime.onnx import cluster_cache, runner_of
from runtime.onnx.cluster_cache import ClusterCache
from tests.oracle import catalog, corpus

MODEL = "keras_cnn_bn"  # a convolution, batch norms (frozen chains), one cluster
rewrite_module = importlib.import_module("runtime.onnx.rewrite")  # what a miss runs: steps 1-4
converters_module = importlib.import_module("runtime.onnx.converters")  # what a miss converts with
cluster_module = sys.modules["runtime.onnx.cluster"]
options_module = importlib.import_module("runtime.onnx.options")  # its CPU's block keys the clusters


@pytest.fixture(scope="module")
def manifest():
    (entry,) = [e for e in catalog.discover() if e.name == MODEL]
    return corpus.check_current(entry)


def read_tensor(manifest: dict, relative: str) -> np.ndarray:
    return tensor_util.make_ndarray(
        tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes())
    )


def run_and_check(manifest: dict, directory: Path):
    """Loads the model with the cache in ``directory``, runs its first case, checks TF's outputs;
    returns the report."""
    case = manifest["cases"][0]
    bundle = load_saved_model(manifest["export_path"], case["tags"], cluster_cache=directory)
    try:
        signature = bundle.signature_defs[case["signature"]]
        feeds = {signature.inputs[k].name: read_tensor(manifest, p) for k, p in case["inputs"].items()}
        for key, path in case["outputs"].items():
            got = bundle.session.run(signature.outputs[key].name, feeds)
            np.testing.assert_allclose(got, read_tensor(manifest, path), rtol=1e-4, atol=1e-5)
        report = bundle.session.delegation_report
        assert report.flops_share == 1.0 and not report.fallbacks, report.summary()
        return report
    finally:
        bundle.close()


def tiny_model(scale: float = 1.0, width: int = 4) -> tuple:
    """y = x @ w: an ONNX model of one weight held out of it (``Converted``'s way), and the weight."""
    from onnx import TensorProto, helper

    from runtime.onnx.converter import IR_VERSION, OPSET, _held_out

    w = np.full((width, width), scale, np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [_held_out("w", w)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model, {"w": w}


def entries(directory: Path, kind: str) -> list[Path]:
    return sorted(directory.glob(f"*.{kind}"))


class Counting:
    """Counts calls of a module function (and still calls it)."""

    def __init__(self, monkeypatch, module, name: str):
        self.calls = 0
        original = getattr(module, name)

        def counted(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


def test_a_second_load_rewrites_converts_and_validates_nothing(manifest, tmp_path, monkeypatch):
    cold = run_and_check(manifest, tmp_path)
    assert len(entries(tmp_path, "plan")) == 1 and len(entries(tmp_path, "onnx")) == 1
    delegated = Counting(monkeypatch, rewrite_module, "rewrite")
    converted = Counting(monkeypatch, converters_module, "convert_cluster")
    validated = Counting(monkeypatch, cluster_module.ClusterRunner, "_run_native")
    warm = run_and_check(manifest, tmp_path)
    assert (delegated.calls, converted.calls, validated.calls) == (0, 0, 0)
    assert warm.to_json() == cold.to_json()
    assert warm.from_cache and not cold.from_cache and "read from the cluster cache" in warm.summary()


WARM_START = textwrap.dedent(
    """
    import sys
    from apis.tensorflow.core.framework import tensor_pb2
    from loader import load_saved_model
    from runtime import tensor_util
    from tests.oracle import corpus

    manifest = corpus.load_manifest(sys.argv[1])
    case = manifest["cases"][0]
    bundle = load_saved_model(manifest["export_path"], case["tags"], cluster_cache=sys.argv[2])
    signature = bundle.signature_defs[case["signature"]]
    read = lambda p: tensor_util.make_ndarray(tensor_pb2.TensorProto.FromString((manifest["dir"] / p).read_bytes()))
    feeds = {signature.inputs[k].name: read(p) for k, p in case["inputs"].items()}
    bundle.session.run([signature.outputs[k].name for k in case["outputs"]], feeds)
    assert bundle.session.delegation_report.from_cache
    heavy = ("onnx", "runtime.onnx.converters", "runtime.onnx.rewrite", "runtime.onnx.partition")
    print(sorted(name for name in heavy if name in sys.modules))
    """
)


def test_a_start_from_the_cache_imports_neither_the_converters_nor_onnx(manifest, tmp_path):
    # What the cache is for is a fast start: the rewrites, the converters and onnx (50-80 ms to
    # import) belong to a miss. A fresh process, since this one has imported them all.
    run_and_check(manifest, tmp_path)
    child = subprocess.run(
        [sys.executable, "-c", WARM_START, MODEL, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.strip().splitlines()[-1] == "[]"


def test_without_a_cache_directory_nothing_is_kept(manifest, tmp_path, monkeypatch):
    written = Counting(monkeypatch, ClusterCache, "write")
    case = manifest["cases"][0]
    load_saved_model(manifest["export_path"], case["tags"]).close()
    assert written.calls == 0


@pytest.mark.parametrize("kind", ["plan", "onnx"])
@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "other key"])
def test_a_corrupt_entry_is_ignored_and_rebuilt(manifest, tmp_path, monkeypatch, kind, damage):
    run_and_check(manifest, tmp_path)
    (path,) = entries(tmp_path, kind)
    good = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "flip":
        path.write_bytes(good[:-10] + bytes([good[-10] ^ 0x40]) + good[-9:])
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # a whole file, of another entry, under this name
        (other,) = [p for p in tmp_path.iterdir() if p.suffix == (".onnx" if kind == "plan" else ".plan")]
        path.write_bytes(other.read_bytes())
    rebuilt = Counting(monkeypatch, rewrite_module if kind == "plan" else converters_module, _builder(kind))
    run_and_check(manifest, tmp_path)
    assert rebuilt.calls == 1
    assert path.read_bytes() == good  # written again, whole (conversion is deterministic)


def _builder(kind: str) -> str:
    return "rewrite" if kind == "plan" else "convert_cluster"


def test_another_converter_version_is_a_miss(manifest, tmp_path, monkeypatch):
    run_and_check(manifest, tmp_path)
    monkeypatch.setattr(cluster_cache, "converter_version", lambda: "another version")
    converted = Counting(monkeypatch, converters_module, "convert_cluster")
    delegated = Counting(monkeypatch, rewrite_module, "rewrite")
    run_and_check(manifest, tmp_path)
    assert (delegated.calls, converted.calls) == (1, 1)
    assert len(entries(tmp_path, "plan")) == 2 and len(entries(tmp_path, "onnx")) == 2


def test_another_channel_block_is_a_miss_for_the_clusters(manifest, tmp_path, monkeypatch):
    """A replica on another CPU (AVX-512's block of 16 or another x86-64's 8) sharing the directory
    converts its clusters for its own block; the graph's plan is the same for both."""
    run_and_check(manifest, tmp_path)
    other = 8 if options_module.cpu_channel_block() == 16 else 16
    monkeypatch.setattr(options_module, "cpu_channel_block", lambda: other)
    converted = Counting(monkeypatch, converters_module, "convert_cluster")
    delegated = Counting(monkeypatch, rewrite_module, "rewrite")
    run_and_check(manifest, tmp_path)
    assert (delegated.calls, converted.calls) == (0, 1)
    assert len(entries(tmp_path, "plan")) == 1 and len(entries(tmp_path, "onnx")) == 2


def test_the_converter_version_covers_the_runtime_sources():
    version = cluster_cache.converter_version()
    assert len(version) == 64
    cluster_cache.converter_version.cache_clear()
    assert cluster_cache.converter_version() == version  # stable while nothing changes
    runtime_root = Path(cluster_cache.__file__).resolve().parents[1]
    every_source = sorted(path.relative_to(runtime_root).as_posix() for path in runtime_root.rglob("*.py"))
    assert cluster_cache._sources(str(runtime_root)) == every_source


def test_the_sources_hashed_are_every_py_file_below_the_root_and_no_cache(tmp_path):
    for name in (
        "a.py",
        "b.txt",
        "sub/c.py",
        "sub/deeper/d.py",
        "sub/__pycache__/c.cpython-311.pyc",
        "__pycache__/x.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert cluster_cache._sources(str(tmp_path)) == ["a.py", "sub/c.py", "sub/deeper/d.py"]


def test_another_model_is_a_miss(manifest, tmp_path):
    fingerprint = read_fingerprint(str(manifest["export_path"]))
    identity = model_identity(str(manifest["export_path"]), fingerprint)
    assert identity != model_identity(str(manifest["export_path"]), None)  # files, not the fingerprint
    one, other = ClusterCache(tmp_path, identity), ClusterCache(tmp_path, identity + " changed")
    key = one.key("onnx", "cluster")
    one.write_model(key, tiny_model()[0].SerializeToString())
    assert one.stored_model(key) is not None
    assert other.stored_model(other.key("onnx", "cluster")) is None


def test_an_export_without_a_fingerprint_is_named_by_its_files(tmp_path):
    (tmp_path / "variables").mkdir()
    (tmp_path / "saved_model.pb").write_bytes(b"graph")
    (tmp_path / "variables" / "variables.index").write_bytes(b"index")
    before = model_identity(str(tmp_path), None)
    (tmp_path / "variables" / "variables.index").write_bytes(b"index, changed")
    assert model_identity(str(tmp_path), None) != before


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not a cache entry",
        cluster_cache.MAGIC + (1 << 40).to_bytes(8, "big"),  # a header longer than the file
        cluster_cache.MAGIC + (2).to_bytes(8, "big") + b"[]",  # a header that is no object
    ],
)
def test_entries_that_fail_a_check_read_as_none(tmp_path, data):
    cache = ClusterCache(tmp_path, "model")
    key = cache.key("plan", "graph")
    (tmp_path / f"{key}.plan").write_bytes(data)
    assert cache.read("plan", key) is None


@pytest.mark.parametrize(
    "damage", ["no header", "header of another key", "header not json", "model shorter", "data changed"]
)
def test_a_model_whose_header_does_not_match_it_reads_as_none(tmp_path, damage):
    cache = ClusterCache(tmp_path, "model")
    key, other = cache.key("onnx", "cluster"), cache.key("onnx", "another cluster")
    for name, scale in ((key, 1.0), (other, 2.0)):
        model, large = tiny_model(scale)
        cache.place_weights(name, model, large)
        cache.write_model(name, model.SerializeToString(), large)
    head = tmp_path / f"{key}.onnx.json"
    if damage == "no header":
        head.unlink()
    elif damage == "header of another key":
        head.write_bytes((tmp_path / f"{other}.onnx.json").read_bytes())
    elif damage == "header not json":
        head.write_text("{")
    elif damage == "model shorter":
        (tmp_path / f"{key}.onnx").write_bytes(b"model")
    else:
        data = tmp_path / f"{key}.onnx.data"
        data.write_bytes(data.read_bytes()[::-1])
    assert cache.stored_model(key) is None
    assert cache.stored_model(other) is not None


def test_held_out_weights_are_written_beside_the_model_as_onnx_external_data(tmp_path):
    cache = ClusterCache(tmp_path, "model")
    key = cache.key("onnx", "cluster")
    model, large = tiny_model(0.5, width=1024)  # 4 MiB: what LARGE_BYTES holds out
    cache.place_weights(key, model, large)
    cache.write_model(key, model.SerializeToString(), large, {"shared": {"w": "w_placeholder"}})
    stored = cache.stored_model(key)
    assert stored.meta["shared"] == {"w": "w_placeholder"}
    assert (tmp_path / f"{key}.onnx").stat().st_size < 1024  # the weight is not in the model
    assert (tmp_path / f"{key}.onnx.data").read_bytes() == large["w"].tobytes()
    session = ort.InferenceSession(str(stored.path), providers=["CPUExecutionProvider"])
    x = np.linspace(-1, 1, 2 * 1024, dtype=np.float32).reshape(2, 1024)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], x @ large["w"], rtol=1e-5)


def test_concurrent_writers_leave_whole_entries(tmp_path):
    """Replicas sharing a directory: readers see a whole entry or none, never a torn one."""
    cache = ClusterCache(tmp_path, "model")
    key = cache.key("plan", "graph")
    payloads = [bytes([i]) * (1 << 20) for i in range(4)]
    seen, stop = [], threading.Event()

    def write(payload: bytes) -> None:
        for _ in range(20):
            cache.write("plan", key, payload)

    def read() -> None:
        while not stop.is_set():
            entry = cache.read("plan", key)
            seen.append(None if entry is None else entry.payload)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    reader.join()
    assert all(payload is None or payload in payloads for payload in seen)
    assert cache.read("plan", key).payload in payloads
    assert [p.name for p in tmp_path.iterdir()] == [f"{key}.plan"]  # no temporary file left


def test_a_warm_starts_native_runs_read_the_weights_from_the_session(manifest, tmp_path):
    """Read from the cache, clusters hold no weights until a native run needs them (a guard, a
    fallback): then ClusterConstants computes them in the Session, and the run is TF's."""
    run_and_check(manifest, tmp_path)
    case = manifest["cases"][0]
    bundle = load_saved_model(manifest["export_path"], case["tags"], cluster_cache=tmp_path)
    try:
        signature = bundle.signature_defs[case["signature"]]
        (key, path), (out_key, out_path) = *case["inputs"].items(), *case["outputs"].items()
        x = read_tensor(manifest, path)
        bundle.session.run(signature.outputs[out_key].name, {signature.inputs[key].name: x})
        clusters = [op for op in bundle.session.graph.get_operations() if op.type == "_OrtCluster"]
        (runner,) = [runner_of(op) for op in clusters if runner_of(op)._compiled]  # the one that ran
        assert runner._constant_names and runner._constants._values == {}  # nothing seeded
        (native,) = runner._run_native([x])
        np.testing.assert_allclose(native, read_tensor(manifest, out_path), rtol=1e-4, atol=1e-5)
        assert set(runner._constants._values) == set(runner._constant_names)
    finally:
        bundle.close()


@pytest.fixture(scope="module")
def zoo_manifest():
    (entry,) = [e for e in catalog.discover() if e.name == "zoo_mobilenet_v2_saved"]
    return corpus.check_current(entry)


def shared_weights(bundle) -> list[tuple[np.ndarray, list[np.ndarray]]]:
    """Per compiled cluster session: the arrays onnxruntime shares, and the Session's weights."""
    found = []
    for op in bundle.session.graph.get_operations():
        runner = runner_of(op) if op.type == "_OrtCluster" else None
        for session in runner._compiled.values() if runner else []:
            weights = runner._constants._values.values()
            found.extend((array, list(weights)) for array in session.shared_initializers[1])
    return found


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_weights_used_as_they_are_are_the_sessions_own_arrays_not_copies(
    zoo_manifest, tmp_path, monkeypatch, start
):
    """Weights held out of the converted model (here all over 4 KiB, not 1 MiB: MobileNetV2's
    classifier kernel among them): a cold start hands onnxruntime the restored variable itself,
    the cache writes it beside the model, and a warm start hands it the variable again instead of
    reading it back. Outputs are TF's throughout (``run_and_check``)."""
    monkeypatch.setattr(importlib.import_module("runtime.onnx.converter"), "LARGE_BYTES", 4096)
    if start == "warm":
        run_and_check(zoo_manifest, tmp_path)
    case = zoo_manifest["cases"][0]
    bundle = load_saved_model(zoo_manifest["export_path"], case["tags"], cluster_cache=tmp_path)
    try:
        signature = bundle.signature_defs[case["signature"]]
        feeds = {signature.inputs[k].name: read_tensor(zoo_manifest, p) for k, p in case["inputs"].items()}
        for key, path in case["outputs"].items():
            got = bundle.session.run(signature.outputs[key].name, feeds)
            np.testing.assert_allclose(got, read_tensor(zoo_manifest, path), rtol=1e-4, atol=1e-5)
        report = bundle.session.delegation_report
        assert report.flops_share == 1.0 and not report.fallbacks, report.summary()
        assert report.from_cache == (start == "warm")
        shared = shared_weights(bundle)
        assert shared
        for array, weights in shared:
            assert any(array is weight for weight in weights)
    finally:
        bundle.close()
    (model,) = entries(tmp_path, "onnx")
    assert model.with_suffix(".onnx.data").stat().st_size > model.stat().st_size
