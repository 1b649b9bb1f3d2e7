"""The op registry: one numpy function per TF op, registered by decorator.

A kernel's signature is the op's spec: inputs positional (in TF's input order; list inputs such as
ConcatV2's ``values`` arrive as one Python list), attrs keyword-only with TF's names and defaults::

    @kernel("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
    def batch_mat_mul(x, y, *, adj_x=False, adj_y=False): ...

Only the attrs a kernel names are passed (``T`` and friends are dropped unless asked for). A kernel
that declares a keyword-only ``ctx`` parameter receives the ``OpContext`` (session resources, the
node, the function library). It returns one value for a single-output op and a tuple for an op with
several outputs or a list output, flattened in TF's output order. Special cases are registry data,
never ``if op == ...`` in the interpreter:

- ``stateful``: reads or writes state (variables, tables, random): never folded or cached.
- ``const_inputs``: input indices that must be known before run (shapes, axes): used by ONNX
  conversion and shape inference.
- ``accepts_dead``: the op consumes dead tensors of TF1 control flow itself (Merge, and the ops that
  forward deadness by design); for every other op a dead input makes every output dead.
- ``quiet``: the kernel does no numpy floating-point math of its own (or silences it itself), so
  a run of only quiet kernels needs no ``np.errstate`` (about 1 us a run).
- ``per_node``: ``fn(ctx=...)`` runs once per node when a plan is built and returns the function
  each run calls with the inputs (TF's OpKernel constructor, then Compute): a kernel that owns
  per-node state (a compiled onnxruntime session) then costs no lookup per run.

A kernel marks an output dead (Switch's untaken branch) by returning ``DEAD`` in its place.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from runtime.kernels.index import MODULES, STATEFUL


@dataclass(frozen=True)
class KernelDef:
    """A registered kernel and what the interpreter needs to know about it, computed once."""

    op_types: tuple[str, ...]
    fn: Callable
    stateful: bool = False
    const_inputs: tuple[int, ...] = ()
    accepts_dead: bool = False
    quiet: bool = False
    per_node: bool = False
    constant: bool = False  # no inputs, the same value every run: a plan computes it once
    attr_names: frozenset[str] = field(default_factory=frozenset)
    required_attrs: frozenset[str] = field(default_factory=frozenset)  # attrs without a default
    attr_defaults: dict = field(default_factory=dict)  # the attrs' keyword defaults
    takes_all_attrs: bool = False
    needs_context: bool = False
    module: str = ""  # the module that registered it (``index.py`` maps op types to these)

    def select_attrs(self, attrs: dict) -> dict:
        """The subset of a node's decoded attrs this kernel's signature names."""
        if self.takes_all_attrs:
            return dict(attrs)
        # By name, so a lazily decoded mapping decodes only what the kernel takes.
        return {k: attrs[k] for k in self.attr_names if k in attrs}


KERNELS: dict[str, KernelDef] = {}  # what the kernel modules imported so far registered


class _Dead:
    """The value of a dead tensor (TF1 control flow): a singleton the interpreter propagates."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEAD"


DEAD = _Dead()


def kernel(
    *op_types: str,
    stateful: bool = False,
    const_inputs: tuple[int, ...] = (),
    accepts_dead: bool = False,
    quiet: bool = False,
    per_node: bool = False,
    constant: bool = False,
) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the numpy kernel of each TF op type named."""

    def register(fn: Callable) -> Callable:
        keywords, takes_all_attrs = _keyword_parameters(fn)
        attrs = {name: default for name, default in keywords.items() if name != "ctx"}
        definition = KernelDef(
            op_types=op_types,
            fn=fn,
            stateful=stateful,
            const_inputs=const_inputs,
            accepts_dead=accepts_dead,
            quiet=quiet,
            per_node=per_node,
            constant=constant,
            attr_names=frozenset(attrs),
            required_attrs=frozenset(name for name, default in attrs.items() if default is _REQUIRED),
            attr_defaults={name: default for name, default in attrs.items() if default is not _REQUIRED},
            takes_all_attrs=takes_all_attrs,
            needs_context="ctx" in keywords,
            module=sys._getframe(1).f_globals.get("__name__", ""),
        )
        for op_type in op_types:
            if op_type in KERNELS:
                raise ValueError(f"Kernel for op {op_type!r} registered twice")
            KERNELS[op_type] = definition
        return fn

    return register


_REQUIRED = object()  # a keyword-only parameter without a default


def _keyword_parameters(fn: Callable) -> tuple[dict[str, object], bool]:
    """``fn``'s keyword-only parameters with their defaults (``_REQUIRED`` where none), and whether
    it takes ``**kwargs``: read off its code object, as ``inspect.signature`` does at a tenth of
    its cost, which start-up pays for every kernel."""
    fn = inspect.unwrap(fn)
    code = fn.__code__
    names = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    defaults = fn.__kwdefaults__ or {}
    keywords = {name: defaults.get(name, _REQUIRED) for name in names}
    return keywords, bool(code.co_flags & inspect.CO_VARKEYWORDS)


def lookup(op_type: str) -> KernelDef | None:
    """The kernel for an op type, or None. A kernel module is imported when one of its op types
    is first looked up (``index.py``): a start imports the kernels its model runs, not all 46
    modules (36 ms of a 0.4 s start from the cluster cache went to importing them)."""
    definition = KERNELS.get(op_type)
    if definition is None:
        module = MODULES.get(op_type)
        if module is not None:
            importlib.import_module(f"runtime.kernels.{module}")
            definition = KERNELS.get(op_type)
    return definition


def registered(op_type: str) -> bool:
    """Whether a kernel runs ``op_type``, answered without importing its module: a load's
    signature checks ask it of every op type the model's functions hold, most of which the
    delegated graph never runs natively."""
    return op_type in KERNELS or op_type in MODULES


def stateful(op_type: str) -> bool:
    """Whether the kernel of ``op_type`` is stateful (False without one), as ``registered``."""
    definition = KERNELS.get(op_type)
    return definition.stateful if definition is not None else op_type in STATEFUL


def load_all() -> dict[str, KernelDef]:
    """Every kernel module imported: the whole registry (for tables and tests, not for a start)."""
    for module in sorted(set(MODULES.values())):
        importlib.import_module(f"runtime.kernels.{module}")
    return KERNELS
