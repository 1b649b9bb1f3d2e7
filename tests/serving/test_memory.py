"""An unloaded version leaves nothing behind: its Session, graph and onnxruntime sessions are
freed when its unload ends (``serving.resources.memory.release_freed``, ``ClusterRunner.close``), not
whenever the cyclic collector next runs."""

from __future__ import annotations

import shutil
import time
import weakref

import numpy as np
import onnxruntime as ort

from serving.inference.bundles import saved_model_load_fn
from serving.lifecycle.manager import AspiredVersionsManager
from serving.lifecycle.servable import ManagerState
from serving.lifecycle.source import AspiredVersion
from serving.options import ServerOptions
from tests.e2e.conftest import MODELS_DIR
from tests.serving.test_manager import states, wait_until

KERAS_MLP = MODELS_DIR / "keras_mlp" / "1"


def _onnx_sessions(session) -> list:
    from runtime.onnx.cluster import runner_of

    found = []
    for op in session.graph.get_operations():
        runner = runner_of(op)
        if runner is not None:
            found.extend(s for s in runner._compiled.values() if isinstance(s, ort.InferenceSession))
    return found


def test_an_unloaded_version_is_collected_at_its_unload(tmp_path):
    for version in (1, 2):
        shutil.copytree(KERAS_MLP, tmp_path / str(version))
    manager = AspiredVersionsManager(saved_model_load_fn(ServerOptions()), max_num_load_retries=0)
    try:
        manager.set_aspired_versions("m", [AspiredVersion(1, str(tmp_path / "1"))])
        wait_until(lambda: manager.available_versions("m") == [1], timeout=60)
        with manager.pin("m") as servable:
            session = servable.bundle.session
            out = _run(session)
            assert out.shape == (2, 3)
            onnx_sessions = _onnx_sessions(session)
            refs = [weakref.ref(session), weakref.ref(session.graph), *map(weakref.ref, onnx_sessions)]
            del session
        assert onnx_sessions, "keras_mlp runs in onnxruntime: its sessions are what this test watches"
        del onnx_sessions, servable
        manager.set_aspired_versions("m", [AspiredVersion(2, str(tmp_path / "2"))])
        wait_until(lambda: states(manager, "m").get(1) in (None, ManagerState.END), timeout=60)
        deadline = time.monotonic() + 10  # (the unload's thread frees them just after END)
        while time.monotonic() < deadline and any(r() is not None for r in refs):
            time.sleep(0.05)
        assert [r() is None for r in refs] == [True] * len(refs)
    finally:
        manager.stop()


def _run(session) -> np.ndarray:
    from loader import read_saved_model

    signature = read_saved_model(str(KERAS_MLP)).meta_graphs[0].signature_def["serving_default"]
    feed = next(iter(signature.inputs.values())).name
    fetch = next(iter(signature.outputs.values())).name
    return session.run(fetch, {feed: np.ones((2, 4), np.float32)})
