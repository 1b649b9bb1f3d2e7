"""The registry reads a kernel's keyword parameters off its code object: the same as
``inspect.signature`` says, on every shipped kernel and on the shapes a kernel may have."""

import functools
import inspect

import pytest

from runtime import kernels
from runtime.kernels.registry import _REQUIRED, _keyword_parameters


def _by_signature(fn):
    params = inspect.signature(fn).parameters.values()
    keywords = {
        p.name: (_REQUIRED if p.default is p.empty else p.default)
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    return keywords, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _wrapped(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def _shapes():
    def plain(x, y, *, a, b=2, ctx):
        pass

    def starred(x, *rest, a=None, **attrs):
        pass

    def positional_only(x, /, y=1, *, T=1):
        pass

    def none(x):
        pass

    def closure_default(x, *, value=[0]):  # noqa: B006 - a default that is not hashable
        return x

    return [plain, starred, positional_only, none, closure_default, _wrapped(plain)]


@pytest.mark.parametrize("fn", _shapes(), ids=lambda fn: fn.__name__)
def test_keyword_parameters_match_inspect_on_each_shape(fn):
    assert _keyword_parameters(fn) == _by_signature(fn)


def test_keyword_parameters_match_inspect_on_every_kernel():
    functions = {id(d.fn): d.fn for d in kernels.load_all().values()}
    assert len(functions) > 400
    for fn in functions.values():
        assert _keyword_parameters(fn) == _by_signature(fn), fn.__qualname__


def test_kernel_def_fields_follow_the_signature():
    definition = kernels.lookup("Unique")
    assert (
        definition.attr_defaults.get("out_idx")
        == inspect.signature(definition.fn).parameters["out_idx"].default
    )
    conv = kernels.lookup("Conv2D")
    assert {"strides", "padding"} <= conv.required_attrs
    assert "data_format" in conv.attr_names and "data_format" not in conv.required_attrs
    assert not conv.needs_context
