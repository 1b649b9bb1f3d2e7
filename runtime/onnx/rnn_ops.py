"""Fused ONNX forms of whole recurrent loops: a Keras ``LSTM`` layer's While as one ONNX ``LSTM``.

A ``Loop`` runs its body's nodes one by one each step; onnxruntime's ``LSTM`` kernel runs the
whole sequence in one node, an order of magnitude faster on small cells. The recognizer matches
the cell Keras writes, exactly, and accounts for every op of the body::

    x_t = TensorListGetItem(seq, t)             seq invariant, t a counter from 0
    z = x_t @ W + h @ U (+ bias)                W, U, bias constants (frozen variables)
    i, f, g, o = Split(z, 4, axis=-1)
    c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h' = sigmoid(o) * tanh(c')
    TensorListSetItem(out, t or a constant, h')

with a trip count (``control_flow_ops.trip_count``) and no other carried value than counters. Any
other loop (another activation, a mask, peepholes...) is not matched and becomes a ``Loop``. The
ONNX ``LSTM`` runs the first ``steps`` rows of the sequence; Keras' gate order (i, f, g, o) is
ONNX's (i, o, f, c) after a permutation of the weights' columns.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from runtime.graph.graph import Operation, Tensor
from runtime.onnx.control_flow_ops import (
    WhileLoop,
    const_value,
    counter_start,
    fused_loop,
    needed,
    same,
    scan_to_list,
    source,
    trip_count,
)
from runtime.onnx.converter import Builder, Value

_ADDS = ("AddV2", "Add")
_PLUMBING = frozenset({"_Arg", "Const", "NoOp", "Identity", "Snapshot", "StopGradient"})


def _op(tensor: Tensor, *types: str) -> Operation | None:
    op = source(tensor).op
    return op if op.type in types else None


def _either(op: Operation, first, second):
    """(first(a), second(b)) for the two inputs of a commutative op in either order, or None."""
    for a, b in (op.inputs, op.inputs[::-1]):
        x, y = first(a), second(b)
        if x is not None and y is not None:
            return x, y
    return None


def _gate(tensor: Tensor, activation: str) -> tuple[Operation, int, Operation] | None:
    """(Split, output index, activation op) for ``activation(Split(...)[k])``."""
    act = _op(tensor, activation)
    if act is None:
        return None
    split = source(act.inputs[0])
    return (split.op, split.value_index, act) if split.op.type == "Split" else None


def _constant(tensor: Tensor) -> np.ndarray | None:
    op = source(tensor).op
    return const_value(op) if op.type == "Const" else None


def match_cell(h_new: Tensor) -> dict | None:
    """The parts of a Keras LSTM cell computing ``h_new`` (module docstring), or None."""
    out = _op(h_new, "Mul")
    found = out and _either(out, lambda t: _gate(t, "Sigmoid"), lambda t: _op(t, "Tanh"))
    if not found:
        return None
    (split, o_index, o_act), tanh_c = found
    c_new = source(tanh_c.inputs[0])
    add = _op(c_new, *_ADDS)
    forget = add and _either(add, lambda t: _op(t, "Mul"), lambda t: _op(t, "Mul"))
    if not forget:
        return None
    for keep, write in (forget, forget[::-1]):
        kept = _either(
            keep, lambda t: _gate(t, "Sigmoid"), lambda t: t if source(t).op.type == "_Arg" else None
        )
        written = _either(write, lambda t: _gate(t, "Sigmoid"), lambda t: _gate(t, "Tanh"))
        if kept and written:
            break
    else:
        return None
    (_, f_index, f_act), c_prev = kept
    (_, i_index, i_act), (_, g_index, g_act) = written
    if {s.name for s in (kept[0][0], written[0][0], written[1][0])} != {split.name}:
        return None
    if (i_index, f_index, g_index, o_index) != (0, 1, 2, 3) or split.attrs.get("num_split") != 4:
        return None
    cell = {"split": split, "c_prev": source(c_prev), "c_new": c_new, "h_new": source(h_new)}
    cell["ops"] = [out, tanh_c, add, *forget, split, o_act, f_act, i_act, g_act]
    return cell if _match_products(cell) else None


def _match_products(cell: dict) -> bool:
    """Fills in ``z = x_t @ W + h @ U (+ bias)`` below the Split; whether it matched."""
    split = cell["split"]
    axis = _constant(split.inputs[0])
    z = source(split.inputs[1])
    bias = None
    if z.op.type == "BiasAdd" and _constant(z.op.inputs[1]) is not None:
        cell["ops"].append(z.op)
        z, bias = source(z.op.inputs[0]), _constant(z.op.inputs[1])
    elif z.op.type in _ADDS:
        with_bias = _either(z.op, lambda t: _op(t, *_ADDS), _constant)
        if with_bias:
            cell["ops"].append(z.op)
            z, bias = with_bias[0].outputs[0], with_bias[1]
    products = (
        _either(z.op, lambda t: _op(t, "MatMul"), lambda t: _op(t, "MatMul")) if z.op.type in _ADDS else None
    )
    if axis is None or int(axis.reshape(())) not in (1, -1) or not products:
        return False
    for x_mm, h_mm in (products, products[::-1]):
        read = _op(x_mm.inputs[0], "TensorListGetItem")
        if read is not None and source(h_mm.inputs[0]).op.type == "_Arg":
            break
    else:
        return False
    if any(mm.attrs.get("transpose_a") or mm.attrs.get("transpose_b") for mm in (x_mm, h_mm)):
        return False
    kernel, recurrent = _constant(x_mm.inputs[1]), _constant(h_mm.inputs[1])
    if kernel is None or recurrent is None:
        return False
    cell["ops"] += [z.op, x_mm, h_mm, read]
    cell.update(kernel=kernel, recurrent=recurrent, bias=bias, h_prev=source(h_mm.inputs[0]))
    cell.update(seq=source(read.inputs[0]), index=source(read.inputs[1]))
    return True


def _var(loop: WhileLoop, arg: Tensor) -> int | None:
    return next((i for i, a in enumerate(loop.body.args) if same(a, arg)), None)


@fused_loop
def keras_lstm(loop: WhileLoop, b: Builder) -> list[str] | None:
    """The While of a Keras LSTM layer as one ONNX ``LSTM`` (module docstring), or None."""
    body, roles, inits = loop.body, loop.roles, loop.inits
    scans = [i for i, r in enumerate(roles) if r.kind == "scan"]
    if len(scans) != 1:
        return None
    writer = roles[scans[0]].writer
    cell = match_cell(writer.inputs[2])
    if cell is None:
        return None
    h, c = _var(loop, cell["h_prev"]), _var(loop, cell["c_prev"])
    seq, t = _var(loop, cell["seq"]), _var(loop, cell["index"])
    if None in (h, c, seq, t) or roles[seq].kind != "invariant" or h == c:
        return None
    if roles[h].kind != "carried" or roles[c].kind != "carried" or b.rank(inits[seq]) != 3:
        return None
    if not (same(source(body.rets[h]), cell["h_new"]) and same(source(body.rets[c]), cell["c_new"])):
        return None
    counters = {i: counter_start(body, inits, b, i) for i, r in enumerate(roles) if r.kind == "carried"}
    counters.pop(h), counters.pop(c)
    if counter_start(body, inits, b, t) != 0 or None in counters.values():
        return None
    if roles[scans[0]].index is None and not same(source(writer.inputs[1]), cell["index"]):
        return None
    allowed = {op.name for op in cell["ops"]} | {writer.name}
    allowed |= {source(body.rets[i]).op.name for i in counters}
    roots = [body.rets[i] for i, r in enumerate(roles) if r.kind == "carried"]
    if any(
        op.name not in allowed and op.type not in _PLUMBING
        for op in needed(body, roots + [writer.outputs[0]], ())
    ):
        return None
    if b.elem_type(inits[h]) != TensorProto.FLOAT:
        return None
    steps = trip_count(b, body, loop.cond, inits, roles)
    if steps is None:
        return None
    return _emit(b, loop, cell, steps, (h, c, seq, scans[0]), counters)


def _weights(cell: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """ONNX's W [1, 4H, D], R [1, 4H, H], B [1, 8H] from Keras' kernel, recurrent kernel, bias."""
    kernel, recurrent, bias = cell["kernel"], cell["recurrent"], cell["bias"]
    if kernel.ndim != 2 or recurrent.ndim != 2 or kernel.shape[1] % 4 or kernel.dtype != np.float32:
        return None
    units = kernel.shape[1] // 4
    if recurrent.shape != (units, 4 * units) or (bias is not None and bias.shape != (4 * units,)):
        return None
    order = np.concatenate([np.arange(k * units, (k + 1) * units) for k in (0, 3, 1, 2)])  # i o f c
    bias = np.zeros(4 * units, np.float32) if bias is None else bias.astype(np.float32)
    return (
        kernel[:, order].T[None],
        recurrent[:, order].T[None],
        np.concatenate([bias[order], np.zeros(4 * units, np.float32)])[None],
    )


def _emit(b: Builder, loop: WhileLoop, cell: dict, steps: str, slots, counters) -> list[str] | None:
    weights = _weights(cell)
    if weights is None:
        return None
    h, c, seq, scan = slots
    inits = loop.inits
    units = weights[1].shape[2]
    first = b.op(
        "Slice", [inits[seq], b.int64s([0]), b.op("Reshape", [steps, b.int64s([1])], rank=1)], rank=3
    )
    zero = b.int64s([0])
    h0, c0 = (b.op("Unsqueeze", [inits[k], zero], rank=3) for k in (h, c))
    w, r, bias = (b.const(x) for x in weights)
    ys = b.op("LSTM", [first, w, r, bias, "", h0, c0], outputs=3, rank=4, hidden_size=units)
    for name, rank in zip(ys, (4, 3, 3)):
        b.values[name] = Value(TensorProto.FLOAT, rank)
    every, h_last, c_last = (
        b.op("Squeeze", [y, b.int64s([axis])], rank=r) for y, axis, r in zip(ys, (1, 0, 0), (3, 2, 2))
    )
    results = dict.fromkeys(range(len(inits)))
    results.update(
        {h: h_last, c: c_last, scan: scan_to_list(b, every, loop.roles[scan].index, b.lists[inits[scan]])}
    )
    for k in counters:  # a counter ends where it started plus the number of steps
        results[k] = b.op("Add", [b.cast(steps, b.elem_type(inits[k])), inits[k]], rank=0)
    for k, role in enumerate(loop.roles):
        if role.kind == "invariant":
            results[k] = inits[k]
    return [results[k] for k in range(len(inits))]
