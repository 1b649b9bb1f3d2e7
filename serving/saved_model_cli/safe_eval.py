"""A safe evaluator for ``--input_exprs``: Python literals, arithmetic and numpy's constructors.

TF's ``saved_model_cli`` documents ``np.ones((32, 32, 3))`` in ``--input_exprs`` but evaluates it
with ``ast.literal_eval`` (numpy calls fail) or, in older versions, ``eval`` (any text runs as
code). This evaluator walks the expression's syntax tree and allows only:

- literals: numbers, strings, bytes, True/False/None, tuples, lists, dicts, sets, and
  ``np.inf``/``np.nan``/``np.pi``;
- arithmetic on them (``+ - * / // % **`` and unary ``- +``), ``**`` with a small exponent;
- calls of ``np.<constructor>`` (``array``, ``zeros``, ``ones``, ``full``, ``arange``,
  ``linspace``, ``eye``, ``random.rand`` ...; ``numpy.`` works too), with positional and keyword
  arguments, numpy dtypes as values (``np.float32``, ``dtype='int64'``, ``dtype=object``), and a few array methods
  (``.astype``, ``.reshape``, ``.T`` ...).

Anything else -- a name, ``__import__``, an attribute outside that list, a lambda, a subscript, a
comprehension -- is an ``UnsafeExpression`` naming what was refused, before anything runs. Sizes
are bounded before allocating (``MAX_ELEMENTS``), so an expression cannot exhaust memory.
"""

from __future__ import annotations

import ast
import math
import operator

import numpy as np

MAX_ELEMENTS = 1 << 26  # elements of an array, or items of a repeated sequence
_MAX_EXPONENT = 4096

_CONSTRUCTORS = {
    name: getattr(np, name)
    for name in (
        "array", "asarray", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
        "arange", "linspace", "eye", "identity", "stack", "concatenate", "tile", "repeat", "reshape",
    )
}  # fmt: skip
_RANDOM = {
    name: getattr(np.random, name) for name in ("rand", "randn", "randint", "random", "uniform", "normal")
}
_DTYPES = {
    name: getattr(np, name)
    for name in (
        "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
        "uint32", "uint64", "bool_", "complex64", "complex128", "bytes_", "str_", "object_",
    )
}  # fmt: skip
_CONSTANTS = {"inf": np.inf, "nan": np.nan, "pi": np.pi, "e": np.e, "newaxis": None}
# Python's own types, as dtypes only (``dtype=object``): their attributes and calls stay refused.
_BUILTIN_TYPES = {t.__name__: t for t in (bool, int, float, complex, str, bytes, object)}
_METHODS = frozenset({"astype", "reshape", "transpose", "squeeze", "flatten", "copy", "tolist"})
_PROPERTIES = frozenset({"T", "shape", "ndim", "size", "dtype"})
_MODULES = ("np", "numpy")
_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_SHAPED = frozenset({"zeros", "ones", "full", "empty", "rand", "randn"})
_SIZE_POSITION = {"random": 0, "uniform": 2, "normal": 2, "randint": 2}  # where ``size`` goes


class UnsafeExpression(ValueError):
    """The expression uses something outside the allowed subset, or is too large."""


def evaluate(text: str):
    """The value of ``text``; UnsafeExpression (or SyntaxError as ValueError) otherwise."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise UnsafeExpression(f"invalid syntax: {e.msg}") from None
    return _Evaluator().visit(tree.body)


class _Evaluator(ast.NodeVisitor):
    """Evaluates the allowed node types; ``generic_visit`` refuses every other one."""

    def generic_visit(self, node: ast.AST):
        raise UnsafeExpression(f"{type(node).__name__} is not allowed ({_snippet(node)})")

    def visit_Constant(self, node: ast.Constant):
        if node.value is Ellipsis:
            raise UnsafeExpression("... is not allowed")
        return node.value

    def visit_Name(self, node: ast.Name):
        if node.id in _BUILTIN_TYPES:
            return _BUILTIN_TYPES[node.id]
        raise UnsafeExpression(f"name {node.id!r} is not allowed (only np./numpy. constructors)")

    def visit_Tuple(self, node: ast.Tuple):
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node: ast.List):
        return [self.visit(e) for e in node.elts]

    def visit_Set(self, node: ast.Set):
        return {self.visit(e) for e in node.elts}

    def visit_Dict(self, node: ast.Dict):
        if any(k is None for k in node.keys):
            raise UnsafeExpression("** in a dict is not allowed")
        return {self.visit(k): self.visit(v) for k, v in zip(node.keys, node.values)}

    def visit_UnaryOp(self, node: ast.UnaryOp):
        op = _UNARY.get(type(node.op))
        if op is None:
            raise UnsafeExpression(f"{type(node.op).__name__} is not allowed")
        return op(_number_or_array(self.visit(node.operand)))

    def visit_BinOp(self, node: ast.BinOp):
        op = _BINARY.get(type(node.op))
        if op is None:
            raise UnsafeExpression(f"operator {type(node.op).__name__} is not allowed")
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        if isinstance(node.op, ast.Mult):
            _check_repeat(left, right)
        return op(left, right)

    def visit_Attribute(self, node: ast.Attribute):
        if _module_path(node.value) is not None:
            path = _module_path(node)
            if path in _DTYPES or path in _CONSTANTS:
                return _DTYPES[path] if path in _DTYPES else _CONSTANTS[path]
            raise UnsafeExpression(f"np.{path} is not allowed as a value")
        if node.attr in _PROPERTIES:
            return getattr(_array(self.visit(node.value), node.attr), node.attr)
        raise UnsafeExpression(f"attribute .{node.attr} is not allowed")

    def visit_Call(self, node: ast.Call):
        args = [self.visit(a) for a in node.args if not isinstance(a, ast.Starred) or _refuse(a)]
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords if k.arg is not None or _refuse(k)}
        if "dtype" in kwargs:
            kwargs["dtype"] = _dtype(kwargs["dtype"])
        path = _module_path(node.func)
        if path is not None:
            function = _CONSTRUCTORS.get(path) or _RANDOM.get(path.removeprefix("random."))
            if function is None or ("." in path and not path.startswith("random.")):
                raise UnsafeExpression(f"np.{path}() is not one of the allowed numpy constructors")
            _check_size(path.rsplit(".", 1)[-1], args, kwargs)
            return function(*args, **kwargs)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS:
            target = _array(self.visit(node.func.value), node.func.attr)
            if node.func.attr == "astype" and args:
                args[0] = _dtype(args[0])
            return getattr(target, node.func.attr)(*args, **kwargs)
        raise UnsafeExpression(f"calling {_snippet(node.func)} is not allowed")


def _refuse(node: ast.AST):
    raise UnsafeExpression(f"* and ** arguments are not allowed ({_snippet(node)})")


def _module_path(node: ast.AST) -> str | None:
    """``np.random.rand`` -> ``random.rand`` (a path under numpy); None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in _MODULES:
        return ".".join(reversed(parts))
    if isinstance(node, ast.Name):
        raise UnsafeExpression(f"name {node.id!r} is not allowed (only np./numpy. constructors)")
    return None


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def _dtype(value):
    """A dtype argument: a numpy type from ``_DTYPES`` or a dtype name (never an arbitrary object)."""
    allowed = (*_DTYPES.values(), *_BUILTIN_TYPES.values())
    if isinstance(value, str) or (isinstance(value, type) and value in allowed):
        try:
            return np.dtype(value)
        except TypeError as e:
            raise UnsafeExpression(f"dtype {value!r}: {e}") from None
    if isinstance(value, np.dtype):
        return value
    raise UnsafeExpression(f"dtype {value!r} is not a numpy dtype")


def _array(value, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise UnsafeExpression(f".{what} is allowed on numpy arrays only")
    return value


def _number_or_array(value):
    if isinstance(value, (bool, int, float, complex, np.ndarray, np.generic)):
        return value
    raise UnsafeExpression(f"unary arithmetic on {type(value).__name__} is not allowed")


def _check_power(base, exponent) -> None:
    if isinstance(exponent, (int, float)) and abs(exponent) > _MAX_EXPONENT:
        raise UnsafeExpression(f"exponent {exponent} is too large (at most {_MAX_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and base.bit_length() * exponent > 1 << 16:
        raise UnsafeExpression("the power is too large")


def _check_repeat(left, right) -> None:
    for sequence, count in ((left, right), (right, left)):
        if isinstance(sequence, (str, bytes, list, tuple)) and isinstance(count, int):
            if len(sequence) * count > MAX_ELEMENTS:
                raise UnsafeExpression(f"the repeated sequence would have over {MAX_ELEMENTS} items")


def _check_size(name: str, args: list, kwargs: dict) -> None:
    """Refuses constructors whose result would exceed MAX_ELEMENTS, before allocating it."""
    count = None
    if name in _SHAPED:
        shape = kwargs.get("shape", args[0] if args else ()) if name not in ("rand", "randn") else args
        count = _product(shape)
    elif name in _SIZE_POSITION:
        position = _SIZE_POSITION[name]
        size = kwargs.get("size", args[position] if len(args) > position else None)
        count = 1 if size is None else _product(size)
    elif name == "arange" and args:
        start, stop, step = (
            (0, args[0], 1) if len(args) == 1 else (*args[:2], args[2] if len(args) > 2 else 1)
        )
        count = math.ceil((stop - start) / step) if step else 0
    elif name == "linspace":
        count = kwargs.get("num", args[2] if len(args) > 2 else 50)
    elif name in ("eye", "identity") and args:
        count = args[0] * (kwargs.get("M") or (args[1] if len(args) > 1 else args[0]))
    elif name in ("tile", "repeat") and len(args) > 1:
        count = np.size(args[0]) * _product(args[1])
    if count is not None and count > MAX_ELEMENTS:
        raise UnsafeExpression(f"np.{name}() would make {count} elements (at most {MAX_ELEMENTS})")


def _product(shape) -> int:
    if isinstance(shape, (int, np.integer)):
        return int(shape)
    if isinstance(shape, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in shape):
        return math.prod(int(d) for d in shape)
    raise UnsafeExpression(f"shape {shape!r} is not a tuple of ints")
