"""Graph plumbing ops: constants, placeholders, identities, no-ops."""

from __future__ import annotations

from runtime import dtypes, errors
from runtime.kernels.registry import kernel


@kernel("Const", constant=True)
def const(*, value):
    # Decoded once per plan, and a plan's value from then on (no step): kernels never write into
    # their inputs, so sharing it is safe.
    return value


@kernel("Placeholder", "PlaceholderV2")
def placeholder(*, dtype, shape=None, ctx):
    """Runs only when the placeholder is not fed: TF's error, word for word."""
    text = f"You must feed a value for placeholder tensor '{ctx.name}' with dtype {dtypes.name(dtype)}"
    if shape:  # unknown rank and scalars print no shape, as in TF
        text += " and shape [" + ",".join("?" if d is None else str(d) for d in shape) + "]"
    raise errors.InvalidArgumentError(None, None, text)


@kernel("PlaceholderWithDefault")
def placeholder_with_default(input):
    return input


@kernel("Identity", "StopGradient", "PreventGradient")
def identity(input):
    return input


@kernel("IdentityN")
def identity_n(input):
    return tuple(input)


@kernel("NoOp")
def no_op():
    return None
