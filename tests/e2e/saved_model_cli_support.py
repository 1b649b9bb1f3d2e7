"""Running ``saved_model_cli`` as a process, ours and TensorFlow's, and comparing their output.

- ``ours(*args)``: our console script (or ``python -m serving.saved_model_cli``), a process.
- ``tensorflow(commands, venv)``: TF's own ``saved_model_cli`` in an oracle venv, every command in
  one TensorFlow process (``tf_saved_model_cli.py``); returns {argv tuple: result}.
- ``normalize(text)``: the lines, with what TF prints in an order that changes from one process
  to the next made canonical: Python sets of op names, and dicts' entries.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.apis.oracle_env import oracle_python
from tests.oracle import catalog, corpus

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}
_SET_LINE = re.compile(r"^(.*(?:contains the following ops|denylisted ops): )(\{.*\}|set\(\))$")
_DICT_LINE = re.compile(r"^(\s*Value: \{)(.*)(\x08\x08\})$")


def command() -> list[str]:
    script = Path(sys.executable).with_name("saved_model_cli")
    return [str(script)] if script.exists() else [sys.executable, "-m", "serving.saved_model_cli"]


def ours(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*command(), *map(str, args)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


def model_dir(name: str) -> str:
    """The export directory of oracle model ``name``, built from the current sources."""
    (entry,) = [e for e in catalog.discover() if e.name == name]
    return str(corpus.check_current(entry)["export_path"])


def tensorflow(commands: list[list[str]], venv: str = "tf221", timeout: float = 900) -> dict[tuple, dict]:
    """TF's saved_model_cli on each command: {tuple(argv): {"stdout": ..., "error": ...}}."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | TF_ENV
    result = subprocess.run(
        [str(oracle_python(venv)), str(HERE / "tf_saved_model_cli.py")],
        input="".join(json.dumps([str(a) for a in c]) + "\n" for c in commands),
        cwd="/",  # keeps this repository (and its `apis`) off TF's sys.path
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    return {tuple(a["argv"]): a for a in answers}


def normalize(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        match = _SET_LINE.match(line)
        if match:
            items = set() if match.group(2) == "set()" else ast.literal_eval(match.group(2))
            line = match.group(1) + repr(sorted(items))
        match = _DICT_LINE.match(line)
        if match:
            entries = sorted(re.split(r", (?='[^']*': )", match.group(2).removesuffix(", ")))
            line = match.group(1) + ", ".join(entries) + match.group(3)
        lines.append(line)
    return lines


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The error our CLI printed; asserts it failed with exactly one line and no traceback."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("saved_model_cli: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0].removeprefix("saved_model_cli: error: ")
