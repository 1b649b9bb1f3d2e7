"""A fresh venv with only savedmodel-client installed (``pip install ./client``, not editable)
runs the README's client examples against ``model_server`` as a process.

The venv gets the client and what pip resolves for it, nothing else: no TensorFlow, no
onnxruntime, none of the server's packages; importing the client pulls in none of them (and not
grpc, until a gRPC call is made). Each example is the README's code block as written, with
``localhost:8500`` replaced by the test server's address; its printed lines are checked against
the results the README gives in its comments.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO_ROOT

EXAMPLE = re.compile(r"<!-- client example: (\w+) -->\n```python\n(.*?)```", re.DOTALL)


def readme_examples() -> dict[str, str]:
    return dict(EXAMPLE.findall((REPO_ROOT / "README.md").read_text()))


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("client_venv")
    venv.create(root, with_pip=True, symlinks=True)
    python = root / "bin" / "python"
    build = tmp_path_factory.mktemp("client_build")
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-cache-dir", str(REPO_ROOT / "client")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=build,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return python


def run(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONNOUSERSITE": "1"}
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


def test_the_venv_holds_the_client_and_its_three_dependencies_only(client_venv, tmp_path):
    listing = run(
        client_venv,
        "import importlib.metadata as m; print(sorted(d.metadata['Name'].lower() for d in m.distributions()))",
        tmp_path,
    )
    names = set(eval(listing.stdout))  # a list of names printed by the line above
    assert {"savedmodel-client", "grpcio", "protobuf", "numpy"} <= names
    assert not names & {
        "tensorflow",
        "tensorflow-cpu",
        "onnxruntime",
        "savedmodel-server",
        "ml-dtypes",
        "aiohttp",
    }
    imports = run(
        client_venv,
        "import sys, savedmodel_client as tf; tf.make_tensor_proto([1.0]); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'onnxruntime', 'grpc', 'serving', 'runtime', 'apis', 'aiohttp'}))",
        tmp_path,
    )
    assert imports.returncode == 0, imports.stderr
    assert imports.stdout.strip() == "[]"


def test_the_readme_examples_run_against_model_server(client_venv, model_server, model_dir, tmp_path):
    from tests.e2e.conftest import free_port

    rest_port = free_port()
    server = model_server(
        f"--model_base_path={model_dir('half_plus_two')}",
        "--model_name=half_plus_two",
        f"--rest_api_port={rest_port}",
    )
    examples = readme_examples()
    assert set(examples) == {"protos", "client"}
    for name, code in examples.items():
        for transport, address in (("grpc", server.address), ("rest", f"127.0.0.1:{rest_port}")):
            if transport == "rest":
                if 'Client("localhost:8500")' not in code:
                    continue
                code = code.replace('Client("localhost:8500")', 'Client("localhost:8500", "rest")')
            source = code.replace("localhost:8500", address)
            result = run(client_venv, source, tmp_path)
            assert result.returncode == 0, (name, transport, result.stderr[-3000:])
            lines = result.stdout.strip().splitlines()
            printed = [line for line in code.splitlines() if "print(" in line]
            assert len(lines) == len(printed), (name, transport, result.stdout)
            for line, statement in zip(lines, printed):
                comment = statement.split("  # ", 1)
                if len(comment) == 2:
                    assert line == comment[1].strip(), (name, transport, statement, line)


def test_pythonpath_is_not_what_makes_it_work(client_venv, tmp_path):
    """The client imports from the venv's site-packages, not from this checkout."""
    result = run(client_venv, "import savedmodel_client; print(savedmodel_client.__file__)", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "site-packages" in result.stdout and str(REPO_ROOT) not in result.stdout
    assert sys.prefix not in result.stdout
