"""The oracle's model catalog, read from the builder modules' source (stdlib only).

Builder modules import TensorFlow, which the main venv lacks, so this side never imports
them: it reads ``VENV``, ``FAMILY``, ``DEPENDS`` and the ``@model("name", ...)`` decorators with
``ast``. Decorator arguments must therefore be literals. ``DEPENDS`` lists repo-relative files
(e.g. op-record tables) the module reads, so that editing them rebuilds its models.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
from pathlib import Path

from tests.oracle import REPO_ROOT
from tests.oracle.venvs import VENVS, pins

BUILDERS_DIR = REPO_ROOT / "tests" / "oracle" / "builders"
TFSIDE = REPO_ROOT / "tests" / "oracle" / "tfside.py"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One model of the corpus, as declared by its builder module."""

    name: str
    family: str
    venv: str
    module: str  # dotted name, e.g. "tests.oracle.builders.tf1"
    path: Path
    committed: str | None  # repo-relative export dir of a committed example model
    depends: tuple[str, ...] = ()  # repo-relative files the builder module reads

    @property
    def models_dir(self) -> Path | None:
        """``models/<name>/`` holding a committed model's build.py and its version dir."""
        return (REPO_ROOT / self.committed).parent if self.committed else None


def discover() -> list[Entry]:
    """Every model of every builder module, in module then declaration order."""
    entries: list[Entry] = []
    seen: dict[str, Path] = {}
    for path in sorted(BUILDERS_DIR.glob("*.py")):
        if path.name.startswith("_"):
            continue
        for entry in _read_module(path):
            if entry.name in seen:
                raise ValueError(f"model {entry.name!r} declared in {seen[entry.name]} and {path}")
            seen[entry.name] = path
            entries.append(entry)
    return entries


def _read_module(path: Path) -> list[Entry]:
    tree = ast.parse(path.read_text(), filename=str(path))
    constants: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("VENV", "FAMILY", "DEPENDS"):
                constants[target.id] = ast.literal_eval(node.value)
    venv = constants.get("VENV")
    if venv not in VENVS:
        raise ValueError(f"{path}: VENV = {venv!r} is not one of {sorted(VENVS)}")
    module = "tests.oracle.builders." + path.stem
    family = constants.get("FAMILY", path.stem)
    entries = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if not _is_model_decorator(decorator):
                continue
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in decorator.keywords}
            entries.append(
                Entry(
                    name=ast.literal_eval(decorator.args[0]),
                    family=kwargs.get("family", family),
                    venv=venv,
                    module=module,
                    path=path,
                    committed=kwargs.get("committed"),
                    depends=tuple(constants.get("DEPENDS", ())),
                )
            )
    return entries


def _is_model_decorator(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "model") or (
        isinstance(func, ast.Attribute) and func.attr == "model"
    )


def builder_hash(entry: Entry) -> str:
    """What a model's reference data depends on; a change means a rebuild."""
    digest = hashlib.sha256()
    digest.update(_module_hash(entry.path, entry.venv, entry.depends).encode())
    if entry.models_dir is not None and entry.models_dir.is_dir():
        for file in sorted(p for p in entry.models_dir.rglob("*") if p.is_file()):
            if "__pycache__" in file.parts:
                continue
            digest.update(file.relative_to(REPO_ROOT).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


@functools.cache
def _module_hash(path: Path, venv: str, depends: tuple[str, ...] = ()) -> str:
    digest = hashlib.sha256()
    for source in (path, TFSIDE, BUILDERS_DIR / "__init__.py", *(REPO_ROOT / d for d in depends)):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    digest.update(pins(venv).encode())
    return digest.hexdigest()
