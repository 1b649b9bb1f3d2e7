"""Numpy kernels, one module per TF op family (``math_ops.py``, ``array_ops.py``, ...).

Each ``*_ops`` module registers its kernels when imported (``registry.py``), and ``lookup``
imports the one an op type needs on first use (``index.py``, generated): a process imports the
kernels its models run. Beside them, what kernels share: the Session's resources they keep state
in (``resources.py``: variables, tables), TF's string hashes (``hashing.py``), a dense hash table
(``dense_hash_table.py``) and numpy's BLAS threads (``blas.py``).

May import: ``runtime.example`` and ``runtime.checkpoint`` (the parsing and restore kernels),
``runtime.tensor_util``, ``runtime.errors``, ``runtime.dtypes`` and ``apis``. Never the graph model
or the execution engine: a kernel sees arrays, its attrs and its ``ctx``.
"""

from runtime.kernels.registry import KERNELS, KernelDef, kernel, load_all, lookup

__all__ = ["KERNELS", "KernelDef", "kernel", "load_all", "lookup"]
