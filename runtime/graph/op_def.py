"""Op definitions without OpDefs: each op's input and output args, from ``op_signatures.py``.

An ``OpSignature`` says which inputs are lists (grouped for the kernel), how many outputs an op
has (given its attrs), their dtypes, and which args are TF1 references. Library functions get
the same view of their ``signature``, so a call node looks like any other op.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from apis.tensorflow.core.framework import function_pb2
from runtime import dtypes
from runtime.graph.op_signatures import SIGNATURES


@dataclass(frozen=True)
class ArgSpec:
    """One input or output arg of an op, from ``op_signatures``."""

    name: str
    is_ref: bool = False
    number_attr: str | None = None  # a list of int(attrs[number_attr]) tensors
    type_list_attr: str | None = None  # a list typed by attrs[type_list_attr]
    type_attr: str | None = None
    fixed_type: int | None = None

    def size(self, attrs: dict) -> int:
        if self.number_attr is not None:
            return int(attrs.get(self.number_attr) or 0)
        if self.type_list_attr is not None:
            return len(attrs.get(self.type_list_attr) or ())
        return 1

    def dtypes(self, attrs: dict) -> list[int | None]:
        if self.type_list_attr is not None:
            return list(attrs.get(self.type_list_attr) or ())
        dtype = self.fixed_type if self.type_attr is None else attrs.get(self.type_attr)
        if dtype is not None and self.is_ref:
            dtype += dtypes.REF_OFFSET
        return [dtype] * self.size(attrs)


@dataclass(frozen=True)
class OpSignature:
    """An op's input and output args, in order: what a node's inputs and outputs are."""

    inputs: tuple[ArgSpec, ...]
    outputs: tuple[ArgSpec, ...]

    @functools.cached_property
    def fixed_inputs(self) -> int | None:
        """The number of inputs where no input arg is a list (None: the node's attrs say)."""
        if any(arg.number_attr or arg.type_list_attr for arg in self.inputs):
            return None
        return len(self.inputs)


def _parse_arg(text: str) -> ArgSpec:
    is_ref = text.startswith("&")
    text = text.lstrip("&")
    text, _, type_text = text.partition(":")
    name, _, type_list_attr = text.partition("+")
    name, _, number_attr = name.partition("*")
    return ArgSpec(
        name=name,
        is_ref=is_ref,
        number_attr=number_attr or None,
        type_list_attr=type_list_attr or None,
        type_attr=type_text if type_text and not type_text.startswith("=") else None,
        fixed_type=int(type_text[1:]) if type_text.startswith("=") else None,
    )


@functools.cache
def op_signature(op_type: str) -> OpSignature | None:
    """The input/output args of a TF op type, or None for an op TF does not define."""
    text = SIGNATURES.get(op_type)
    if text is None:
        return None
    inputs, _, outputs = text.partition("->")
    return OpSignature(
        tuple(_parse_arg(a) for a in inputs.split(",") if a),
        tuple(_parse_arg(a) for a in outputs.split(",") if a),
    )


def function_signature(fdef: function_pb2.FunctionDef) -> OpSignature:
    """A library function's args as an op signature (a call node's inputs and outputs)."""

    def spec(arg) -> ArgSpec:
        return ArgSpec(
            name=arg.name,
            number_attr=arg.number_attr or None,
            type_list_attr=arg.type_list_attr or None,
            type_attr=arg.type_attr or None,
            fixed_type=arg.type or None,
        )

    return OpSignature(
        tuple(spec(a) for a in fdef.signature.input_arg),
        tuple(spec(a) for a in fdef.signature.output_arg),
    )


def parse_input(text: str) -> tuple[str, int, bool]:
    """A NodeDef input string -> (op name, output index, is_control)."""
    if text.startswith("^"):
        return text[1:], -1, True
    name, sep, index = text.rpartition(":")
    if sep and index.isdigit():
        return name, int(index), False
    return text, 0, False
