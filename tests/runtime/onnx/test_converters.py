"""Every ONNX converter checked against the numpy kernel, on the op records and on cases of its own.

For each op record (``tests/runtime/op_records.py``, inputs and TF's NodeDef from the oracle
cache) whose op has a converter, the record's one-node graph runs natively (``runtime.Session``)
and as a converted ONNX model in onnxruntime; inputs the converter needs as constants become
``Const`` nodes. Outputs must match within the record's float tolerance (exactly for ints and
bools). A converter may decline a record (``NotConvertible``: the op then stays native), but every
converter must convert and pass at least one case; ``EXTRA_CASES`` covers ops the records lack,
and ``test_loops.py`` the loop and TensorList ops (``GRAPH_CHECKED``), which only whole graphs use
(``test_guards.py``: ``Assert``).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from apis.tensorflow.core.framework import graph_pb2, node_def_pb2
from runtime import Graph, Session, dtypes, tensor_util
from runtime.onnx import CONVERTERS, NotConvertible, convert_subgraph, reason
from runtime.onnx.converter import Signature
from tests.runtime import test_op_records as records_test
from tests.runtime.onnx.test_direct_plans import WHOLE_GRAPH_CHECKED
from tests.runtime.onnx.test_guards import GUARD_CHECKED
from tests.runtime.onnx.test_loops import GRAPH_CHECKED
from tests.runtime.onnx.test_raise_conds import IF_CHECKED
from tests.runtime.onnx.test_raise_frames import RAISED_CHECKED
from tests.runtime.op_records import RECORDS

CONVERTED: dict[str, list[str]] = {}  # op type -> names of cases that converted and matched


def _node(graph_def, name):
    return next(n for n in graph_def.node if n.name == name)


def _as_const(graph_def: graph_pb2.GraphDef, name: str, value: np.ndarray) -> None:
    node = _node(graph_def, name)
    dtype = node.attr["dtype"].type
    node.op = "Const"
    node.ClearField("attr")
    node.attr["dtype"].type = dtype
    node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value, dtype))


def check_one_node(graph_def: graph_pb2.GraphDef, feeds: dict[str, np.ndarray], op_name: str, tolerance):
    """Runs ``op_name`` natively and through its converter; returns "converted" or why not."""
    op_type = _node(graph_def, op_name).op
    definition = CONVERTERS[op_type]
    graph = Graph.from_graph_def(graph_def)
    op = graph.get_operation_by_name(op_name)
    if any(np.size(v) == 0 for v in feeds.values()):
        return "empty input: clusters run empty tensors natively"
    for index in definition.const_inputs:  # shape and axis inputs are constants in real graphs
        if -len(op.inputs) <= index < len(op.inputs) and op.inputs[index].op.type == "Placeholder":
            source = op.inputs[index].op.name
            _as_const(graph_def, source, feeds.pop(f"{source}:0"))
    graph = Graph.from_graph_def(graph_def)
    op = graph.get_operation_by_name(op_name)
    why = reason(op)
    if why is not None:  # partitioning keeps this node native
        return f"unsupported: {why}"
    produced = definition.num_outputs if definition.num_outputs is not None else len(op.outputs)
    fetches = [f"{op_name}:{i}" for i in range(min(produced, len(op.outputs)))]
    with Session(graph=graph) as session:
        native = session.run(fetches, feeds)
    names = list(feeds)
    placeholders = [n.split(":")[0] for n in names]
    values = [np.asarray(feeds[n]) for n in names]
    signature = Signature(tuple(dtypes.from_numpy(v.dtype) for v in values), tuple(v.ndim for v in values))
    ordered = graph_pb2.GraphDef()
    ordered.node.extend(n for n in graph_def.node if n.name != op_name)
    ordered.node.append(_node(graph_def, op_name))
    try:
        model = convert_subgraph(ordered, placeholders, fetches, signature)
    except NotConvertible as exc:
        return f"declined: {exc}"
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - no kernel for this dtype: the cluster would stay native
        if "Could not find an implementation" not in str(exc):
            raise
        return f"declined by onnxruntime: {exc}"
    ours = session.run(None, {f"input_{i}": v for i, v in enumerate(values)})
    for index, (a, b) in enumerate(zip(ours, native)):
        b = np.asarray(b)
        where = f"{op_name} output {index}"
        assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} != native {b.dtype}"
        assert a.shape == b.shape, f"{where}: shape {a.shape} != native {b.shape}"
        if b.dtype.kind == "f":
            rtol, atol = tolerance(b.dtype)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    return "converted"


def _record_tolerance(record):
    def tolerance(dtype):
        rtol, atol = records_test.TOLERANCES.get(np.dtype(dtype), (1e-5, 1e-6))
        rtol, atol = max(rtol, 1e-5), max(atol, 1e-5)  # onnxruntime sums in another order
        return (record.rtol or rtol, record.atol or atol)

    return tolerance


CONVERTIBLE_RECORDS = [r for r in RECORDS if r.op in CONVERTERS]
# Records where onnxruntime differs from TF and the converter still converts, with why that is
# acceptable: the first-run validation catches these inputs, and serving graphs do not meet them.
KNOWN_DIFFERENCES = {
    "Max.017": "NaN next to inf: onnxruntime's ReduceMax does not propagate NaN as TF does",
    "Min.017": "NaN next to inf: onnxruntime's ReduceMin does not propagate NaN as TF does",
    "Sum.020": "int32 overflow: onnxruntime's ReduceSum does not wrap as TF does",
    "Prod.010": "int32 overflow: onnxruntime's ReduceProd does not wrap as TF does",
    "Prod.020": "int32 overflow: onnxruntime's ReduceProd does not wrap as TF does",
    "Conv2D.005": "filter larger than the input (empty output): onnxruntime errors, the run falls back",
    "Conv2D.017": "filter larger than the input (empty output): onnxruntime errors, the run falls back",
    "Conv2D.014": "grouped convolution (input channels = 2 x filter's) of an unknown input depth:"
    " onnxruntime errors on the first run and the cluster falls back (test_grouped_conv_2d: known)",
    "Conv2D.021": "grouped convolution (one input channel per group, ConvNeXt's) of an unknown input"
    " depth: as Conv2D.014",
    **{
        f"MaxPool.{n:03d}": "NaN or -inf only in a window: onnxruntime's MaxPool gives NaN or -inf,"
        " TF's skips NaN and gives lowest()"
        for n in range(16, 21)
    },
}


@pytest.mark.parametrize("record", CONVERTIBLE_RECORDS, ids=lambda r: r.name)
def test_record_through_converter(record):
    entry = records_test.oracle()["records"].get(record.name)
    assert entry is not None, f"{record.name} has no TensorFlow result: {records_test.REBUILD}"
    if "error" in entry or "args" not in entry:
        return  # TF rejected these inputs: nothing to convert (the kernel tests check the error)
    folder = records_test.records_dir() / "records" / record.name
    graph_def = graph_pb2.GraphDef.FromString((folder / "graph.pb").read_bytes())
    count = sum(len(indices) for indices in entry["args"])
    feeds = {f"in_{i}:0": records_test.read_tensor(folder / f"in_{i}.pb") for i in range(count)}
    if record.name in KNOWN_DIFFERENCES:
        with pytest.raises(Exception):  # noqa: B017 - either onnxruntime's error or a mismatch
            check_one_node(graph_def, feeds, "op", _record_tolerance(record))
        return
    outcome = check_one_node(graph_def, feeds, "op", _record_tolerance(record))
    if outcome == "converted":
        CONVERTED.setdefault(record.op, []).append(record.name)


def _graph(op_type: str, inputs: list[np.ndarray], attrs: dict):
    graph_def = graph_pb2.GraphDef()
    feeds = {}
    node = node_def_pb2.NodeDef(name="op", op=op_type)
    for i, value in enumerate(inputs):
        value = np.asarray(value)
        source = graph_def.node.add(name=f"in_{i}", op="Placeholder")
        source.attr["dtype"].type = dtypes.from_numpy(value.dtype)
        feeds[f"in_{i}:0"] = value
        node.input.append(f"in_{i}")
    for key, value in attrs.items():
        if isinstance(value, bool):
            node.attr[key].b = value
        elif isinstance(value, int) and key in (
            "T",
            "DstT",
            "SrcT",
            "Tidx",
            "out_type",
            "output_type",
            "out_idx",
            "index_type",
            "Tk",
        ):
            node.attr[key].type = value
        elif isinstance(value, int):
            node.attr[key].i = value
        elif isinstance(value, float):
            node.attr[key].f = value
        elif isinstance(value, str):
            node.attr[key].s = value.encode()
        elif isinstance(value, list) and key == "T":
            node.attr[key].list.type.extend(value)
        elif isinstance(value, list) and all(isinstance(v, int) for v in value):
            node.attr[key].list.i.extend(value)
    graph_def.node.append(node)
    return graph_def, feeds


_R = np.random.default_rng(7)
F32 = dtypes.DT_FLOAT
X = _R.standard_normal((2, 3, 4)).astype(np.float32)
IMG = _R.standard_normal((2, 6, 6, 3)).astype(np.float32)
# Ops the op records do not cover (or cover only with inputs TF rejects): (op, inputs, attrs).
EXTRA_CASES = [
    ("Relu6", [X * 4], {"T": F32}),
    ("Identity", [X], {"T": F32}),
    ("IdentityN", [X, np.int32([1, 2])], {"T": [F32, dtypes.DT_INT32]}),
    ("Elu", [X], {"T": F32}),
    ("Selu", [X], {"T": F32}),
    ("Softsign", [X], {"T": F32}),
    ("Softplus", [X], {"T": F32}),
    ("LeakyRelu", [X], {"T": F32, "alpha": 0.1}),
    ("LogSoftmax", [X], {"T": F32}),
    ("Softmax", [X], {"T": F32}),
    ("Erfc", [X], {"T": F32}),
    ("Rsqrt", [np.abs(X) + 0.5], {"T": F32}),
    ("StopGradient", [X], {"T": F32}),
    ("Snapshot", [X], {"T": F32}),
    ("PreventGradient", [X], {"T": F32}),
    ("BiasAddV1", [X, np.arange(4, dtype=np.float32)], {"T": F32}),
    ("MaxPool", [IMG], {"T": F32, "ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}),
    ("AvgPool", [IMG], {"T": F32, "ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}),
    ("Range", [np.int32(1), np.int32(9), np.int32(2)], {"Tidx": dtypes.DT_INT32}),
    ("Inv", [np.abs(X) + 0.5], {"T": F32}),
    ("Div", [X, np.abs(X) + 1], {"T": F32}),
    ("FloorDiv", [X, np.abs(X) + 1], {"T": F32}),
    ("FloorMod", [np.arange(-6, 6, dtype=np.int32), np.int32(4)], {"T": dtypes.DT_INT32}),
    ("Sign", [X], {"T": F32}),
    ("BatchMatMul", [X, _R.standard_normal((2, 4, 5)).astype(np.float32)], {"T": F32}),
    ("BatchMatMulV3", [X, X], {"Ta": F32, "Tb": F32, "Tout": F32, "adj_y": True}),
    ("Size", [X], {"T": F32, "out_type": dtypes.DT_INT32}),
    ("ZerosLike", [X], {"T": F32}),
    ("OnesLike", [X], {"T": F32}),
    # Repeated rows, an empty segment (2) and 3-D data: embedding_lookup_sparse's combiners.
    *(
        (op, [X[0], np.int32([2, 0, 2, 1]), np.int32([0, 0, 1, 3])], {"T": F32, "Tidx": dtypes.DT_INT32})
        for op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN")
    ),
    ("SparseSegmentMean", [X, np.int64([1, 1, 0]), np.int64([0, 2, 2])], {"T": F32, "Tidx": dtypes.DT_INT64}),
    (
        "SparseSegmentSum",
        [np.int32([[1, 2], [3, 4]]), np.int32([1, 0, 1]), np.int32([0, 1, 1])],
        {"T": dtypes.DT_INT32},
    ),
    (
        "SparseSoftmaxCrossEntropyWithLogits",
        [X[0], np.int64([3, 0, 1, 3, 2])[: X.shape[1]]],
        {"T": F32, "Tlabels": dtypes.DT_INT64},
    ),
    ("Unique", [np.int64([5, -1, 5, 7, -1])], {"T": dtypes.DT_INT64, "out_idx": dtypes.DT_INT64}),
    # Ties (the 2s, the 0.5s) go to the lower index, as in TF.
    (
        "TopKV2",
        [np.float32([[0.5, 2, 2, -1], [0.5, 0.5, 3, 0.5]]), np.int32(3)],
        {"T": F32, "Tk": dtypes.DT_INT32, "index_type": dtypes.DT_INT32},
    ),
    (
        "TopKV2",
        [np.int64([4, 9, 9, 1, 9]), np.int32(2)],
        {"T": dtypes.DT_INT64, "Tk": dtypes.DT_INT32, "index_type": dtypes.DT_INT32},
    ),
]


@pytest.mark.parametrize("case", EXTRA_CASES, ids=lambda c: c[0])
def test_extra_case(case):
    op_type, inputs, attrs = case
    graph_def, feeds = _graph(op_type, inputs, attrs)
    outcome = check_one_node(graph_def, feeds, "op", lambda dtype: (1e-5, 1e-5))
    assert outcome == "converted", f"{op_type}: {outcome}"
    CONVERTED.setdefault(op_type, []).append(f"extra {op_type}")


@pytest.mark.parametrize(("depth", "filter_depth", "out_depth"), [(4, 2, 6), (4, 1, 8), (6, 3, 6)])
def test_grouped_conv_2d(depth, filter_depth, out_depth):
    """A Conv2D whose input is deeper than its filter is grouped (Keras' ``groups``; depthwise
    where the filter is one channel deep): the group count comes from the static input depth."""
    x = _R.standard_normal((2, 7, 7, depth)).astype(np.float32)
    w = _R.standard_normal((3, 3, filter_depth, out_depth)).astype(np.float32)
    attrs = {"T": F32, "strides": [1, 2, 2, 1], "padding": "SAME"}
    graph_def, feeds = _graph("Conv2D", [x, w], attrs)
    for node, value in zip(graph_def.node, (x, w)):
        node.attr["shape"].shape.dim.extend(_dims(value.shape))
    assert check_one_node(graph_def, feeds, "op", lambda dtype: (1e-5, 1e-4)) == "converted"


def _dims(shape):
    from apis.tensorflow.core.framework import tensor_shape_pb2

    return [tensor_shape_pb2.TensorShapeProto.Dim(size=size) for size in shape]


def test_every_converter_checked():
    """Runs last in this module: each registered converter converted and matched some case."""
    for record in CONVERTIBLE_RECORDS:
        if record.op not in CONVERTED:
            try:
                test_record_through_converter(record)
            except AssertionError:
                pass
    for case in EXTRA_CASES:
        if case[0] not in CONVERTED:
            test_extra_case(case)
    graph_checked = GRAPH_CHECKED | WHOLE_GRAPH_CHECKED | RAISED_CHECKED | GUARD_CHECKED | IF_CHECKED
    unchecked = sorted(op for op in CONVERTERS if op not in CONVERTED and op not in graph_checked)
    assert not unchecked, f"converters with no passing case: {unchecked}"
