"""Converters for TF's logging ops: ``Assert`` as a guard of the cluster.

ONNX has no op that fails a run, and tf2onnx drops Asserts. Ours stays: its condition becomes a
guard (``Builder.guard``), so an input it rejects runs the cluster natively, where the native
``Assert`` raises TF's error with its message. Its data inputs are only that message: the
converter never reads them (``unread_from``), so string constants among them keep it convertible.
"""

from __future__ import annotations

from onnx import TensorProto

from runtime.onnx.converter import Builder, NotConvertible, TFNode, converter


@converter("Assert", num_outputs=None, unread_from=1)
def assert_(node: TFNode, b: Builder) -> list:
    condition = node.inputs[0]
    if b.elem_type(condition) != TensorProto.BOOL:
        raise NotConvertible("Assert of a condition that is not boolean")
    b.guard(condition)
    return []
