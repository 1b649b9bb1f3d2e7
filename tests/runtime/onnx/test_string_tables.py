"""A GatherV2 from a constant table of strings (class names picked by an ArgMax, as TF1 exports
label their predictions) runs in onnxruntime: its strings leave the cluster as bytes, equal to the
native kernels'. A table that is not UTF-8 text, and any string tensor not from such a table,
stays native: onnxruntime's strings are text."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import Graph, Session, dtypes, errors
from runtime.onnx import DelegationOptions, delegate, text_table
from tests.runtime.onnx.test_loops import const, node
from tests.runtime.onnx.test_partition import graph

F, I32, I64, S = dtypes.DT_FLOAT, dtypes.DT_INT32, dtypes.DT_INT64, dtypes.DT_STRING
NAMES = np.array([b"north", b"east", b"south", "w\u00e9st".encode()], object)


def labelled(table: np.ndarray = NAMES, index_of: str = "best") -> Graph:
    """scores = relu(x W); label = table[argmax(scores)] (``index_of`` "j": a fed index + 1)."""
    return graph(
        node("x", "Placeholder", dtype=F),
        node("i", "Placeholder", dtype=I64),
        const("one", 1, np.int64),
        node("j", "AddV2", "i", "one", T=I64),
        node("w", "Const", dtype=F, value=np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)),
        node("xw", "MatMul", "x", "w", T=F),
        node("scores", "Relu", "xw", T=F),
        const("axis", 1),
        node("best", "ArgMax", "scores", "axis", T=F, Tidx=I32, output_type=I64),
        node("table", "Const", dtype=S, value=table),
        const("zero", 0),
        node("label", "GatherV2", "table", index_of, "zero", Tparams=S, Tindices=I64, Taxis=I32),
    )


def _sessions(graph_fn, fetches, feeds):
    native = Session(graph=graph_fn())
    delegated = Session(graph=graph_fn())
    report = delegate(delegated, DelegationOptions(min_cluster_ops=1), [(list(feeds), fetches)])
    return native, delegated, report


@pytest.mark.parametrize("fetches", [["label:0", "scores:0"], ["scores:0", "label:0"]])
def test_strings_gathered_in_onnxruntime_are_the_native_bytes(fetches, monkeypatch):
    """In either fetch order, and on repeated runs (the plan's own call of the cluster, which
    asks onnxruntime for its outputs in fetch order, after the first): the table is taken at the
    positions output, never at another output (a failure there would fall back unseen)."""
    taken_at = []
    take = text_table.take

    def recording_take(table, positions, axis):
        taken_at.append(positions.dtype)
        return take(table, positions, axis)

    monkeypatch.setattr(text_table, "take", recording_take)
    x = np.float32([[1, 2, 3], [-3, 0.5, 2], [0, 0, 1]])
    native, delegated, report = _sessions(labelled, ["label:0", "scores:0"], {"x:0": x})
    assert [sorted(c.op_types) for c in report.clusters] == [["ArgMax", "GatherV2", "MatMul", "Relu"]]
    label = fetches.index("label:0")
    for batch in (x, x, x[:1], x[:1]):
        want = native.run(fetches, {"x:0": batch})
        got = delegated.run(fetches, {"x:0": batch})
        assert got[label].dtype == object and got[label].tolist() == want[label].tolist()
        assert all(type(v) is bytes for v in got[label].tolist())
        np.testing.assert_allclose(got[1 - label], want[1 - label], rtol=1e-6)
    assert not report.fallbacks
    assert len(taken_at) == 4 and set(taken_at) == {np.dtype(np.int64)}  # one per run


def test_a_fed_index_into_a_string_table_keeps_tfs_error():
    feeds = {"x:0": np.ones((2, 3), np.float32), "i:0": np.int64([2, -1])}
    native, delegated, report = _sessions(lambda: labelled(index_of="j"), ["label:0"], feeds)
    assert any("GatherV2" in c.op_types for c in report.clusters), report.summary()
    assert delegated.run("label:0", feeds).tolist() == [NAMES[3], NAMES[0]]
    for bad in ([3, 0], [-2, 0]):
        bad_feeds = dict(feeds, **{"i:0": np.int64(bad)})
        with pytest.raises(errors.InvalidArgumentError) as want:
            native.run("label:0", bad_feeds)
        with pytest.raises(errors.InvalidArgumentError) as got:
            delegated.run("label:0", bad_feeds)
        assert str(got.value) == str(want.value)


def test_a_table_of_bytes_that_are_not_text_stays_native():
    table = np.array([b"\xff\xfe", b"a", b"b", b"c"], object)
    x = np.float32([[1, 2, 3]])
    native, delegated, report = _sessions(lambda: labelled(table), ["label:0"], {"x:0": x})
    assert all("GatherV2" not in c.op_types for c in report.clusters), report.summary()
    assert delegated.run("label:0", {"x:0": x}).tolist() == native.run("label:0", {"x:0": x}).tolist()


def picked(axis: int) -> Graph:
    """label = TABLE2[..., i + 1 along ``axis``] for a fed i of any rank."""
    table = np.array([[b"a", b"bb", b"ccc"], [b"dd", "\u00e9".encode(), b""]], object)
    return graph(
        node("i", "Placeholder", dtype=I64),
        const("one", 1, np.int64),
        node("j", "AddV2", "i", "one", T=I64),
        node("table", "Const", dtype=S, value=table),
        const("axis", axis),
        node("label", "GatherV2", "table", "j", "axis", Tparams=S, Tindices=I64, Taxis=I32),
    )


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index", [0, [1, -1], [[0], [-1]]])
def test_any_axis_and_index_rank_gives_the_native_strings(axis, index):
    size = (2, 3)[axis]
    i = np.int64(index) % size - 1  # j = i + 1: in range
    native, delegated, report = _sessions(lambda: picked(axis), ["label:0"], {"i:0": i})
    assert any("GatherV2" in c.op_types for c in report.clusters), report.summary()
    want, got = native.run("label:0", {"i:0": i}), delegated.run("label:0", {"i:0": i})
    assert got.shape == want.shape and got.dtype == object and got.tolist() == want.tolist()
    assert not report.fallbacks
