"""Channel counts padded to onnxruntime's NCHWc block, so its blocked kernels run the whole network.

On x86, onnxruntime's CPU provider (``ORT_ENABLE_ALL``) runs convolutions and pooling in a blocked
layout, NCHWc: channels in blocks of 8, or 16 with AVX-512. It does so only where a value's
channel count is a multiple of the block. A network whose widths are not (NASNetMobile's 44 and
88, EfficientNet's 40 and 112, MobileNetV2's 24) falls back layer by layer to plain NCHW kernels,
with a reorder at every border between the two. NASNetMobile at batch 32 runs 1.45x slower so.

So a convolution whose output width is not a multiple of the block gets zero filters up to the
next one (``padded_width``), and what reads its output learns where the real channels are
(``Layout``):
- a convolution, or a matmul after a reduction over H and W, reading it gets zero weights there;
- per-channel ops carry the layout on: bias, norm, activation, pooling, padding and cropping of
  H and W, residual adds, channel concatenations (which place their inputs' layouts side by side);
- any other reader, and a cluster output, gets the real channels back (a ``Gather``).

Padding channels hold finite values that every reader ignores, so outputs are the unpadded
model's to float rounding. (A non-finite activation could spread NaN through a padding channel;
the cluster's first-run validation would then keep it native.) Runs on the builder's nodes before
the model is made; a graph with subgraphs (a Loop's body reads outer values by name) is left as
it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from onnx import NodeProto, TensorProto, helper

# Ops computing each channel from the same channel alone, finite for finite inputs.
POINTWISE = frozenset(
    {"Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu", "Identity"}
)
POOLS = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
REDUCTIONS = frozenset({"ReduceMean", "ReduceMax", "ReduceSum"})
SUBGRAPH_OPS = frozenset({"Loop", "If", "Scan"})  # (ONNX's ops with graph attributes)
WORTH = 1.5  # a width is padded only where that adds at most half again: 44 -> 48, not 3 -> 16


class Builder(Protocol):
    """What this pass needs of ``converter.Builder`` (which calls it: no import back)."""

    nodes: list[NodeProto]
    values: Mapping  # name -> Value: its elem_type, rank and constant

    def fresh(self, hint: str) -> str: ...
    def const(self, array, hint: str = "const") -> str: ...
    def int64s(self, values, hint: str = "ints") -> str: ...


@dataclass(frozen=True)
class Layout:
    """Where a value's real channels are: ``real[i]`` is the position of channel i among the
    ``width`` channels along ``axis``; the others are padding."""

    real: np.ndarray
    width: int
    axis: int = 1

    def same(self, other: Layout) -> bool:
        return (self.width, self.axis) == (other.width, other.axis) and np.array_equal(self.real, other.real)


def padded_width(channels: int, block: int) -> int | None:
    """The width a convolution of ``channels`` outputs is padded to, or None (aligned, or not
    worth it)."""
    width = -(-channels // block) * block
    return width if width != channels and width <= WORTH * channels else None


def spread(array: np.ndarray, layout: Layout, axis: int, fill: float = 0) -> np.ndarray:
    """``array`` with its ``axis`` placed at ``layout``'s real positions, ``fill`` elsewhere."""
    shape = list(array.shape)
    shape[axis] = layout.width
    out = np.full(shape, fill, array.dtype)
    index = [slice(None)] * array.ndim
    index[axis] = layout.real
    out[tuple(index)] = array
    return out


def align_channels(b: Builder, outputs: list[str], block: int) -> None:
    """Rewrites ``b.nodes`` so every convolution writes a multiple of ``block`` channels where
    that is worth it; ``outputs`` (the model's) keep their real channels."""
    if block <= 1 or any(n.op_type in SUBGRAPH_OPS for n in b.nodes):
        return
    _Aligner(b, set(outputs), block).run()


class _Unhandled(Exception):
    """This node cannot take its inputs' layouts: it reads their real channels."""


class _Aligner:
    def __init__(self, b: Builder, outputs: set[str], block: int):
        self.b, self.outputs, self.block = b, outputs, block
        self.layouts: dict[str, Layout] = {}
        self.channels: dict[str, int] = {}  # unpadded NCHW values' channel counts, where known
        self.restored: dict[str, str] = {}
        # A zero padding made a convolution (``_as_depthwise_conv``) -> (its input, [top, left,
        # bottom, right], width): a crop after it can be one convolution of the input.
        self.pad_convs: dict[str, tuple[str, list[int], int]] = {}
        self.nodes: list[NodeProto] = []

    def run(self) -> None:
        for node in self.b.nodes:
            handler = _HANDLERS.get(node.op_type)
            inputs, layouts = list(node.input), [self.layouts.get(x) for x in node.input]
            try:
                if handler is None or len(node.output) != 1:
                    raise _Unhandled
                layout = handler(self, node, layouts)
            except _Unhandled:  # (a handler raises before it changes any attribute)
                node.input[:] = [self.restore(x) for x in inputs]
                layout = None
            self.nodes.append(node)
            if layout is not None:
                self.give(node, layout)
        self.b.nodes[:] = self.nodes

    def give(self, node: NodeProto, layout: Layout) -> None:
        out = node.output[0]
        if layout.width == len(layout.real) and np.array_equal(layout.real, np.arange(layout.width)):
            if layout.axis == 1:  # (no padding: an add moved its operands to an unpadded one)
                self.channels[out] = layout.width
            return
        if out not in self.outputs:
            self.layouts[out] = layout
            return
        padded = self.b.fresh(out)  # an output keeps its name and its real channels
        node.output[0] = padded
        self.b.values[padded] = self.b.values[out]
        indices = self.b.int64s(layout.real, "channels")
        self.nodes.append(helper.make_node("Gather", [padded, indices], [out], axis=layout.axis))

    def restore(self, x: str) -> str:
        layout = self.layouts.get(x)
        if layout is None:
            return x
        if x not in self.restored:
            self.restored[x] = self.b.fresh(f"{x}_channels")
            self.b.values[self.restored[x]] = self.b.values[x]
            indices = self.b.int64s(layout.real, "channels")
            self.nodes.append(helper.make_node("Gather", [x, indices], [self.restored[x]], axis=layout.axis))
        return self.restored[x]

    def relayout(self, x: str, layout: Layout, to: Layout) -> str:
        """``x`` (of ``layout``) with its channels where ``to`` has them: operands of one add
        can come from different concatenations (NASNet adds a pooled convolution to the
        concatenation of two narrower ones). Its padding takes any channel: it is ignored."""
        if layout.same(to):
            return x
        moved = self.b.fresh(f"{x}_moved")
        value = self.b.values[moved] = self.b.values[x]
        if to.axis == 1 and value.rank == 4 and value.elem_type == TensorProto.FLOAT:
            # A 1x1 convolution by a 0/1 matrix, which onnxruntime keeps blocked (a Gather
            # would reorder its input out of the blocked layout, and the add's other operand).
            weights = np.zeros((to.width, layout.width, 1, 1), np.float32)
            weights[to.real, layout.real] = 1
            node = helper.make_node("Conv", [x, self.b.const(weights, "permutation")], [moved])
        else:
            indices = np.zeros(to.width, np.int64)
            indices[to.real] = layout.real
            node = helper.make_node("Gather", [x, self.b.int64s(indices, "channels")], [moved], axis=to.axis)
        self.nodes.append(node)
        return moved

    def const(self, name: str) -> np.ndarray:
        value = self.b.values[name].const if name else None
        if value is None:
            raise _Unhandled
        return value

    def replace(self, node: NodeProto, index: int, array: np.ndarray) -> None:
        node.input[index] = self.b.const(array, "aligned")

    def rank(self, name: str) -> int:
        rank = self.b.values[name].rank
        if rank is None:
            raise _Unhandled
        return rank


def _attr(node: NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _set_attr(node: NodeProto, name: str, value) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute(name, value)])


def _conv(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    weights = al.const(node.input[1])
    source, group = layouts[0], _attr(node, "group", 1)
    if weights.ndim != 4 or (source is not None and source.axis != 1):
        raise _Unhandled
    bias = al.const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if group != 1 and weights.shape[1] > 1:
        return _grouped_conv(al, node, source, weights, bias, group)
    if group != 1:  # depthwise: one filter per channel, which follows its channel's place
        if source is None:
            al.channels[node.output[0]] = weights.shape[0]
            return None
        if group != len(source.real) or weights.shape[0] != group:
            raise _Unhandled
        al.replace(node, 1, spread(weights, source, 0))
        if bias is not None:
            al.replace(node, 2, spread(bias, source, 0))
        _set_attr(node, "group", source.width)
        return source
    if source is not None:
        if weights.shape[1] != len(source.real):
            raise _Unhandled
        weights = spread(weights, source, 1)
    channels = weights.shape[0]
    width = padded_width(channels, al.block)
    layout = Layout(np.arange(channels), width) if width else None
    if layout is not None:
        weights = spread(weights, layout, 0)
        if bias is not None:
            al.replace(node, 2, spread(bias, layout, 0))
    else:
        al.channels[node.output[0]] = channels
    if source is not None or layout is not None:
        al.replace(node, 1, weights)
    return layout


def _grouped_conv(
    al: _Aligner, node: NodeProto, source: Layout | None, weights, bias, group: int
) -> Layout | None:
    """A grouped convolution of groups narrower than the block (RegNet's of 8 channels), with
    neighbouring groups merged into groups of one block: onnxruntime has no blocked kernel for
    narrower groups, and its plain one is 4x slower on them than the blocked one on groups of
    twice the width (zero weights join the merged groups; padding channels are groups of zeros)."""
    channels, width = weights.shape[1], source.width if source is not None else al.channels.get(node.input[0])
    real = source.real if source is not None else np.arange(width or 0)
    outputs = weights.shape[0]
    merged = (
        width is not None
        and width % al.block == 0
        and al.block % channels == 0
        and al.block <= WORTH * 2 * channels  # (a merged group does block / channels times the work)
        and outputs == len(real) == group * channels
        and np.array_equal(real, np.arange(len(real)))
    )
    if not merged:
        if source is not None:
            raise _Unhandled
        al.channels[node.output[0]] = outputs
        return None
    kernel = np.zeros((width, al.block, *weights.shape[2:]), weights.dtype)
    out = np.arange(outputs)
    first = out // channels * channels - out // al.block * al.block  # its group's first input, in its block
    kernel[out[:, None], first[:, None] + np.arange(channels)] = weights
    layout = Layout(out, width)
    al.replace(node, 1, kernel)
    if bias is not None:
        al.replace(node, 2, spread(bias, layout, 0))
    _set_attr(node, "group", width // al.block)
    if width == outputs:
        al.channels[node.output[0]] = outputs
        return None
    return layout


def _batch_norm(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    source = layouts[0]
    if source is None:
        al.channels[node.output[0]] = al.channels.get(node.input[0])
        return None
    fills = {1: 1, 2: 0, 3: 0, 4: 1}  # scale, bias, mean, variance
    values = {index: al.const(node.input[index]) for index in fills}
    for index, value in values.items():
        al.replace(node, index, spread(value, source, 0, fills[index]))
    return source


def _per_channel(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    """A pointwise op or a pooling: the layout of its first input."""
    source = layouts[0]
    if any(layouts[1:]) or (source is not None and node.op_type in POOLS and source.axis != 1):
        raise _Unhandled
    if source is None:
        al.channels[node.output[0]] = al.channels.get(node.input[0])
    return source


def _pad(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    source = layouts[0]
    pads = al.const(node.input[1])
    rank = len(pads) // 2
    axis = source.axis if source is not None else 1
    if len(node.input) > 3 and node.input[3] or pads[axis] or pads[axis + rank]:
        raise _Unhandled  # (axes given, or the channels padded)
    width = source.width if source is not None else al.channels.get(node.input[0])
    if width is not None and width % al.block == 0:
        _as_depthwise_conv(al, node, pads, width)
    if source is None:
        al.channels[node.output[0]] = width
    return source


def _as_depthwise_conv(al: _Aligner, node: NodeProto, pads: np.ndarray, width: int) -> None:
    """A zero padding of H and W as a 1x1 depthwise convolution by 1 that pads: exact, and
    onnxruntime runs it blocked, where its Pad would reorder the value out and back (NASNet pads
    before the pooling of each reduction cell)."""
    x = node.input[0]
    value = al.const(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(())
    rank, elem = len(pads) // 2, al.b.values[x].elem_type
    if (
        rank != 4
        or (pads < 0).any()
        or pads[[0, 4]].any()
        or value.any()
        or _attr(node, "mode", b"constant") != b"constant"
    ):
        return
    if elem != TensorProto.FLOAT:
        return
    spatial = [int(p) for p in pads[[2, 3, 6, 7]]]
    _make_shift(al, node, x, width, spatial, (0, 0))
    al.pad_convs[node.output[0]] = (x, spatial, width)


def _make_shift(al: _Aligner, node: NodeProto, x: str, width: int, pads: list[int], crop: tuple) -> None:
    """``node`` made the depthwise convolution of ``x`` that pads H and W by ``pads`` and then
    crops ``crop`` rows and columns off their start: a kernel of one 1, at the crop's offset."""
    kernel = [c + 1 for c in crop]
    weights = np.zeros((width, 1, *kernel), np.float32)
    weights[:, :, -1, -1] = 1
    node.op_type = "Conv"
    node.input[:] = [x, al.b.const(weights, "shift")]
    del node.attribute[:]
    node.attribute.extend(
        [
            helper.make_attribute("group", width),
            helper.make_attribute("kernel_shape", kernel),
            helper.make_attribute("pads", pads),
        ]
    )


def _slice(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    source = layouts[0]
    if node.input[0] in al.pad_convs and _crop_of_padding(al, node):
        return source
    if any(layouts[1:]) or len(node.input) < 4 or not node.input[3]:
        raise _Unhandled
    axis = source.axis if source is not None else 1
    keeps = _keeps_every(al, node, axis, source.width if source is not None else 2**31 - 1)
    if source is None:
        al.channels[node.output[0]] = al.channels.get(node.input[0]) if keeps else None
        return None
    if not keeps:
        raise _Unhandled
    return source


def _keeps_every(al: _Aligner, node: NodeProto, axis: int, width: int) -> bool:
    """Whether a Slice keeps all ``width`` entries of ``axis``."""
    axes = [int(a) % al.rank(node.input[0]) for a in al.const(node.input[3])]
    if axis not in axes:
        return True
    at = axes.index(axis)
    step = al.const(node.input[4])[at] if len(node.input) > 4 and node.input[4] else 1
    return al.const(node.input[1])[at] == 0 and al.const(node.input[2])[at] >= width and step == 1


def _crop_of_padding(al: _Aligner, node: NodeProto) -> bool:
    """A crop of the start of H and W after a zero padding made a convolution (NASNet shifts
    a map by a pixel so: ZeroPadding2D then Cropping2D), made one convolution of the padding's
    input, which onnxruntime keeps blocked; False where the Slice is not such a crop."""
    x, (top, left, bottom, right), width = al.pad_convs[node.input[0]]
    if len(node.input) < 4 or not node.input[3]:
        return False
    starts, ends = al.const(node.input[1]), al.const(node.input[2])
    steps = al.const(node.input[4]) if len(node.input) > 4 and node.input[4] else np.ones_like(starts)
    crop = [0, 0]
    for axis, start, end, step in zip(al.const(node.input[3]), starts, ends, steps):
        axis = int(axis) % 4
        if step != 1 or end < 2**31 - 1 or start < 0 or (axis < 2 and start != 0):
            return False
        if axis >= 2:
            crop[axis - 2] = int(start)
    (h, w) = crop
    pads = [max(top - h, 0), max(left - w, 0), bottom, right]
    _make_shift(al, node, x, width, pads, (max(h - top, 0), max(w - left, 0)))
    al.channels[node.output[0]] = width
    return True


def _transpose(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    source = layouts[0]
    if source is None:
        return None
    perm = list(_attr(node, "perm"))
    return Layout(source.real, source.width, perm.index(source.axis))


def _elementwise(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    """Add, Sub, Mul, Div of values of channel layouts or of known channels, constant scalars
    and per-channel constants. The values are moved to one layout (``relayout``): the
    narrowest aligned one."""
    if not any(layouts):
        known = {al.channels.get(x) for x in node.input if al.b.values[x].const is None}
        al.channels[node.output[0]] = known.pop() if len(known) == 1 else None
        return None
    if node.op_type == "Div" and al.b.values[node.input[1]].const is None:
        raise _Unhandled  # (a padding channel may hold 0: never a divisor)
    operands = list(layouts)
    for index, name in enumerate(node.input):
        if operands[index] is None and al.b.values[name].const is None:
            channels = al.channels.get(name)
            if channels is None:
                raise _Unhandled
            operands[index] = Layout(np.arange(channels), channels)
    found = [layout for layout in operands if layout is not None]
    layout = min([f for f in found if f.width % al.block == 0] or found, key=lambda f: f.width)
    if any(other.axis != layout.axis or len(other.real) != len(layout.real) for other in found):
        raise _Unhandled
    rank = al.rank(node.input[operands.index(layout)])
    spread_values = {}
    for index, name in enumerate(node.input):
        value = None if operands[index] is not None else al.const(name)
        if value is None or value.size == 1:
            continue
        at = layout.axis - (rank - value.ndim)  # numpy broadcasting aligns trailing dimensions
        others = [d for i, d in enumerate(value.shape) if i != at]
        if at < 0 or value.shape[at] != len(layout.real) or any(d != 1 for d in others):
            raise _Unhandled
        spread_values[index] = spread(value, layout, at, 1 if node.op_type == "Div" else 0)
    for index, value in spread_values.items():
        al.replace(node, index, value)
    for index, name in enumerate(node.input):
        if operands[index] is not None:
            node.input[index] = al.relayout(name, operands[index], layout)
    return layout


def _concat(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    found = [layout for layout in layouts if layout is not None]
    axis = _attr(node, "axis") % al.rank(node.input[0])
    if not found:
        total = [al.channels.get(x) for x in node.input]
        al.channels[node.output[0]] = sum(total) if None not in total and axis == 1 else None
        return None
    if axis != found[0].axis:  # along another axis: one layout for all
        if len(found) != len(layouts) or not all(found[0].same(other) for other in found):
            raise _Unhandled
        return found[0]
    real, width = [], 0
    for name, layout in zip(node.input, layouts):
        if layout is None:
            channels = al.channels.get(name)
            if channels is None:
                raise _Unhandled
            layout = Layout(np.arange(channels), channels, axis)
        elif layout.axis != axis:
            raise _Unhandled
        real.append(layout.real + width)
        width += layout.width
    return Layout(np.concatenate(real), width, axis)


def _reduce(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    """A reduction over other axes than the channels' (a global pooling as ReduceMean)."""
    source = layouts[0]
    if source is None:
        return None
    rank = al.rank(node.input[0])
    axes = {int(a) % rank for a in al.const(node.input[1] if len(node.input) > 1 else "")}
    if source.axis in axes:
        raise _Unhandled
    if _attr(node, "keepdims", 1):
        return source
    return Layout(source.real, source.width, source.axis - sum(a < source.axis for a in axes))


def _mat_mul(al: _Aligner, node: NodeProto, layouts: list) -> Layout | None:
    """[N, C] @ [C, K] (Gemm: B maybe transposed): the weights' rows placed as the channels."""
    source = layouts[0]
    if source is None:
        return None
    if any(layouts[1:]) or al.rank(node.input[0]) != 2 or source.axis != 1 or _attr(node, "transA", 0):
        raise _Unhandled
    weights = al.const(node.input[1])
    if weights.ndim != 2:
        raise _Unhandled
    al.replace(node, 1, spread(weights, source, 1 if _attr(node, "transB", 0) else 0))
    return None


_HANDLERS = {
    "Conv": _conv,
    "BatchNormalization": _batch_norm,
    "Pad": _pad,
    "Slice": _slice,
    "Transpose": _transpose,
    "Concat": _concat,
    "MatMul": _mat_mul,
    "Gemm": _mat_mul,
    **dict.fromkeys(POINTWISE | POOLS, _per_channel),
    **dict.fromkeys(("Add", "Sub", "Mul", "Div"), _elementwise),
    **dict.fromkeys(REDUCTIONS, _reduce),
}
