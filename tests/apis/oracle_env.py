"""Finding and running the TensorFlow oracle venvs from the main venv.

The oracle directory is `$SMS_ORACLE_DIR`, default `<repo>/.oracle`, holding the venvs
`tf221` (tensorflow-cpu 2.21 + tensorflow-serving-api 2.21) and `tf215` (tensorflow-cpu
2.15). A missing venv fails the calling test: wire identity is never skipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = Path(__file__).resolve().parent
ORACLE_DIR_ENV = "SMS_ORACLE_DIR"
BUILD_HINT = "build the oracle venvs with `python -m tests.oracle build` (from the repo root)"


def oracle_dir() -> Path:
    return Path(os.environ.get(ORACLE_DIR_ENV) or REPO_ROOT / ".oracle")


def oracle_python(venv: str) -> Path:
    """The python of oracle venv `venv`; fails the test with a build hint when absent."""
    python = oracle_dir() / venv / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"oracle venv {venv!r} is missing ({python} not found): {BUILD_HINT}, "
            f"or point ${ORACLE_DIR_ENV} at an oracle directory that has it",
            pytrace=False,
        )
    return python


def run_script(venv: str, script: str, *args: str, timeout: float = 600) -> str:
    """Runs module `oracle_scripts.<script>` in oracle venv `venv`; returns its stdout.

    The child starts in tests/apis, keeping the repository root (and so our `apis`
    package) off its sys.path: only TensorFlow's own generated modules are importable.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = subprocess.run(
        [str(oracle_python(venv)), "-m", f"oracle_scripts.{script}", *args],
        cwd=TESTS_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{script} {' '.join(args)} failed in oracle venv {venv!r} "
            f"(exit {result.returncode}):\n{result.stderr[-4000:]}",
            pytrace=False,
        )
    return result.stdout
