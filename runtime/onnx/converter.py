"""The converter registry and the builder converters write ONNX into.

A converter is one function per TF op, registered by decorator, in the file named after the op's
TF family (``math_ops.py``, ``array_ops.py``, ``nn_ops.py``). It receives a ``TFNode`` (the TF
node with the ONNX names, ranks, dtypes and constant values of its inputs) and the ``Builder``,
adds ONNX nodes and initializers through the builder, and returns the ONNX value name of each TF
output (``None`` for an output it does not produce)::

    @converter("MatMul")
    def mat_mul(node: TFNode, b: Builder) -> list[str | None]:
        ...

A converter raises ``NotConvertible`` when this node, with these ranks and dtypes, has no exact
ONNX equivalent; the cluster then stays native. ``convert_subgraph`` turns a cluster's
self-contained GraphDef (``Placeholder`` inputs, ``Const`` nodes, the cluster's ops) into one
ONNX model for one signature of input ranks and dtypes; ``convert_cluster`` does the same but
holds large initializers out of the model, as arrays (``Converted``), so a weight is never
serialized into the model or copied by it.

Where TF's kernel would raise an error that ONNX would not (an index out of range, a failed
``Assert``), a converter adds a guard (``Builder.guard``): the model's last output then says
whether this run's outputs stand, and where they do not the cluster runs natively, so the error is
TF's. Arithmetic and reshapes of constants are done while converting (``Builder.op``), so values
computed from frozen variables stay constants to the converters after them.

Opset: one pinned default-domain opset, ``OPSET`` (21, which onnxruntime 1.20+ runs). Contrib
ops are not written by hand: onnxruntime's own graph optimizer (``ORT_ENABLE_ALL``) rewrites the
converted graph into its fused contrib kernels (Gelu, FusedMatMul, Gemm, attention) where the
pattern is exact, which is the only place that decision can be made safely.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from apis.tensorflow.core.framework import graph_pb2
from runtime import dtypes, tensor_util
from runtime.graph.graph import DecodedAttrs
from runtime.graph.op_def import parse_input
from runtime.onnx import channel_blocks, text_table
from runtime.onnx.interface import GUARD, Signature  # noqa: F401 - Signature: converters' callers

OPSET = 21
IR_VERSION = 10
# Initializers this big are held out of the model (``Converted.large``): copying a weight into a
# protobuf, serializing it and onnxruntime parsing it back held it three more times at a start.
LARGE_BYTES = 1 << 20

# TF dtypes a cluster may carry, by their ONNX element type.
ONNX_TYPES: dict[int, int] = {
    dtypes.DT_FLOAT: TensorProto.FLOAT,
    dtypes.DT_DOUBLE: TensorProto.DOUBLE,
    dtypes.DT_HALF: TensorProto.FLOAT16,
    dtypes.DT_INT32: TensorProto.INT32,
    dtypes.DT_INT64: TensorProto.INT64,
    dtypes.DT_INT8: TensorProto.INT8,
    dtypes.DT_UINT8: TensorProto.UINT8,
    dtypes.DT_BOOL: TensorProto.BOOL,
}
FLOAT_TYPES = frozenset({dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_HALF})


class NotConvertible(Exception):
    """This node, with these ranks and dtypes, has no exact ONNX form (the reason is the text)."""


@dataclass(frozen=True)
class ConverterDef:
    """A registered converter and what the partitioner checks before asking it to convert a node."""

    op_types: tuple[str, ...]
    fn: Callable
    num_outputs: int  # the TF outputs the converter produces, from index 0
    const_inputs: tuple[int, ...]  # inputs whose value must be known when converting (-1: the last)
    dtypes: frozenset[int] | None  # allowed dtypes of input 0 (None: any ONNX_TYPES)
    lists: bool = False  # may take or give DT_VARIANT TensorLists (dense tensors in ONNX, list_ops.py)
    check: Callable | None = None  # op -> why it cannot convert (None: it can), beyond this data
    unread_from: int | None = None  # inputs from here on are never converted (Assert's message data)
    strings: bool = False  # may read a constant string table and give strings (``converter``)


CONVERTERS: dict[str, ConverterDef] = {}


def converter(
    *op_types: str,
    num_outputs: int = 1,
    const_inputs: tuple[int, ...] = (),
    dtypes: Sequence[int] | None = None,
    lists: bool = False,
    check: Callable | None = None,
    unread_from: int | None = None,
    strings: bool = False,
) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the ONNX converter of each TF op type named.

    ``num_outputs=None``: every output. ``lists``: the op reads or writes TensorLists (the
    partitioner then lets DT_VARIANT tensors inside a cluster, never across its boundary).
    ``check(op)``: a static reason the op cannot convert, for conditions the data cannot say.
    ``unread_from``: inputs from this index on only matter to the native kernel (an ``Assert``'s
    message): the converter gets None for those without an ONNX value (a string ``Const``).
    ``strings``: the op may read strings from a ``Const`` of UTF-8 text and give strings, which
    leave the cluster as bytes (``text_table.py``); other string tensors stay native.
    """

    def register(fn: Callable) -> Callable:
        definition = ConverterDef(
            op_types,
            fn,
            num_outputs,
            const_inputs,
            frozenset(dtypes) if dtypes is not None else None,
            lists,
            check,
            unread_from,
            strings,
        )
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"Converter for op {op_type!r} registered twice")
            CONVERTERS[op_type] = definition
        return fn

    return register


def lookup(op_type: str) -> ConverterDef | None:
    return CONVERTERS.get(op_type)


@dataclass
class Value:
    """What the builder knows of one ONNX value."""

    elem_type: int
    rank: int | None
    const: np.ndarray | None = None


@dataclass
class ListInfo:
    """What the builder knows of a TensorList: its declared element shape as TF keeps it (-1 for
    an unknown dimension, None for an unknown rank), length (None: unknown) and whether an ONNX
    tensor holds it (a reserved list of partly unknown
    element shape has none until a loop writes it; see control_flow_ops.py)."""

    element_shape: tuple[int, ...] | None
    num_elements: int | None
    dense: bool
    length: str | None = None  # where num_elements is known only at run time: its 1-D int64 value


@dataclass
class Builder:
    """Accumulates one ONNX graph: nodes, initializers, and each value's type, rank and constant.

    A ``child`` builds a subgraph (a ``Loop`` body): it sees its parent's values, and its names
    and constants belong to the root graph, so names are unique across the model and weights are
    initializers onnxruntime can pre-pack.
    """

    nodes: list = field(default_factory=list)
    # Constants by name (root's); each becomes an initializer only if the model reads it, when
    # it is built: converters fold arithmetic into constants that later steps use up.
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    graph_inputs: list = field(default_factory=list)
    values: dict[str, Value] = field(default_factory=dict)
    library: Mapping = field(default_factory=dict)  # FunctionDefs by name (While bodies)
    lists: dict[str, ListInfo] = field(default_factory=dict)  # ONNX name -> TensorList facts
    margins: list[str] = field(default_factory=list)  # int64 scalars, < 0 where TF's kernels disagree
    # A margin that matters only where a value is computed -> that value (a model's outputs may
    # not need it; subgraphs keep every margin).
    margin_needs: dict[str, str] = field(default_factory=dict)
    non_negative: set[str] = field(default_factory=set)  # integer values known to be >= 0
    # An int64 value of positions into a table of text -> (table, axis): the output it becomes
    # takes the table's strings there (``text_table.py``).
    text_tables: dict[str, tuple] = field(default_factory=dict)
    # What shape values are (``shape_values.py``): a 1-D value's entries, each a number or the
    # product of dimensions start:end of an ONNX value, (value, start, end); a scalar's entry.
    dim_lists: dict[str, tuple] = field(default_factory=dict)
    dims: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    same_shape: dict[str, str] = field(default_factory=dict)  # value -> an earlier value of its shape
    nchw: dict[str, str] = field(default_factory=dict)  # NHWC value -> its NCHW twin (layout.py)
    # NCHW value -> (the value it zero-pads, [top, left, bottom, right]): a convolution reading it
    # pads itself instead (layout.py).
    zero_pads: dict[str, tuple[str, list[int]]] = field(default_factory=dict)
    # TF's static shape of a value (``_output_shapes``; None for an unknown dimension).
    tf_shapes: dict[str, tuple] = field(default_factory=dict)
    producers: dict[str, object] = field(default_factory=dict)  # value -> the node computing it
    large: dict[str, np.ndarray] = field(default_factory=dict)  # initializers held out (root's)
    parent: Builder | None = None
    checks_bounds: bool = True  # onnxruntime's kernels reject indices past the end (its CPU ones do)
    _count: int = 0

    def child(self) -> Builder:
        return Builder(
            values=ChainMap({}, self.values),
            library=self.library,
            lists=ChainMap({}, self.lists),
            dim_lists=ChainMap({}, self.dim_lists),
            dims=ChainMap({}, self.dims),
            same_shape=ChainMap({}, self.same_shape),
            nchw=ChainMap({}, self.nchw),
            zero_pads=ChainMap({}, self.zero_pads),
            tf_shapes=ChainMap({}, self.tf_shapes),
            producers=ChainMap({}, self.producers),
            parent=self,
        )

    def _root(self) -> Builder:
        return self if self.parent is None else self.parent._root()

    def fresh(self, hint: str) -> str:
        root = self._root()
        root._count += 1
        return f"{hint.replace(':', '_')}__{root._count}"

    def const(self, array, hint: str = "const") -> str:
        array = np.asarray(array)
        name = self.fresh(hint)
        root = self._root()
        if array.nbytes >= LARGE_BYTES and array.dtype.kind in "biuf":
            array = np.ascontiguousarray(array)  # (the array itself where it already is)
            root.large[name] = array
        root.initializers[name] = array
        elem = helper.np_dtype_to_tensor_dtype(array.dtype)
        self.values[name] = Value(elem, array.ndim, array)
        return name

    def int64s(self, values, hint: str = "ints") -> str:
        return self.const(np.asarray(values, dtype=np.int64), hint)

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        *,
        rank: int | None | str = "auto",
        elem_type: int | None = None,
        outputs: int = 1,
        domain: str = "",
        **attrs,
    ) -> str | list[str]:
        """Adds one node; its outputs' rank defaults to the largest input rank (broadcasting).
        Arithmetic on constants is done here instead (``_folded``): per-channel factors computed
        from variables stay visible as constants to later converters."""
        folded = _folded(self, op_type, inputs, attrs) if outputs == 1 and not domain else None
        if folded is not None:
            return self.const(folded, op_type.lower())
        names = [self.fresh(op_type) for _ in range(outputs)]
        node = helper.make_node(op_type, list(inputs), names, domain=domain or None, **attrs)
        self.nodes.append(node)
        self.producers.update(dict.fromkeys(names, node))
        known = [self.values[i] for i in inputs if i]
        if rank == "auto":
            ranks = [v.rank for v in known]
            rank = max(ranks) if ranks and None not in ranks else None
        elem = elem_type if elem_type is not None else (known[0].elem_type if known else TensorProto.FLOAT)
        for name in names:
            self.values[name] = Value(elem, rank)
        return names[0] if outputs == 1 else names

    def rank(self, name: str) -> int | None:
        return self.values[name].rank

    def guard(self, ok: str) -> None:
        """This run's outputs stand only where the boolean ``ok`` holds everywhere: elsewhere TF's
        kernels raise an error (a failed ``Assert``, an index out of range) or compute what ONNX
        does not, so the cluster runs that input natively. A guard known to hold adds nothing.
        Guards are int64 margins, all to be >= 0: the model's last output ``GUARD`` is their
        minimum (a loop body's are carried out of its ``Loop``)."""
        const = self.values[ok].const
        if const is not None and bool(np.all(const)):
            return
        flag = self.op("Cast", [ok], to=TensorProto.INT64, elem_type=TensorProto.INT64)
        if self.rank(ok) != 0:
            flag = self.op("ReduceMin", [flag], keepdims=0, rank=0)  # empty: INT64_MAX, it holds
        self.margins.append(self.op("Sub", [flag, self.int64s(1, "one")], rank=0))

    def guard_in_range(
        self, indices: str, size: str | int, gathered: bool = False, needed_by: str | None = None
    ) -> None:
        """Guards ``0 <= indices < size``: TF's CPU kernels raise on any other index, ONNX wraps
        negative ones. ``size``: a scalar value or a number. ``gathered``: a Gather reads at these
        indices, whose CPU kernel rejects those past the end with an error of its own (the run
        then goes native too), so only the lower bound needs a guard, unless the model is built
        for a device whose kernels do not check (``checks_bounds`` False). ``needed_by``: the
        guard matters only where this value is computed."""
        known = self.values[indices].const
        if known is not None and isinstance(size, int):
            self.guard(self.const(np.all((known >= 0) & (known < size))))
            return
        margins = []
        if indices not in self.non_negative:
            low = self.op("ReduceMin", [indices], keepdims=0, rank=0)  # empty: the type's max, it holds
            margins.append(self.cast(low, TensorProto.INT64))
        if not gathered or not self._root().checks_bounds:
            high = self.op("ReduceMax", [indices], keepdims=0, rank=0)  # empty: the type's min
            if isinstance(size, int):
                last = self.int64s(size - 1, "last")
            else:
                last = self.op("Sub", [self.cast(size, TensorProto.INT64), self.int64s(1, "one")], rank=0)
            margins.append(self.op("Sub", [last, self.cast(high, TensorProto.INT64)], rank=0))
        self.margins.extend(margins)
        if needed_by is not None:
            self.margin_needs.update(dict.fromkeys(margins, needed_by))

    def infer_rank(self, name: str) -> int | None:
        """``name``'s rank by ONNX shape inference over the graph so far (where tracking lost it)."""
        if self.parent is not None:
            return None  # a subgraph alone is no model to infer
        small = [numpy_helper.from_array(a, n) for n, a in self.initializers.items() if a.size <= 4096]
        big = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
            for n, a in self.initializers.items()
            if a.size > 4096
        ]
        probe = helper.make_tensor_value_info(name, self.values[name].elem_type, None)
        graph = helper.make_graph(self.nodes, "probe", self.graph_inputs + big, [probe], small)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        inferred = onnx.shape_inference.infer_shapes(model)
        for info in [*inferred.graph.value_info, *inferred.graph.output]:
            if info.name == name and info.type.tensor_type.HasField("shape"):
                self.values[name].rank = len(info.type.tensor_type.shape.dim)
                return self.values[name].rank
        return None

    def elem_type(self, name: str) -> int:
        return self.values[name].elem_type

    def cast(self, name: str, elem_type: int) -> str:
        if self.elem_type(name) == elem_type:
            return name
        const = self.values[name].const
        if const is not None and const.dtype.kind in "iub":  # shapes, axes: no Cast node per run
            target = helper.tensor_dtype_to_np_dtype(elem_type)
            if np.can_cast(const.dtype, target) or np.array_equal(const.astype(target), const):
                return self.const(const.astype(target), "cast")
        return self.op("Cast", [name], to=elem_type, elem_type=elem_type, rank=self.rank(name))


class TFNode:
    """A TF node as a converter sees it: attrs by TF's names, inputs as ONNX values."""

    def __init__(self, name: str, op_type: str, attrs: Mapping, inputs: list[str], builder: Builder):
        self.name = name
        self.type = op_type
        self.attrs = attrs
        self.inputs = inputs
        self._b = builder

    def attr(self, name: str, default=None):
        value = self.attrs.get(name)
        return default if value is None else value

    def rank(self, index: int) -> int:
        rank = self._b.rank(self.inputs[index])
        if rank is None:
            rank = self._b.infer_rank(self.inputs[index])
        if rank is None:
            raise NotConvertible(f"{self.type} needs the rank of input {index}")
        return rank

    def const(self, index: int) -> np.ndarray | None:
        return self._b.values[self.inputs[index]].const

    def static_shape(self, index: int) -> tuple | None:
        """TF's static shape of input ``index`` (None dims unknown), or None where unknown."""
        const = self.const(index)
        return const.shape if const is not None else self._b.tf_shapes.get(self.inputs[index])

    def const_required(self, index: int) -> np.ndarray:
        value = self.const(index)
        if value is None:
            raise NotConvertible(f"{self.type} input {index} is not a constant")
        return value

    def elem_type(self, index: int = 0) -> int:
        return self._b.elem_type(self.inputs[index])


def onnx_type(dtype: int) -> int:
    try:
        return ONNX_TYPES[dtypes.base_dtype(dtype)]
    except KeyError:
        raise NotConvertible(f"dtype {dtypes.name(dtype)} has no ONNX type here") from None


@dataclass(frozen=True)
class Converted:
    """A cluster's ONNX model and its initializers of ``LARGE_BYTES`` or more, held out of it:
    in the model they are external data of no file yet (``_held_out``), here arrays, the
    constants' own where a weight is used as it is (``large[name] is constants[placeholder]``),
    so onnxruntime can share it (``cluster.py``) and the cluster cache write it beside the model."""

    model: onnx.ModelProto
    large: dict[str, np.ndarray]


def convert_subgraph(
    graph_def: graph_pb2.GraphDef,
    input_names: Sequence[str],
    output_names: Sequence[str],
    signature: Signature,
    checks_bounds: bool = True,
    constants: Mapping[str, np.ndarray] | None = None,
    channel_block: int = 0,
) -> onnx.ModelProto:
    """``convert_cluster``'s model with every initializer in it: a model complete by itself."""
    converted = convert_cluster(
        graph_def, input_names, output_names, signature, checks_bounds, constants, channel_block
    )
    for tensor in converted.model.graph.initializer:
        if tensor.name in converted.large:
            tensor.CopyFrom(numpy_helper.from_array(converted.large[tensor.name], tensor.name))
    return converted.model


def convert_cluster(
    graph_def: graph_pb2.GraphDef,
    input_names: Sequence[str],
    output_names: Sequence[str],
    signature: Signature,
    checks_bounds: bool = True,
    constants: Mapping[str, np.ndarray] | None = None,
    channel_block: int = 0,
) -> Converted:
    """The ONNX model of a cluster's GraphDef for one input signature (NotConvertible if none).

    ``graph_def`` lists its nodes in a topological order; ``input_names`` are its Placeholder
    nodes, in the cluster's input order; ``output_names`` its output tensors (``node:i``).
    ``checks_bounds``: the model runs where Gather rejects indices past the end (the CPU).
    ``constants``: the values of its other Placeholders (weights read by name), initializers here.
    ``channel_block``: onnxruntime's NCHWc block on this CPU, which convolutions' widths are
    padded to (``channel_blocks.py``); 0: none.
    """
    constants = constants or {}
    b = Builder(
        library={f.signature.name: f for f in graph_def.library.function}, checks_bounds=checks_bounds
    )
    by_tensor: dict[str, str] = {}
    graph_inputs = []
    position = {name: i for i, name in enumerate(input_names)}
    for node in graph_def.node:
        if node.op == "Placeholder" and node.name in constants:
            by_tensor[f"{node.name}:0"] = b.const(constants[node.name], node.name)
            continue
        if node.op == "Placeholder":
            i = position[node.name]
            elem, rank = onnx_type(signature.dtypes[i]), signature.ranks[i]
            onnx_name = f"input_{i}"
            b.values[onnx_name] = Value(elem, rank)
            declared = signature.shapes[i] if signature.shapes else None
            dims = [None] * rank if declared is None else list(declared)  # (of this rank: it conformed)
            graph_inputs.append(helper.make_tensor_value_info(onnx_name, elem, dims))
            b.graph_inputs = graph_inputs
            by_tensor[f"{node.name}:0"] = onnx_name
            _record_shapes(b, node, [onnx_name])
            continue
        inputs = []
        for text in node.input:
            source, index, is_control = parse_input(text)
            if not is_control:
                inputs.append(by_tensor.get(f"{source}:{index}"))  # None: a Const ONNX cannot hold
        results = emit(b, node.name, node.op, node.attr, inputs)
        for i, onnx_name in enumerate(results):
            if onnx_name is not None:
                by_tensor[f"{node.name}:{i}"] = onnx_name
        _record_shapes(b, node, results)
    results = [by_tensor[t] for t in output_names]
    channel_blocks.align_channels(b, results, channel_block)
    model = _model(b, graph_inputs, results)
    kept = {t.name for t in model.graph.initializer}
    return Converted(model, {name: array for name, array in b.large.items() if name in kept})


def _held_out(name: str, array: np.ndarray) -> TensorProto:
    """An initializer's type and shape without its data: external data, of a file named after
    it until the cluster cache writes one (onnxruntime takes the data from memory until then)."""
    tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
    tensor.dims.extend(array.shape)
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", name
    return tensor


def _record_shapes(b: Builder, node, results: list[str | None]) -> None:
    """TF's static shapes of a node's outputs (``_output_shapes``, a placeholder's ``shape``)
    for the values giving them."""
    if "_output_shapes" in node.attr:
        protos = node.attr["_output_shapes"].list.shape
    elif node.op == "Placeholder" and "shape" in node.attr:
        protos = [node.attr["shape"].shape]
    else:
        return
    for onnx_name, proto in zip(results, protos):
        if onnx_name is not None and onnx_name not in b.tf_shapes:
            shape = tensor_util.shape_from_proto(proto)
            if shape is not None:
                b.tf_shapes[onnx_name] = shape


def emit(b: Builder, name: str, op_type: str, attr_protos: Mapping, inputs: list[str]) -> list[str | None]:
    """Converts one TF node (``Const`` included) whose inputs are the ONNX values ``inputs``;
    the ONNX value of each of its outputs (None: not produced). Attrs are decoded as read: a
    Const's tensor once, an unread ``_output_shapes`` never."""
    attrs = DecodedAttrs(attr_protos)
    if op_type == "Const":
        dtype = dtypes.base_dtype(attrs["dtype"])
        if dtype not in ONNX_TYPES and dtype != dtypes.DT_STRING:
            return [None]  # only an input no converter reads takes it (``unread_from``)
        value = tensor_util.make_ndarray(attr_protos["value"].tensor)
        if dtype == dtypes.DT_STRING:  # a table only a ``strings`` converter reads, as a value
            if not is_text(value):  # of the builder: onnxruntime never holds it (text_table.py)
                return [None]
            table = b.fresh(name)
            b.values[table] = Value(TensorProto.STRING, value.ndim, value)
            return [table]
        return [b.const(value, name)]
    definition = lookup(op_type)
    if definition is None:
        raise NotConvertible(f"no converter for {op_type}")
    read = inputs[: definition.unread_from] if definition.unread_from is not None else inputs
    if None in read:
        raise NotConvertible(f"{op_type} input {read.index(None)} has no ONNX value")
    results = definition.fn(TFNode(name, op_type, attrs, inputs, b), b)
    return [results] if isinstance(results, str) else list(results)


def _model(b: Builder, graph_inputs: list, results: list[str]) -> onnx.ModelProto:
    outputs = []
    producers = {value: node for node in b.nodes for value in node.output}
    renamed: dict[str, str] = {}
    for i, name in enumerate(results):
        # Every output gets its public name: the value a node computes is renamed (an Identity
        # read elsewhere too costs onnxruntime a copy per run); an input, an initializer or
        # another output gets an Identity.
        out = f"output_{i}"
        if name in producers and name not in renamed and name not in b.margins:
            _rename(b.nodes, name, out)
            renamed[name] = out
        else:
            b.nodes.append(helper.make_node("Identity", [renamed.get(name, name)], [out]))
        outputs.append(helper.make_tensor_value_info(out, b.values[name].elem_type, None))
    margins = b.margins
    if b.margin_needs:  # those whose value no output needs go
        computed = {value for node in _live(b.nodes, {o.name for o in outputs}) for value in node.output}
        needs = {m: renamed.get(value, value) for m, value in b.margin_needs.items()}
        margins = [m for m in margins if m not in needs or needs[m] in computed]
    if margins:  # one int64 scalar after the outputs: below 0, "run this input natively"
        b.nodes.append(helper.make_node("Min", margins, [GUARD]))
        outputs.append(helper.make_tensor_value_info(GUARD, TensorProto.INT64, []))
    live = _live(b.nodes, {o.name for o in outputs})
    del b.nodes[:]
    b.nodes.extend(live)
    read = {o.name for o in outputs}.union(*(n.input for n in live), *(_subgraph_reads(n) for n in live))
    initializers = [
        _held_out(name, array) if name in b.large else numpy_helper.from_array(array, name)
        for name, array in b.initializers.items()
        if name in read
    ]
    graph = helper.make_graph(b.nodes, "cluster", graph_inputs, outputs, initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="savedmodel-server"
    )
    model.ir_version = IR_VERSION
    text_table.record(
        model, {i: b.text_tables[name] for i, name in enumerate(results) if name in b.text_tables}
    )
    return model


def is_text(strings: np.ndarray) -> bool:
    """Whether every string is UTF-8 text (onnxruntime hands strings to Python as ``str``)."""
    try:
        for item in strings.reshape(-1).tolist():
            item.decode("utf-8")
    except (UnicodeDecodeError, AttributeError):
        return False
    return True


def _rename(nodes, old: str, new: str) -> None:
    """Renames the value ``old`` where nodes (and their subgraphs, nested) compute or read it."""
    for node in nodes:
        for field_ in (node.input, node.output):
            for i, value in enumerate(field_):
                if value == old:
                    field_[i] = new
        for attribute in node.attribute:
            for graph in [*attribute.graphs, *([attribute.g] if attribute.HasField("g") else [])]:
                _rename(graph.node, old, new)
                for info in graph.output:  # (a body may give an outer value as it is)
                    if info.name == old:
                        info.name = new


def _live(nodes: list, outputs: set[str]) -> list:
    """The nodes the outputs need (a converter may compute outputs nobody reads, such as a
    loss's backprop; onnxruntime would run them), subgraphs' reads of outer values included."""
    needed, kept = set(outputs), []
    for node in reversed(nodes):
        if needed.intersection(node.output):
            kept.append(node)
            needed.update(node.input)
            needed.update(_subgraph_reads(node))
    return kept[::-1]


def _subgraph_reads(node) -> set[str]:
    """Every value name a node's subgraphs (a ``Loop`` body, nested) read."""
    found: set[str] = set()
    for attribute in node.attribute:
        graphs = list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else [])
        for graph in graphs:
            for inner in graph.node:
                found.update(inner.input)
                found.update(_subgraph_reads(inner))
    return found


_ARITHMETIC = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal,
    "Neg": np.negative,
}
_FOLD_ELEMENTS = 1 << 16  # bigger results stay nodes: onnxruntime folds those itself


def _folded(b: Builder, op_type: str, inputs, attrs) -> np.ndarray | None:
    """The value of float arithmetic (IEEE float ops: numpy's result is onnxruntime's) or of a
    reshaping of constants, or None."""
    values = [b.values[name].const if name else None for name in inputs]
    if not inputs or any(v is None for v in values):
        return None
    if op_type in ("Reshape", "Squeeze", "Unsqueeze") and values[0].size <= _FOLD_ELEMENTS:
        return _reshaped(op_type, values, attrs)
    fn = _ARITHMETIC.get(op_type)
    if fn is None or attrs:
        return None
    if any(v is None or v.dtype.kind != "f" for v in values) or len({v.dtype for v in values}) != 1:
        return None
    try:
        if int(np.prod(np.broadcast_shapes(*[v.shape for v in values]))) > _FOLD_ELEMENTS:
            return None
    except ValueError:  # shapes that do not broadcast: onnxruntime says so, as before
        return None
    with np.errstate(all="ignore"):
        return np.asarray(fn(*values), dtype=values[0].dtype)


def _reshaped(op_type: str, values: list, attrs: dict) -> np.ndarray | None:
    x = values[0]
    if op_type == "Reshape":
        shape = [int(d) for d in values[1].reshape(-1)]
        if not attrs.get("allowzero", 0):
            shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
        try:
            return x.reshape(shape)
        except ValueError:
            return None  # onnxruntime says so at run time, as before
    axes = [int(a) for a in values[1].reshape(-1)] if len(values) > 1 else None
    try:
        if op_type == "Squeeze":
            return np.squeeze(x, axis=None if axes is None else tuple(axes))
        if axes is None:
            return None
        return np.expand_dims(x, tuple(a % (x.ndim + len(axes)) for a in axes))
    except ValueError:
        return None
