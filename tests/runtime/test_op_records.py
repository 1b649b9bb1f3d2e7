"""Every op record run through our numpy kernel and compared with what TensorFlow computed.

TensorFlow's side lives in the oracle cache (``python -m tests.oracle build``; see
``tests/oracle/builders/op_records.py``). Inputs are read back from the cache, attrs are decoded
from the NodeDef TF built (``runtime.attrs``, as the Session decodes them), and the kernel is
called through the registry. Integer, bool and string results must be equal; floats within the
record's tolerance (by default by dtype); where TF raised, the kernel must raise the same error
class with TF's message (``MESSAGE_DIFFERENCES`` lists the few that cannot match). Each record
runs a second time as its one-node GraphDef through ``runtime.Session``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow.core.framework import graph_pb2, tensor_pb2
from runtime import Graph, Session, dtypes, errors, kernels, tensor_util
from runtime.graph import attrs as attr_lib
from tests.oracle import cache_dir
from tests.runtime import op_records
from tests.runtime.op_records import RECORDS
from tests.runtime.test_kernels_math import PURE_FAMILIES

REBUILD = "run `python -m tests.oracle build --force --only op_records`"

# Default tolerances by output dtype: (rtol, atol).
TOLERANCES = {
    np.dtype(np.float64): (1e-10, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (2e-3, 1e-3),
    dtypes.as_numpy_dtype(dtypes.DT_BFLOAT16): (1e-2, 1e-2),
    np.dtype(np.complex64): (1e-5, 1e-6),
    np.dtype(np.complex128): (1e-10, 1e-12),
}

# Errors whose text cannot be TF's (every other error must match TF's message exactly).
MESSAGE_DIFFERENCES = {
    "OneHot.005": "TF rejects the graph in its shape function, naming the NodeDef",
    "EnsureShape.002": "TF names the fed tensor by its internal _arg name",
    "EnsureShape.003": "TF names the fed tensor by its internal _arg name",
    "Einsum.009": "numpy's einsum reports the mismatch in its own words",
}

# Graph-construction errors TF raises in Python: the kernel must reject the same input at run time.
BUILD_ERRORS = {"ValueError": errors.InvalidArgumentError, "TypeError": errors.InvalidArgumentError}


def records_dir() -> Path:
    return cache_dir() / "op_records"


@functools.cache
def _load_oracle() -> dict | str:
    """TF's results, or why there are none (cached either way: one read per session)."""
    path = records_dir() / "records.json"
    if not path.is_file():
        return f"no TensorFlow outputs for op records at {path}: {REBUILD}"
    data = json.loads(path.read_text())
    current = hashlib.sha256(Path(op_records.__file__).read_bytes()).hexdigest()
    if data.get("records_sha256") != current:
        return f"TensorFlow outputs in {path} are for another version of op_records.py: {REBUILD}"
    return data


def oracle() -> dict:
    data = _load_oracle()
    if isinstance(data, str):
        pytest.fail(data)
    return data


def read_tensor(path: Path) -> np.ndarray:
    proto = tensor_pb2.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return tensor_util.make_ndarray(proto)


def node_attrs(name: str, root: Path | None = None) -> dict:
    """The decoded attrs of a record's one-node graph, from ``root`` (default: the op records)."""
    graph = graph_pb2.GraphDef()
    graph.ParseFromString(((root or records_dir()) / "records" / name / "graph.pb").read_bytes())
    (node,) = [n for n in graph.node if n.name == "op"]
    return attr_lib.decode_attrs(node.attr)


def kernel_inputs(record, entry, root: Path | None = None) -> list:
    folder = (root or records_dir()) / "records" / record.name
    count = sum(len(v) if isinstance(v, list) else 1 for v in record.inputs)
    flat = [read_tensor(folder / f"in_{i}.pb") for i in range(count)]
    if "args" not in entry:  # TF rejected the graph: lay inputs out as the record does
        out, i = [], 0
        for value in record.inputs:
            n = len(value) if isinstance(value, list) else 1
            out.append(flat[i : i + n] if isinstance(value, list) else flat[i])
            i += n
        return out
    return [
        [flat[i] for i in indices] if is_list else flat[indices[0]]
        for indices, is_list in zip(entry["args"], entry["list_args"])
    ]


def run_kernel(record, entry):
    definition = kernels.lookup(record.op)
    assert definition is not None, f"no kernel registered for {record.op}"
    if "args" in entry:
        attrs = definition.select_attrs(node_attrs(record.name))
    else:
        attrs = definition.select_attrs({k: _attr_value(v) for k, v in record.attrs.items() if v is not None})
    if definition.needs_context:  # the few kernels that name their node in TF's texts
        attrs["ctx"] = NodeContext("op")
    with np.errstate(all="ignore"):  # as the Session runs every kernel
        result = definition.fn(*kernel_inputs(record, entry), **attrs)
    return result if isinstance(result, tuple) else (result,)


class NodeContext:
    """The part of the Session's OpContext the math kernels read: the node's name."""

    def __init__(self, name: str):
        self.name = name


def _attr_value(value):
    if isinstance(value, op_records.DType):
        return next(e for e in range(1, 24) if dtypes.is_supported(e) and dtypes.name(e) == value)
    return value


def assert_same(ours, theirs, record, index: int) -> None:
    where = f"{record.name} output {index}"
    ours = np.asarray(ours)
    assert ours.dtype == theirs.dtype, f"{where}: dtype {ours.dtype} != TF's {theirs.dtype}"
    assert ours.shape == theirs.shape, f"{where}: shape {ours.shape} != TF's {theirs.shape}"
    if theirs.dtype in TOLERANCES:
        rtol, atol = TOLERANCES[theirs.dtype]
        rtol = record.rtol if record.rtol is not None else rtol
        atol = record.atol if record.atol is not None else atol
        wide = np.complex128 if theirs.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(
            ours.astype(wide), theirs.astype(wide), rtol=rtol, atol=atol, equal_nan=True, err_msg=where
        )
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=where, strict=True)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_op_record(record) -> None:
    entry = oracle()["records"].get(record.name)
    if entry is None:
        pytest.fail(f"{record.name} has no TensorFlow result: {REBUILD}")
    error = entry.get("error")
    if error is not None:
        expected = BUILD_ERRORS.get(error["class"]) or getattr(errors, error["class"])
        with pytest.raises(errors.OpError) as raised:
            run_kernel(record, entry)
        assert type(raised.value) is expected, (
            f"{record.name}: raised {type(raised.value).__name__}({raised.value}), TF raised "
            f"{error['class']}({error['message']})"
        )
        if record.name not in MESSAGE_DIFFERENCES:
            assert str(raised.value) == error["message"], f"{record.name}: TF's message differs"
        return
    results = run_kernel(record, entry)
    folder = records_dir() / "records" / record.name
    assert len(results) == len(entry["outputs"]), (
        f"{record.name}: {len(results)} outputs, TF has {len(entry['outputs'])}"
    )
    for index, path in enumerate(entry["outputs"]):
        if record.compare is None or index in record.compare:
            assert_same(results[index], read_tensor(folder / path), record, index)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_op_record_through_session(record) -> None:
    """The same record as a one-node GraphDef run by ``runtime.Session``: attrs, dtypes and
    outputs as the interpreter sees them."""
    entry = oracle()["records"].get(record.name)
    if entry is None:
        pytest.fail(f"{record.name} has no TensorFlow result: {REBUILD}")
    if "args" not in entry:  # TF could not build the graph: there is no GraphDef to run
        assert entry["error"]["stage"] == "build"
        return
    graph_def = graph_pb2.GraphDef()
    graph_def.ParseFromString((records_dir() / "records" / record.name / "graph.pb").read_bytes())
    folder = records_dir() / "records" / record.name
    count = sum(len(indices) for indices in entry["args"])
    feeds = {f"in_{i}:0": read_tensor(folder / f"in_{i}.pb") for i in range(count)}
    outputs = entry.get("outputs")
    n_out = (
        len(outputs)
        if outputs is not None
        else Graph.from_graph_def(graph_def).get_operation_by_name("op").num_outputs
    )
    fetches = [f"op:{i}" for i in range(n_out)]
    with Session(graph=Graph.from_graph_def(graph_def)) as session:
        if "error" in entry:
            expected = getattr(errors, entry["error"]["class"])
            with pytest.raises(errors.OpError) as raised:
                session.run(fetches, feed_dict=feeds)
            assert type(raised.value) is expected, f"{record.name}: {raised.value!r} vs TF's {entry['error']}"
            return
        results = session.run(fetches, feed_dict=feeds)
    for index, path in enumerate(outputs):
        if record.compare is None or index in record.compare:
            assert_same(results[index], read_tensor(folder / path), record, index)


def test_records_cover_many_ops() -> None:
    ops = {r.op for r in RECORDS}
    assert len(RECORDS) >= 400 and len(ops) >= 150
    assert not ops - set(kernels.load_all()), (
        f"records for ops without a kernel: {sorted(ops - set(kernels.load_all()))}"
    )


# The dense-math families, and random_ops: every kernel of theirs has op records, but these
# (checked elsewhere).
RECORDED_FAMILIES = PURE_FAMILIES | {"random_ops"}
UNRECORDED = {
    "BatchNormWithGlobalNormalization": "TF 2 cannot build it; test_kernels_nn checks it against FusedBatchNormV3",
    "TopK": "TF 2 cannot build it; test_kernels_nn checks it against TopKV2",
    "RandomUniform": "stateful draws: test_kernels_math checks the law, not TF's bits",
    "RandomStandardNormal": "stateful draws: test_kernels_math checks the law, not TF's bits",
    "TruncatedNormal": "stateful draws: test_kernels_math checks the law, not TF's bits",
    "RandomUniformInt": "stateful draws: test_kernels_math checks the law, not TF's bits",
    "Multinomial": "stateful draws: test_kernels_math checks the law, not TF's bits",
}


def test_every_dense_math_kernel_has_records() -> None:
    registered = {
        op for op, k in kernels.load_all().items() if k.fn.__module__.rsplit(".", 1)[-1] in RECORDED_FAMILIES
    }
    missing = registered - {r.op for r in RECORDS} - set(UNRECORDED)
    assert not missing, f"kernels without op records: {sorted(missing)}"
