"""A Predict body's large arrays of numbers, read without a Python object per number at once.

orjson makes a float object per number: a 16 MB body of 4 million floats becomes some 130 MB
of objects, then copies of them on the way to a tensor (with 16 such bodies at once, over a
gigabyte). ``lift`` cuts each array of numbers of ``LIFT_BYTES`` or more out of the body where
the request's tensors sit ("instances", "inputs", or one of "inputs"' named values), parses
the rest with orjson as usual, and puts a ``Numbers`` in its place: its nesting read from its
brackets (checked to be a dense nest), its values read into one flat array by simdjson (at
its gigabytes a second, no Python object per number; where it is missing or declines, by
orjson a slice of ``CHUNK_BYTES`` at a time), with the JSON kinds they had, so that
``json_tensor._typed`` applies the general path's rules to them.

Fails safe: where anything is in doubt (a document this does not recognise, a ragged or empty
nest, a value that is not a strict JSON number, ints past 64 bits), ``lift`` returns None and
the body is read whole by the general path, with its result or its error; where the tensor's
dtype does not take the values, ``Numbers.parsed`` gives the general path the nested lists.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import orjson

try:
    import simdjson
except ImportError:  # the orjson slices read the same values, slower
    simdjson = None

LIFT_BYTES = 1 << 14  # an array this large is lifted out of the document (faster from ~16 KB)
MAX_DEPTH = 64  # deeper nests are the general path's (its errors; orjson's own depth limit)
CHUNK_BYTES = 1 << 18  # of an array's text, parsed at a time (~64k numbers: a few MB of objects)

INSTANCES, INPUTS, SIGNATURE = "instances", "inputs", "signature_name"

# A maximal run of what an array of numbers is made of, from an opening bracket.
_RUN = re.compile(rb"\[[-+.0-9eE,\[\] \t\n\r]*+")
_NOT_SKELETON = b"-+.0123456789eE \t\n\r"
_BRACKETS_AS_SPACES = bytes.maketrans(b"[]", b"  ")
_COMMA, _CLOSE = ord(","), ord("]")


class Numbers:
    """A lifted array of numbers: its shape, its values flat (int64, uint64 or float64, each
    as read) and the JSON kinds they had (``{int}`` if all are integers, else with ``float``);
    ``parsed`` gives the array as the general path reads it (nested lists)."""

    __slots__ = ("_body", "_span", "kinds", "shape", "values")

    def __init__(self, body: bytes, span: tuple[int, int], shape, values, kinds) -> None:
        self._body, self._span = body, span
        self.shape, self.values, self.kinds = shape, values, kinds

    def parsed(self):
        start, end = self._span
        return orjson.loads(self._body[start:end])  # read in slices before: strict JSON


def read(body: bytes, start: int, end: int) -> Numbers | None:
    """``body[start:end]`` as ``Numbers`` if it is a dense nest of strict JSON numbers, else
    None. Beyond the result, it holds a copy of the text and one slice's objects at a time."""
    text = body[start:end]
    shape = dense_shape(text.translate(None, _NOT_SKELETON))
    if shape is None:
        return None
    count = math.prod(shape)
    # simdjson reads only valid JSON, where innermost lists without commas (``dense_shape``)
    # hold one number each if there are as many numbers as lists; orjson's slices see no lists.
    read_values = _simd_values(text, count)
    if read_values is None and (shape[-1] > 1 or _one_number_each(text)):
        read_values = _sliced_values(text, count)
    if read_values is None:
        return None
    return Numbers(body, (start, end), shape, *read_values)


def _simd_values(text: bytes, count: int) -> tuple[np.ndarray, set[type]] | None:
    """The numbers of a dense nest, flattened by simdjson (no Python object per number), with
    their kinds: floats if any has a fraction or an exponent, else ints (int64, else uint64).
    None if simdjson is not installed or does not read them (``_sliced_values`` then does)."""
    if simdjson is None:
        return None
    floats = any(mark in text for mark in (b".", b"e", b"E"))
    for of_type, dtype in (("d", np.float64),) if floats else (("i", np.int64), ("u", np.uint64)):
        try:
            values = np.frombuffer(simdjson.Parser().parse(text).as_buffer(of_type=of_type), dtype)
        except (ValueError, TypeError, RuntimeError):
            continue
        if len(values) == count:
            return values, {float} if floats else {int}
    return None


def _sliced_values(text: bytes, count: int) -> tuple[np.ndarray, set[type]] | None:
    """The numbers of a dense nest read by orjson a slice of ``CHUNK_BYTES`` at a time, with
    the JSON kinds they had; None if they are not all strict JSON numbers of 64 bits."""
    # Its brackets as spaces: "v,v , v,v", where a number outside the skeleton's places (next
    # to a bracket, on the outside) meets another with no comma between, which orjson refuses.
    flat = text.translate(_BRACKETS_AS_SPACES)
    kinds, out, filled, at = set(), None, 0, 0
    while at < len(flat):
        stop = flat.find(b",", at + CHUNK_BYTES)
        stop = len(flat) if stop < 0 else stop
        try:
            values = orjson.loads(b"[" + flat[at:stop] + b"]")
        except orjson.JSONDecodeError:
            return None
        part_kinds = set(map(type, values))
        part = _flat_array(values, part_kinds)
        if part is None or filled + len(part) > count:
            return None
        if out is None:
            out = np.empty(count, part.dtype)
        elif part.dtype != out.dtype:
            if float in kinds | part_kinds:  # ints and floats: all as doubles, as the general path
                out, part = out.astype(np.float64), part.astype(np.float64)
            elif min(int(out[:filled].min()), int(part.min())) >= 0:  # ints of int64 and uint64
                out, part = out.astype(np.uint64), part.astype(np.uint64)
            else:
                return None  # negative ints and ints past int64: no 64-bit type holds both
        out[filled : filled + len(part)] = part
        filled, kinds, at = filled + len(part), kinds | part_kinds, stop + 1
    if out is None or filled != count:
        return None
    return out, kinds


def _one_number_each(text: bytes) -> bool:
    """Whether each innermost list of a nest whose skeleton says they hold at most one number
    each (``dense_shape``) holds something: none is "[]" once whitespace is gone. A list then
    holds one number (two, with no comma between, are refused when read), and the count read
    equals the lists' only if no number stands outside them."""
    return b"[]" not in text.translate(None, b" \t\n\r")


def _flat_array(values: list, kinds: set[type]) -> np.ndarray | None:
    """One slice's numbers as an array that holds each as read (ints exactly, in 64 bits)."""
    if kinds == {int}:
        for dtype in (np.int64, np.uint64):
            try:
                return np.array(values, dtype)
            except OverflowError:
                continue
        return None
    if kinds == {float} or kinds == {int, float}:
        return np.array(values, np.float64)  # an int as a double, as the general path casts it
    return None


def dense_shape(skeleton: bytes) -> list[int] | None:
    """The shape of a nest of lists from its ``skeleton`` (its text without numbers and
    whitespace: brackets and commas) if it is that of a dense nest, else None. Innermost lists
    of one number ("[]" in the skeleton, as an empty list is) give an innermost size of 1:
    ``read`` checks that each holds its number (``_one_number_each``)."""
    depth = len(skeleton) - len(skeleton.lstrip(b"["))
    close = skeleton.find(b"]")
    if not 0 < depth <= MAX_DEPTH or close < depth or skeleton[depth:close].strip(b",") != b"":
        return None
    shape = [close - depth + 1]  # the first innermost list: its commas, plus one
    size = shape[0] + 1  # the length of its skeleton: "[", its commas, "]"
    marks = np.frombuffer(skeleton, np.uint8)
    for level in range(depth - 2, -1, -1):  # the first list at each level, outwards
        after = marks[level + 1 + size :: size + 1]  # what follows each of its elements
        ends = np.flatnonzero(after != _COMMA)
        if not len(ends) or after[ends[0]] != _CLOSE:
            return None
        shape.insert(0, int(ends[0]) + 1)
        size = shape[0] * (size + 1) + 1
    if size != len(skeleton):
        return None
    expected = b"[" + b"," * (shape[-1] - 1) + b"]"
    for n in reversed(shape[:-1]):
        expected = b"[" + (expected + b",") * (n - 1) + expected + b"]"
    return shape if skeleton == expected else None


def lift(body: bytes) -> dict | None:
    """The document of a Predict body with its large arrays of numbers as ``Numbers``, or None
    where there are none or the document is not one this reads (the caller reads it whole)."""
    if len(body) < LIFT_BYTES:
        return None
    spans = []
    for run in _RUN.finditer(body):  # maximal runs: each byte is looked at once
        if run.end() - run.start() >= LIFT_BYTES:  # up to its last "]": checked by ``read``
            spans.append((run.start(), body.rfind(b"]", run.start(), run.end()) + 1))
    if not spans:
        return None
    nonce = os.urandom(8).hex()
    if nonce.encode() in body:
        return None
    pieces, last = [], 0
    for i, (start, end) in enumerate(spans):  # each array as a string naming it
        pieces += [body[last:start], b'"\\u0000%s-%d"' % (nonce.encode(), i)]
        last = end
    pieces.append(body[last:])
    try:
        doc = orjson.loads(b"".join(pieces))
    except orjson.JSONDecodeError:
        return None
    places = _places(doc, f"\x00{nonce}-")
    if places is None or sorted(i for _, _, i in places) != list(range(len(spans))):
        return None
    for table, key, i in places:
        numbers = read(body, *spans[i])
        if numbers is None:
            return None
        table[key] = numbers
    return doc


def _places(doc, marker: str) -> list[tuple[dict, str, int]] | None:
    """Where the named arrays sit among the places of a Predict request's tensors; None for a
    document of other keys, or one whose errors would quote it (the general path's)."""
    if type(doc) is not dict or not set(doc) <= {INSTANCES, INPUTS, SIGNATURE}:
        return None
    if (INSTANCES in doc and INPUTS in doc) or type(doc.get(SIGNATURE, "")) is not str:
        return None
    tables = [(doc, key) for key in (INSTANCES, INPUTS) if key in doc]
    if type(doc.get(INPUTS)) is dict:
        tables += [(doc[INPUTS], key) for key in doc[INPUTS]]
    places = []
    for table, key in tables:
        value = table[key]
        if type(value) is str and value.startswith(marker) and value[len(marker) :].isdigit():
            places.append((table, key, int(value[len(marker) :])))
    return places
