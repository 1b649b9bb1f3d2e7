"""Numpy kernels, one module per TF op family (``math_ops.py``, ``array_ops.py``, ...).

Importing this package imports every ``*_ops`` module beside it, which registers their kernels
(``registry.py``). Beside them, what kernels share: the Session's resources they keep state in
(``resources.py``: variables, tables), TF's string hashes (``hashing.py``), a dense hash table
(``dense_hash_table.py``) and numpy's BLAS threads (``blas.py``).

May import: ``runtime.example`` and ``runtime.checkpoint`` (the parsing and restore kernels),
``runtime.tensor_util``, ``runtime.errors``, ``runtime.dtypes`` and ``apis``. Never the graph model
or the execution engine: a kernel sees arrays, its attrs and its ``ctx``.
"""

import importlib
import pkgutil

from runtime.kernels.registry import KERNELS, KernelDef, kernel, lookup

for _module in pkgutil.iter_modules(__path__):
    if _module.name.endswith("_ops"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["KERNELS", "KernelDef", "kernel", "lookup"]
