"""The package's layering: apis <- runtime <- loader <- serving, and TensorFlow nowhere.

import-linter checks the contracts in pyproject.toml (indirect imports included, runtime's
subpackages among them); no module imports itself back through others, function-local imports
included; a fresh interpreter proves the four packages import without TensorFlow being loaded.
"""

import ast
import pathlib
import subprocess
import sys

import grimp

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("apis", "runtime", "loader", "serving")


def test_import_contracts_hold():
    lint_imports = pathlib.Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(imports[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_cycles():
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(_cycles(imports)) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_cycles():
    """Where two modules need each other, the shared piece moves down into its own module (or the
    dependency is inverted): a module-level or function-local import loop fails here."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    imports = {
        module: {m for m in graph.find_modules_directly_imported_by(module) if m.split(".")[0] in PACKAGES}
        for module in graph.modules
    }
    assert not _cycles(imports)


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
