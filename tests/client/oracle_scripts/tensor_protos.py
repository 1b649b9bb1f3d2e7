"""TensorFlow's answers to tests/client/tensor_cases.py (run with the oracle's tf221 python).

    <oracle>/tf221/bin/python tests/client/oracle_scripts/tensor_protos.py OUT.json

Loads the case table by path (it must not import the repository's packages), runs every case
through ``tf.make_tensor_proto`` / ``tf.make_ndarray`` and writes ``{case name: record}`` as
JSON to OUT.json (stdout is TensorFlow's to clutter).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import tensor_pb2  # noqa: E402

TABLE = Path(__file__).resolve().parents[1] / "tensor_cases.py"


def load_table():
    spec = importlib.util.spec_from_file_location("tensor_cases", TABLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def main() -> None:
    table = load_table()
    lib = table.Library(tf.make_tensor_proto, tf.make_ndarray, tf.as_dtype, tensor_pb2.TensorProto)
    records = {case.name: table.run_case(case, lib) for case in table.CASES}
    records["__versions__"] = {"tensorflow": tf.__version__}
    Path(sys.argv[1]).write_text(json.dumps(records, indent=0, sort_keys=True))


if __name__ == "__main__":
    main()
