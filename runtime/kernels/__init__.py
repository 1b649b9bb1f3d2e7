"""Numpy kernels, one module per TF op family (``math_ops.py``, ``array_ops.py``, ...).

Importing this package imports every ``*_ops`` module beside it, which registers their kernels.
"""

import importlib
import pkgutil

from runtime.kernels.registry import KERNELS, KernelDef, kernel, lookup

for _module in pkgutil.iter_modules(__path__):
    if _module.name.endswith("_ops"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["KERNELS", "KernelDef", "kernel", "lookup"]
