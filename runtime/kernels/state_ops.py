"""TF1 reference variables: ``VariableV2`` and the ops that assign through its ref output.

A ref edge carries the ``runtime.kernels.resources.Var`` itself; the Session inserts a read where an op
takes a value, so "Attempting to use uninitialized value" surfaces where TF raises it.
"""

from __future__ import annotations

import numpy as np

from runtime import errors
from runtime.kernels.registry import kernel
from runtime.kernels.resources import ResourceHandle, Var, resource_key

LEGACY_VAR_KIND = "N10tensorflow9LegacyVarE"


@kernel("VariableV2", "Variable", stateful=True)
def variable_v2(*, dtype, shape=None, container="", shared_name="", ctx):
    """The node's variable, created on first use and then kept by the node (TF's VariableOp
    keeps its ref the same way), so later runs skip the resource manager."""
    var = ctx.cached
    if var is None:
        container, name = resource_key(container, shared_name, ctx.name)
        handle = ResourceHandle(container, name, LEGACY_VAR_KIND, dtype, shape)
        var = ctx.cached = ctx.resources.lookup_or_create(handle, lambda: Var(name, dtype, shape))
    return var


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


@kernel("Assign", stateful=True)
def assign(ref: Var, value, *, validate_shape=True):
    value = np.asarray(value)
    current = ref.value
    if validate_shape and current is not None and current.shape != value.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Assign requires shapes of both tensors to match. lhs shape= "
            f"{_shape_text(current.shape)} rhs shape= {_shape_text(value.shape)}",
        )
    ref.value = value
    return ref


def _update(ref: Var, value, sign: int) -> Var:
    with ref.lock:
        current = ref.read()
        # A new array, never in place: the old value may be shared with a fetch or a Const.
        ref.value = np.asarray(current + value if sign > 0 else current - value, current.dtype)
    return ref


@kernel("AssignAdd", stateful=True)
def assign_add(ref: Var, value):
    return _update(ref, value, 1)


@kernel("AssignSub", stateful=True)
def assign_sub(ref: Var, value):
    return _update(ref, value, -1)


@kernel("IsVariableInitialized", stateful=True)
def is_variable_initialized(ref):
    return np.asarray(isinstance(ref, Var) and ref.is_initialized)
