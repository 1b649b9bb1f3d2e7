"""GraphDefs made by TensorFlow for the runtime's Session tests, and the op signature table.

Runs inside the oracle venv named by ``VENV``. Two commands, both driven by the main venv::

    <oracle python> -m tests.oracle.builders.session_graphs graphs OUT_DIR
    <oracle python> -m tests.oracle.builders.session_graphs op-signatures > runtime/op_signatures.py

``graphs`` writes, per case, ``<case>.pb`` (a GraphDef or MetaGraphDef), ``<case>.json`` (what to
feed, what to fetch, what TF returned or raised) and ``<case>.<i>.pb`` TensorProtos of inputs and
outputs. ``tests/runtime/oracle_graphs.py`` runs it and reads the results without TensorFlow.
"""

from __future__ import annotations

import sys

import tensorflow as tf

VENV = "tf221"


def _arg_spec(arg) -> str:
    text = ("&" if arg.is_ref else "") + arg.name
    if arg.number_attr:
        text += "*" + arg.number_attr
    if arg.type_list_attr:
        return text + "+" + arg.type_list_attr
    return text + (f":{arg.type_attr}" if arg.type_attr else f":={arg.type}")


def op_signatures() -> str:
    """``runtime/op_signatures.py``: every registered TF op's input and output args."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    ops = op_def_pb2.OpList()
    ops.ParseFromString(bytes(c_api.TF_GetBuffer(c_api.TF_GetAllOpList())))
    lines = [
        '"""Input and output args of every TensorFlow op: generated, do not edit.',
        "",
        f"Made from TensorFlow {tf.__version__}'s op registry by",
        "``<oracle python> -m tests.oracle.builders.session_graphs op-signatures``.",
        "",
        "``SIGNATURES[op] = 'inputs->outputs'``, comma-separated args: ``name`` one tensor,",
        "``name*N`` a list whose length is int attr N, ``name+T`` a list whose length and types are",
        "those of type-list attr T; ``:T`` names the arg's type attr, ``:=1`` is a fixed DataType;",
        "a leading ``&`` marks a reference (TF1 ref variable) arg.",
        '"""',
        "",
        "SIGNATURES: dict[str, str] = {",
    ]
    for op in sorted(ops.op, key=lambda o: o.name):
        inputs = ",".join(_arg_spec(a) for a in op.input_arg)
        outputs = ",".join(_arg_spec(a) for a in op.output_arg)
        lines.append(f'    "{op.name}": "{inputs}->{outputs}",')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["op-signatures"]:
        sys.stdout.write(op_signatures())
        return 0
    raise SystemExit(f"usage: session_graphs {{graphs OUT_DIR | op-signatures}}, got {argv}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
