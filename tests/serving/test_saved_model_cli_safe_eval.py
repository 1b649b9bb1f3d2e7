"""The ``--input_exprs`` evaluator: what it computes, and what it refuses before running anything."""

from __future__ import annotations

import numpy as np
import pytest

from serving.saved_model_cli.safe_eval import UnsafeExpression, evaluate

ALLOWED = [
    ("[[1.0], [2.0]]", [[1.0], [2.0]]),
    ("(1, -2, 3.5e-1)", (1, -2, 0.35)),
    ("{'a': [1, 2], 'b': b'x'}", {"a": [1, 2], "b": b"x"}),
    ("2**10 - 3 * 4 // 5 % 7", 2**10 - 3 * 4 // 5 % 7),
    ("np.ones((2, 3))", np.ones((2, 3))),
    ("numpy.zeros([2], dtype=np.int64)", np.zeros([2], np.int64)),
    ("np.full((2,), 7, 'int32')", np.full((2,), 7, "int32")),
    ("np.arange(6).reshape(2, 3).astype(np.float32)", np.arange(6).reshape(2, 3).astype(np.float32)),
    ("np.array([b'a', b'b'], dtype=object)", np.array([b"a", b"b"], dtype=object)),
    ("np.linspace(0, 1, 5)", np.linspace(0, 1, 5)),
    ("np.random.rand(2, 3).shape", (2, 3)),
    ("np.ones((2, 2)).T.shape", (2, 2)),
    ("[np.inf, -np.inf]", [np.inf, -np.inf]),
]


@pytest.mark.parametrize("text,want", ALLOWED, ids=repr)
def test_allowed(text, want):
    got = evaluate(text)
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want


REFUSED = [
    ("__import__('os')", "name '__import__' is not allowed"),
    ("open('/etc/passwd')", "name 'open' is not allowed"),
    ("os.system('id')", "name 'os' is not allowed"),
    ("np.load('x.npy')", "np.load() is not one of the allowed numpy constructors"),
    ("np.lib.format.read_array", "is not allowed as a value"),
    ("np.ones.__globals__", "is not allowed as a value"),
    ("np.ones(2).__class__", "attribute .__class__ is not allowed"),
    ("().__class__.__bases__", "attribute .__bases__ is not allowed"),
    ("object.__subclasses__()", "name 'object' is not allowed"),
    ("(lambda: 1)()", "calling lambda: 1 is not allowed"),
    ("[x for x in (1, 2)]", "ListComp is not allowed"),
    ("np.eye(3)[0]", "Subscript is not allowed"),
    ("np.eye(3)[0:1] if False else np.eye(2)", "IfExp is not allowed"),
    ("np.ones(*[3])", "* and ** arguments are not allowed"),
    ("np.ones(3, **{'dtype': 'f4'})", "* and ** arguments are not allowed"),
    ("np.ones(3).tofile('x')", "calling np.ones(3).tofile is not allowed"),
    ("np.array(1, dtype=type)", "name 'type' is not allowed"),
    ("np.random.seed(0)", "np.random.seed() is not one of the allowed numpy constructors"),
    ("np.ones((100000, 100000))", "np.ones() would make 10000000000 elements"),
    ("np.random.rand(100000, 100000)", "would make 10000000000 elements"),
    ("np.arange(10**12)", "np.arange() would make 1000000000000 elements"),
    ("9**9**9", "exponent 387420489 is too large"),
    ("[0] * 10**10", "the repeated sequence would have over"),
    ("'a' * 10**10", "the repeated sequence would have over"),
    ("1 +", "invalid syntax"),
    ("x := 1", "invalid syntax"),
]


@pytest.mark.parametrize("text,needle", REFUSED, ids=repr)
def test_refused(text, needle):
    with pytest.raises(UnsafeExpression) as info:
        evaluate(text)
    assert needle in str(info.value)
