"""Variables: TF1 ref variables and resource variables against TF, and ResourceMgr semantics."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import Graph, Session, dtypes, errors
from tests.runtime.test_session import check_runs, make_graph


def test_variables_match_tensorflow():
    check_runs("variables")


def _handles() -> Graph:
    f = dtypes.DT_FLOAT
    return make_graph(
        ("a", "VarHandleOp", [], {"dtype": f, "shape": [], "shared_name": "shared"}),
        ("b", "VarHandleOp", [], {"dtype": f, "shape": [], "shared_name": "shared"}),
        ("c", "VarHandleOp", [], {"dtype": f, "shape": [], "shared_name": "shared", "container": "other"}),
        ("unnamed", "VarHandleOp", [], {"dtype": f, "shape": []}),
        ("value", "Const", [], {"value": np.array([1.0, 2.0], np.float32), "dtype": f}),
        ("set_a", "AssignVariableOp", ["a", "value"], {"dtype": f}),
        ("read_b", "ReadVariableOp", ["b"], {"dtype": f}),
        ("read_c", "ReadVariableOp", ["c"], {"dtype": f}),
        ("read_unnamed", "ReadVariableOp", ["unnamed"], {"dtype": f}),
        ("read_b_as_int", "ReadVariableOp", ["b"], {"dtype": dtypes.DT_INT32}),
        ("init_b", "VarIsInitializedOp", ["b"], {}),
        ("destroy_b", "DestroyResourceOp", ["b"], {"ignore_lookup_error": False}),
    )


def test_container_and_shared_name_select_the_variable():
    session = Session(graph=_handles())
    assert not session.run("init_b:0")
    session.run("set_a")
    assert session.run("read_b:0").tolist() == [1.0, 2.0]  # same shared_name, same container
    assert session.run("init_b:0")
    with pytest.raises(errors.FailedPreconditionError) as info:
        session.run("read_c:0")
    assert "Debug info: container=other, status error message=Resource other/shared/" in str(info.value)
    with pytest.raises(errors.FailedPreconditionError, match="^Could not find variable unnamed"):
        session.run("read_unnamed:0")  # an empty shared_name means the node's name
    with pytest.raises(errors.InvalidArgumentError, match="wrong dtype. Expected float got int32"):
        session.run("read_b_as_int:0")


def test_sessions_do_not_share_variables_and_destroy_removes_them():
    graph = _handles()
    first, second = Session(graph=graph), Session(graph=graph)
    first.run("set_a")
    assert first.run("init_b:0") and not second.run("init_b:0")
    first.run("destroy_b")
    assert not first.run("init_b:0")
    with pytest.raises(errors.NotFoundError, match="does not exist"):
        first.run("destroy_b")
    first.run("set_a")
    first.close()
    assert len(first.resources) == 0


def test_assign_checks_shapes_like_tf():
    f = dtypes.DT_FLOAT
    session = Session(
        graph=make_graph(
            ("v", "VariableV2", [], {"dtype": f, "shape": []}),
            ("two", "Const", [], {"value": np.zeros(2, np.float32), "dtype": f}),
            ("three", "Const", [], {"value": np.zeros(3, np.float32), "dtype": f}),
            ("set2", "Assign", ["v", "two"], {"T": f}),
            ("set3", "Assign", ["v", "three"], {"T": f}),
            ("set3_any", "Assign", ["v", "three"], {"T": f, "validate_shape": False}),
        )
    )
    session.run("set2")
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"^Assign requires shapes of both tensors to match. lhs shape= \[2\] rhs shape= \[3\]",
    ):
        session.run("set3")
    assert session.run("set3_any:0").shape == (3,)


def test_resource_gather_bounds():
    f = dtypes.DT_FLOAT
    session = Session(
        graph=make_graph(
            ("v", "VarHandleOp", [], {"dtype": f, "shape": [], "shared_name": "v"}),
            ("value", "Const", [], {"value": np.arange(6, dtype=np.float32).reshape(3, 2), "dtype": f}),
            ("init", "AssignVariableOp", ["v", "value"], {"dtype": f}),
            ("idx", "Const", [], {"value": np.array([2, 5], np.int32), "dtype": dtypes.DT_INT32}),
            ("gather", "ResourceGather", ["v", "idx"], {"dtype": f, "Tindices": dtypes.DT_INT32}),
        )
    )
    session.run("init")
    with pytest.raises(errors.InvalidArgumentError, match=r"^indices\[1\] = 5 is not in \[0, 3\)"):
        session.run("gather:0")
