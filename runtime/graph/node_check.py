"""The NodeDef checks TF makes against an op's definition (``ValidateNodeDef``): every attr the
op has without a default is there (``runtime/graph/op_attrs.py``, from TF's registry), and the data
inputs are as many as the op's args say (``runtime/graph/op_signatures.py``). TF makes them when it
imports a graph, and so does ``runtime.graph.graph``; a plan checks again, when it first resolves a
node's kernel, the attrs that kernel needs. A malformed node thus fails with TF's
InvalidArgumentError naming it, never with a Python error from inside its kernel.

The texts are TF's up to the op summary: TF's ``Op<...>`` lists the op's attrs after its
signature, which the generated tables do not hold; ours stops after the signature.
"""

from __future__ import annotations

from runtime import dtypes, errors
from runtime.graph.op_attrs import REQUIRED_ATTRS
from runtime.graph.op_def import ArgSpec, OpSignature

_REQUIRED = {op: frozenset(names.split(",")) for op, names in REQUIRED_ATTRS.items()}
_NONE: frozenset[str] = frozenset()


def check_node(op, required_attrs: frozenset[str], signature: OpSignature | None, data_inputs: int) -> None:
    """InvalidArgumentError (TF's text) when ``op`` lacks a required attr, or has other than its
    signature's number of data inputs (``data_inputs``: its non-control inputs)."""
    attrs = op.node_def.attr
    required = _REQUIRED.get(op.type, _NONE)
    if required_attrs:
        required = required | required_attrs
    for name in required:
        if name not in attrs:
            _missing_attrs(op, required, signature)
    if signature is None:
        return
    expected = signature.fixed_inputs
    if expected is None:
        try:
            expected = sum(arg.size(op.attrs) for arg in signature.inputs)
        except (TypeError, ValueError):  # a number or type-list attr of the wrong kind
            return  # the kernel's own checks speak for it
    if expected != data_inputs:
        names = ", ".join(t for arg in signature.inputs for t in _arg_types(arg, op.attrs))
        raise _invalid(
            op,
            f"NodeDef expected inputs '{names}' do not match {data_inputs} inputs specified; "
            f"{_summary(op.type, signature)}",
        )


def _missing_attrs(op, required: frozenset[str], signature: OpSignature | None) -> None:
    missing = sorted(name for name in required if name not in op.node_def.attr)
    plural = "s" if len(missing) > 1 else ""
    names = "', '".join(missing)
    raise _invalid(op, f"NodeDef missing attr{plural} '{names}' from {_summary(op.type, signature)}")


def _arg_types(arg: ArgSpec, attrs) -> list[str]:
    return [_type_name(t) for t in arg.dtypes(attrs)]


def _type_name(dtype: int | None) -> str:
    if dtype is None:
        return "?"
    try:
        return dtypes.name(dtype)
    except (KeyError, TypeError, ValueError):  # not a DataType (a malformed attr)
        return str(dtype)


def _summary(op_type: str, signature: OpSignature | None) -> str:
    if signature is None:
        return f"Op<name={op_type}>"
    inputs = ", ".join(_arg(a) for a in signature.inputs)
    outputs = ", ".join(_arg(a) for a in signature.outputs)
    return f"Op<name={op_type}; signature={inputs} -> {outputs}>"


def _arg(arg: ArgSpec) -> str:
    kind = arg.type_attr or arg.type_list_attr or (_type_name(arg.fixed_type) if arg.fixed_type else "?")
    count = f"{arg.number_attr}*" if arg.number_attr else ""
    ref = "Ref(" if arg.is_ref else ""
    return f"{arg.name}:{ref}{count}{kind}{')' if arg.is_ref else ''}"


def _invalid(op, text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(op.node_def, op, f"{text}; NodeDef: {{{{node {op.name}}}}}")
