"""What TensorFlow does with the malformed GraphDefs of ``tests/runtime/graph_fuzz.py``.

Each case is imported with ``tf.import_graph_def`` (TF's graph constructor, the same checks as
TF Serving's load) and, where that succeeds, run in a ``tf.compat.v1.Session``. Stored under
``<cache>/graph_fuzz/results.json``::

    {"cases_sha256", "tf_version",
     "results": {name: {"stage": "import" | "run", "class": error class, "message": text}
                       | {"stage": "ok", "dtype": numpy dtype name, "shape": [...], "value": [...]}}}

The SavedModel this module must export for the catalog is a one-op identity; the cases are the point.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, graph_pb2

from tests.oracle import REPO_ROOT
from tests.oracle.tfside import Case, model
from tests.runtime import graph_fuzz

VENV = "tf221"
FAMILY = "op_records"
DEPENDS = ["tests/runtime/graph_fuzz.py"]
CASES_FILE = REPO_ROOT / "tests" / "runtime" / "graph_fuzz.py"


def _message(error: BaseException) -> str:
    """TF's text without the Python client's prefixes and the trailing node annotations."""
    text = getattr(error, "message", None) or str(error)
    text = re.split(r"Node: '[^']*'\n", text)[-1]
    return re.sub(r"\s*\[\[\{\{node .*", "", text, flags=re.S).strip()


def _run_case(case: dict) -> dict:
    graph_def = graph_fuzz.to_graph_def(case["nodes"], graph_pb2, attr_value_pb2, tf.make_tensor_proto)
    graph = tf.Graph()
    with graph.as_default():
        try:
            tf.graph_util.import_graph_def(graph_def, name="")
        except Exception as error:  # noqa: BLE001 - TF's refusal is the expectation
            return {"stage": "import", "class": type(error).__name__, "message": _message(error)}
    with tf.compat.v1.Session(graph=graph) as session:
        try:
            options = tf.compat.v1.RunOptions(timeout_in_ms=graph_fuzz.RUN_TIMEOUT_MS)
            value = np.asarray(session.run(case["fetch"], feed_dict=case["feeds"], options=options))
        except tf.errors.OpError as error:
            return {"stage": "run", "class": type(error).__name__, "message": _message(error)}
        except (TypeError, ValueError) as error:  # the Python client refused the fetch or a feed
            return {"stage": "run", "class": type(error).__name__, "message": _message(error)}
    return {"stage": "ok", "dtype": value.dtype.name, "shape": list(value.shape), "value": value.tolist()}


class _Identity(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def identity(self, x):
        return {"y": tf.identity(x)}


@model("graph_fuzz")
def build_graph_fuzz(export_dir: str) -> list[Case]:
    results = {case["name"]: _run_case(case) for case in graph_fuzz.cases()}
    out = Path(export_dir).parent
    manifest = {
        "cases_sha256": hashlib.sha256(CASES_FILE.read_bytes()).hexdigest(),
        "tf_version": tf.__version__,
        "results": results,
    }
    (out / "results.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    module = _Identity()
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.identity})
    return [Case("serving_default", {"x": np.array([1.0, 2.0], np.float32)})]
