"""``runtime/kernels/index.py``, the op type -> kernel module table ``lookup`` imports from.

Kernel modules are imported when one of their op types is first looked up, so the table must
name, for every kernel the modules register, the module that registers it. Regenerate it after
adding or moving a kernel::

    python -m tests.runtime.test_kernel_index
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import runtime.kernels
from runtime.kernels import index, registry

INDEX = Path(index.__file__)
HEADER = '''"""Which module of ``runtime/kernels`` registers each op type's kernel: generated, do not edit.

``registry.lookup`` imports a kernel module when one of its op types is first looked up;
``registry.registered`` and ``registry.stateful`` answer from here without importing it. Made by
``python -m tests.runtime.test_kernel_index`` (which also checks it is current).
"""

MODULES: dict[str, str] = {
'''


def registered_modules() -> dict[str, str]:
    """Op type -> the ``runtime.kernels`` module registering it, every ``*_ops`` module imported."""
    for module in pkgutil.iter_modules(runtime.kernels.__path__):
        if module.name.endswith("_ops"):
            importlib.import_module(f"runtime.kernels.{module.name}")
    prefix = "runtime.kernels."
    return {
        op: definition.module[len(prefix) :]
        for op, definition in sorted(registry.KERNELS.items())
        if definition.module.startswith(prefix)
    }


def index_text(modules: dict[str, str]) -> str:
    stateful = sorted(op for op in modules if registry.KERNELS[op].stateful)
    return (
        HEADER
        + "".join(f'    "{op}": "{module}",\n' for op, module in modules.items())
        + "}\n\n# The op types whose kernels are stateful (``KernelDef.stateful``).\n"
        + "STATEFUL: frozenset[str] = frozenset(\n    {\n"
        + "".join(f'        "{op}",\n' for op in stateful)
        + "    }\n)\n"
    )


def test_the_index_is_current():
    assert INDEX.read_text() == index_text(registered_modules()), (
        "runtime/kernels/index.py is stale: python -m tests.runtime.test_kernel_index"
    )


def test_every_kernel_is_found_from_a_fresh_start_and_only_its_module_is_imported():
    script = textwrap.dedent(
        """
        import sys
        from runtime.kernels import index, lookup
        loaded = lambda: {m for m in sys.modules if m.startswith("runtime.kernels.") and m.endswith("_ops")}
        assert not loaded(), loaded()
        from runtime.kernels.registry import registered, stateful
        assert all(registered(op) for op in index.MODULES) and not loaded()
        assert [op for op in index.MODULES if stateful(op)] == sorted(index.STATEFUL) and not loaded()
        missing = [op for op in index.MODULES if lookup(op) is None]
        assert not missing, missing
        assert {op for op in index.MODULES if stateful(op)} == index.STATEFUL
        assert not registered("NoSuchOp") and not stateful("NoSuchOp")
        before = loaded()
        assert lookup("NoSuchOp") is None and loaded() == before
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=INDEX.parents[2])


def test_a_first_lookup_imports_the_module_it_needs():
    script = textwrap.dedent(
        """
        import sys
        from runtime.kernels import lookup
        assert lookup("Conv2D").module == "runtime.kernels.conv_ops"
        assert "runtime.kernels.parsing_ops" not in sys.modules
        assert "runtime.example.parser" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=INDEX.parents[2])


if __name__ == "__main__":
    INDEX.write_text(index_text(registered_modules()))
