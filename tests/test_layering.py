"""The package's layering: apis <- runtime <- loader <- serving, and TensorFlow nowhere.

import-linter checks the contracts in pyproject.toml (indirect imports included); a fresh interpreter
proves the four packages import without TensorFlow being loaded.
"""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("apis", "runtime", "loader", "serving")


def test_import_contracts_hold():
    lint_imports = pathlib.Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_module_imports_tensorflow():
    offenders = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                offenders += [
                    f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "tensorflow"
                ]
    assert not offenders, offenders


def test_packages_import_without_tensorflow():
    code = (
        "import sys, serving, runtime, loader, apis\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
