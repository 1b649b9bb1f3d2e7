"""Resource variables: ``VarHandleOp`` handles, read and updated through the Session's ResourceMgr."""

from __future__ import annotations

import functools
import itertools

import numpy as np

from runtime import dtypes, errors
from runtime.kernels.bounds import in_range
from runtime.kernels.registry import kernel
from runtime.kernels.resources import ANONYMOUS_NAME, VAR_KIND, ResourceHandle, Var, resource_key

_anonymous = itertools.count()


@kernel("VarHandleOp", stateful=True)
def var_handle_op(*, dtype, shape=None, container="", shared_name="", ctx):
    container, name = resource_key(container, shared_name, ctx.name)
    if name == ANONYMOUS_NAME:
        return ResourceHandle(container, f"{ctx.name}_anonymous_{next(_anonymous)}", VAR_KIND, dtype, shape)
    return _handle(container, name, dtype, tuple(shape) if shape is not None else None)


@functools.lru_cache(maxsize=4096)  # handles are immutable values: one per variable, not per run
def _handle(container: str, name: str, dtype: int, shape: tuple | None) -> ResourceHandle:
    return ResourceHandle(container, name, VAR_KIND, dtype, shape)


def _missing(handle: ResourceHandle) -> errors.OpError:
    return errors.FailedPreconditionError(
        None,
        None,
        f"Could not find variable {handle.name}. This could mean that the variable has been "
        "deleted. In TF1, it can also mean the variable is uninitialized. Debug info: "
        f"container={handle.container}, status error message=Resource "
        f"{handle.container}/{handle.name}/{handle.kind} does not exist.",
    )


def _initialized(resource: ResourceHandle, ctx) -> Var:
    var = ctx.resources.get(resource)
    if var is None or var.value is None:
        raise _missing(resource)
    return var


def _check_dtype(var: Var, dtype: int, verb: str) -> None:
    if dtype != var.dtype:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Trying to {verb} variable with wrong dtype. Expected {dtypes.name(var.dtype)} got "
            f"{dtypes.name(dtype)}",
        )


@kernel("ReadVariableOp", stateful=True)
def read_variable_op(resource, *, dtype, ctx):
    var = _initialized(resource, ctx)
    _check_dtype(var, dtype, "read")
    return var.value


@kernel("AssignVariableOp", stateful=True)
def assign_variable_op(resource, value, *, dtype, ctx):
    var = ctx.resources.lookup_or_create(resource, lambda: Var(resource.name, dtype, resource.shape))
    _check_dtype(var, dtype, "assign")
    var.value = np.asarray(value, dtype=dtypes.as_numpy_dtype(dtype))


def _update(resource, value, ctx, sign: int) -> None:
    var = _initialized(resource, ctx)
    with var.lock:
        current = var.value
        var.value = np.asarray(current + value if sign > 0 else current - value, current.dtype)


@kernel("AssignAddVariableOp", stateful=True)
def assign_add_variable_op(resource, value, *, ctx):
    _update(resource, value, ctx, 1)


@kernel("AssignSubVariableOp", stateful=True)
def assign_sub_variable_op(resource, value, *, ctx):
    _update(resource, value, ctx, -1)


@kernel("VarIsInitializedOp", stateful=True)
def var_is_initialized_op(resource, *, ctx):
    var = ctx.resources.get(resource)
    return np.asarray(var is not None and var.is_initialized)


@kernel("DestroyResourceOp", stateful=True)
def destroy_resource_op(resource, *, ignore_lookup_error=True, ctx):
    try:
        ctx.resources.delete(resource)
    except errors.NotFoundError:
        if not ignore_lookup_error:
            raise


@kernel("DisableCopyOnRead", stateful=True)
def disable_copy_on_read(resource):
    # Copy-on-read is a TF memory optimisation; values here are never written in place.
    return None


@kernel("ResourceGather", stateful=True)
def resource_gather(resource, indices, *, batch_dims=0, dtype, ctx):
    params = _initialized(resource, ctx).value
    indices = np.asarray(indices)
    limit = params.shape[batch_dims] if params.ndim > batch_dims else 0
    if not in_range(indices, limit):
        where = np.argwhere((indices < 0) | (indices >= limit))[0]
        position = ",".join(str(i) for i in where)
        raise errors.InvalidArgumentError(
            None, None, f"indices[{position}] = {indices[tuple(where)]} is not in [0, {limit})"
        )
    if batch_dims == 0:
        taken = params.take(indices, axis=0)
        return taken if indices.ndim else np.asarray(taken, params.dtype)  # a 0-d tensor, not a scalar
    batch = params.shape[:batch_dims]
    flat_params = params.reshape((-1, *params.shape[batch_dims:]))
    flat_indices = indices.reshape((flat_params.shape[0], *indices.shape[batch_dims:]))
    gathered = np.stack([np.take(p, i, axis=0) for p, i in zip(flat_params, flat_indices)])
    return gathered.reshape((*batch, *gathered.shape[1:]))
