"""savedmodel_client's make_tensor_proto / make_ndarray against TensorFlow's, case by case.

Every case of ``tensor_cases.CASES`` runs once through TensorFlow 2.21 (the oracle's tf221 venv,
one subprocess per test session) and once through savedmodel_client; the records must be equal:
the same serialized TensorProto bytes, the same array (dtype, shape, bytes or items) back from
make_ndarray, or the same exception type and message. A missing oracle venv fails (with how to
build it); nothing is skipped.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from savedmodel_client import as_dtype, make_ndarray, make_tensor_proto
from savedmodel_client.tensorflow.core.framework import tensor_pb2

from tests.client import tensor_cases
from tests.oracle import oracle_dir

SCRIPT = Path(__file__).resolve().parent / "oracle_scripts" / "tensor_protos.py"
OURS = tensor_cases.Library(make_tensor_proto, make_ndarray, as_dtype, tensor_pb2.TensorProto)


def oracle_python() -> Path:
    python = oracle_dir() / "tf221" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no oracle venv at {python}: run `python -m tests.oracle build`")
    return python


@pytest.fixture(scope="session")
def tensorflow_records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("tensor_protos") / "tensorflow.json"
    result = subprocess.run(
        [str(oracle_python()), str(SCRIPT), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


def _comparable(record: dict[str, Any], case: tensor_cases.Case) -> dict[str, Any]:
    if case.message:
        return record
    return {
        key: {k: v for k, v in value.items() if k != "message"} if key.endswith("error") else value
        for key, value in record.items()
    }


@pytest.mark.parametrize("case", tensor_cases.CASES, ids=lambda case: case.name)
def test_matches_tensorflow(case: tensor_cases.Case, tensorflow_records: dict[str, Any]) -> None:
    assert case.name in tensorflow_records, "the oracle ran an older table"
    theirs = _comparable(tensorflow_records[case.name], case)
    ours = _comparable(tensor_cases.run_case(case, OURS), case)
    assert ours == theirs


def test_the_oracle_ran_tensorflow_2_21(tensorflow_records: dict[str, Any]) -> None:
    assert tensorflow_records["__versions__"]["tensorflow"].startswith("2.21.")
