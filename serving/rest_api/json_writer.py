"""JSON text as TF Serving writes it: rapidjson's PrettyWriter and protobuf's JSON printer.

TF Serving writes REST responses with ``rapidjson::PrettyWriter`` (4-space indent, "single line"
arrays for rows), its floats through ``WriteDecimal``, and status and metadata with protobuf's
JSON printer (1-space indent). These are those writers, so ``serving.rest_api.json_tensor`` reads as TF
Serving's own code:

- ``PrettyWriter``: rapidjson's state machine (where commas, newlines and indents go), with
  ``raw`` for values rendered in bulk (``nested``, ``decimal_tokens``, ``b64_object``).
- ``debug_string``: ``JsonValueToDebugString`` (single-line arrays, cut after 256 bytes), how
  error texts quote a JSON value.
- ``proto_json``: ``MessageToJsonString`` with ``add_whitespace`` and
  ``always_print_fields_with_no_presence``: fields in field-number order, map keys sorted.

Text is ``str``; raw bytes travel as surrogate escapes (see ``serving.rest_api.json_text``), so a body
is ``text.encode("utf-8", "surrogateescape")`` and rapidjson's unvalidated bytes come out.
"""

from __future__ import annotations

import json
import math
import re
import struct
from decimal import Decimal

import numpy as np
from google.protobuf import json_format

_DEBUG_STRING_LIMIT = 256  # json_tensor.cc's kMaxJsonDebugStringBytes

# ---------------------------------------------------------------------------------------------
# rapidjson's writing

_INDENT = 4
_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def quote(text: str) -> str:
    """A JSON string as rapidjson's Writer writes it (only '"', '\\' and controls escaped)."""
    return '"' + text.translate(_ESCAPES) + '"'


def quote_all(texts: list[str]) -> list[str]:
    """``quote`` of each text; in a few C calls where none holds what must be escaped."""
    joined = "\0".join(texts)
    if joined.count("\0") != len(texts) - 1 or _TO_ESCAPE.search(joined):
        return [quote(text) for text in texts]
    return ('"' + joined.replace("\0", '"\0"') + '"').split("\0") if texts else []


_TO_ESCAPE = re.compile(r'["\\\x01-\x1f]')  # what ``quote`` escapes, but NUL (counted apart)


def indent(level: int) -> str:
    return " " * (_INDENT * level)


class PrettyWriter:
    """``rapidjson::PrettyWriter``: the same calls put commas, newlines and indents where it
    does. ``single_line`` is ``kFormatSingleLineArray`` (array items on one line, ", " apart;
    object members still one per line). ``depth`` is the number of open containers, what the
    next value's indentation counts. Not thread-safe; one per response."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._levels: list[list] = []  # [in_array, value_count] per open container
        self.single_line = False

    @property
    def depth(self) -> int:
        return len(self._levels)

    def text(self) -> str:
        return "".join(self.parts)

    def _prefix(self) -> None:
        if not self._levels:
            return
        level = self._levels[-1]
        count = level[1]
        if level[0]:
            if count:
                self.parts.append(", " if self.single_line else ",")
            if not self.single_line:
                self.parts.append("\n" + indent(len(self._levels)))
        else:
            if count:
                self.parts.append(",\n" if count % 2 == 0 else ": ")
            else:
                self.parts.append("\n")
            if count % 2 == 0:
                self.parts.append(indent(len(self._levels)))
        level[1] = count + 1

    def raw(self, text: str) -> None:
        """A value already rendered (``RawValue``)."""
        self._prefix()
        self.parts.append(text)

    def string(self, text: str) -> None:
        self.raw(quote(text))

    key = string

    def start_object(self) -> None:
        self.raw("{")
        self._levels.append([False, 0])

    def end_object(self) -> None:
        if self._levels.pop()[1]:
            self.parts.append("\n" + indent(len(self._levels)))
        self.parts.append("}")

    def start_array(self) -> None:
        self.raw("[")
        self._levels.append([True, 0])

    def end_array(self) -> None:
        if self._levels.pop()[1] and not self.single_line:
            self.parts.append("\n" + indent(len(self._levels)))
        self.parts.append("]")


def b64_object(encoded: str, depth: int) -> str:
    """``{"b64": ...}`` as PrettyWriter writes it as a value with ``depth`` containers open."""
    return "{\n" + indent(depth + 1) + '"b64": "' + encoded + '"\n' + indent(depth) + "}"


def nested(tokens: list[str], shape: tuple[int, ...], depth: int, single_line: bool) -> str:
    """The rendered values (``tokens``, row-major) of an array of ``shape`` as PrettyWriter
    writes it with ``depth`` containers already open: one join per innermost list."""
    items = tokens
    for level in range(len(shape) - 1, -1, -1):
        size, count = shape[level], 1
        for d in shape[:level]:
            count *= d
        if single_line:
            items = ["[" + ", ".join(items[i * size : (i + 1) * size]) + "]" for i in range(count)]
        elif size:
            lead = "\n" + indent(depth + level + 1)
            close = "\n" + indent(depth + level) + "]"
            items = [
                "[" + ",".join(lead + t for t in items[i * size : (i + 1) * size]) + close
                for i in range(count)
            ]
        else:
            items = ["[]"] * count
    return items[0]


def nested_run(
    tokens: list[str], rows: int, inner: tuple[int, ...], depth: int, single_line: bool, row_sep: str
) -> str:
    """``row_sep.join`` of ``nested`` of each of ``rows`` arrays of shape ``inner`` (their
    ``tokens`` row-major), in one join: each separator between two values says how many lists
    close and open there (``run_layout``), so a large output costs no Python work per value
    (``nested`` per row took most of a 16 MB answer's time)."""
    per_row = math.prod(inner)
    if not inner or not per_row or len(tokens) != rows * per_row or rows < 2:
        return row_sep.join(
            nested(tokens[i * per_row : (i + 1) * per_row], inner, depth, single_line) for i in range(rows)
        )
    head, separators, which, tail = run_layout(len(tokens), inner, depth, single_line, row_sep)
    parts = np.empty(2 * len(tokens) - 1, object)
    parts[0::2] = tokens
    parts[1::2] = np.array(separators, object)[which[:-1]]
    return head + "".join(parts.tolist()) + tail


def run_layout(
    count: int, inner: tuple[int, ...], depth: int, single_line: bool, row_sep: str
) -> tuple[str, list[str], np.ndarray, str]:
    """How ``nested_run`` lays out ``count`` values of rows of shape ``inner`` (no empty
    dimension): the text before the first value, the separators, which one follows each value
    (set by numpy per level; "" after the last), and the text after the last value."""
    per_row, levels = math.prod(inner), len(inner)

    def lead(level: int) -> str:
        return "" if single_line else "\n" + indent(depth + level + 1)

    def opens(first: int) -> str:  # the lists of levels first.. opened
        return "".join("[" + lead(level) for level in range(first, levels))

    def closes(first: int) -> str:  # the lists of levels first.. closed, innermost first
        if single_line:
            return "]" * (levels - first)
        return "".join("\n" + indent(depth + level) + "]" for level in range(levels - 1, first - 1, -1))

    comma = ", " if single_line else ","
    separators = [comma + lead(levels - 1)]  # between two values of an innermost list
    which = np.zeros(count, np.intp)
    stride = 1
    for level in range(levels - 1, 0, -1):  # a list of this level ends every ``stride`` values
        stride *= inner[level]
        separators.append(closes(level) + comma + lead(level - 1) + opens(level))
        which[stride - 1 :: stride] = len(separators) - 1
    separators.append(closes(0) + row_sep + opens(0))
    which[per_row - 1 :: per_row] = len(separators) - 1
    separators.append("")
    which[-1] = len(separators) - 1
    return opens(0), separators, which, closes(0)


def decimal_tokens(values: np.ndarray) -> list[str]:
    """``WriteDecimal`` of every value of a float32 or float64 array, row-major: six significant
    digits (``%g``) where they read back as the same value, else ``max_digits10`` (9, 17); ".0"
    after a whole number not in exponent form; NaN, Infinity, -Infinity."""
    flat = values.reshape(-1)
    is32 = flat.dtype == np.float32
    numbers = flat.tolist()
    if len(numbers) <= _FEW:
        return [_decimal_token(v, is32) for v in numbers]
    tokens = ("%.6g\n" * len(numbers) % tuple(numbers)).split("\n")  # (one C loop: f"{v:.6g}")
    tokens.pop()
    back = np.array(tokens, np.float64)
    if is32:
        back = _as_float32(back, tokens)
    finite = np.isfinite(flat)
    longer = np.flatnonzero((back != flat) & finite)
    if len(longer):  # most of a model's outputs: their max_digits10 forms, again in one loop
        form = "%.9g\n" if is32 else "%.17g\n"
        texts = (form * len(longer) % tuple(flat[longer].tolist())).split("\n")
        texts.pop()
        rewritten = np.array(tokens, object)
        rewritten[longer] = texts
        tokens = rewritten.tolist()
    if finite.all():
        return [t if "." in t or "e" in t else t + ".0" for t in tokens]
    return [_SPECIAL.get(t) or (t if "." in t or "e" in t else t + ".0") for t in tokens]


_FEW = 8  # up to this many values, one at a time beats numpy's per-call costs
_FLOAT32 = struct.Struct("f")


def _decimal_token(value: float, is32: bool) -> str:
    """``decimal_tokens`` of one value (a float32's exact value as a float when ``is32``)."""
    token = f"{value:.6g}"
    if value - value != 0:  # NaN or an infinity
        return _SPECIAL[token]
    back = float(token)
    if is32:
        rounded = _FLOAT32.unpack(_FLOAT32.pack(back))[0]
        if rounded == value and _float32_tie(back, value):  # the double sits between two floats
            rounded = float(_as_float32(np.float64([back]), [token])[0])
        back = rounded
    if back != value:
        token = format(value, ".9g" if is32 else ".17g")
    return token if "." in token or "e" in token else token + ".0"


def _float32_tie(back: float, value: float) -> bool:
    """Whether ``back`` lies exactly half a float32 step from the float32 ``value``."""
    if back == value or value == 0:
        return False
    mantissa, exponent = math.frexp(value)
    half_step = math.ldexp(1.0, max(exponent, -125) - 25)
    distance = abs(back - value)
    # Just below a power of two, the step down is half the step up.
    return distance == half_step or (
        abs(mantissa) == 0.5 and abs(back) < abs(value) and distance == half_step / 2
    )


_SPECIAL = {"nan": "NaN", "-nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _as_float32(parsed: np.ndarray, tokens: list[str]) -> np.ndarray:
    """Decimal texts (already read as float64) as float32, rounded once from the text as
    ``absl::SimpleAtof`` does: a float64 that fell exactly between two float32 values is
    settled by the text itself."""
    rounded = parsed.astype(np.float32)
    wide = rounded.astype(np.float64)
    other = np.nextafter(rounded, np.where(parsed > wide, np.float32(np.inf), np.float32(-np.inf)))
    ties = (parsed != wide) & np.isfinite(parsed) & (2 * parsed == wide + other.astype(np.float64))
    for i in np.flatnonzero(ties).tolist():
        exact, tie = Decimal(tokens[i]), Decimal(float(parsed[i]))
        if exact != tie:
            rounded[i] = max(rounded[i], other[i]) if exact > tie else min(rounded[i], other[i])
    return rounded


# ---------------------------------------------------------------------------------------------
# error texts


def debug_string(value) -> str:
    """``JsonValueToDebugString``: ``value`` written with single-line arrays, stopping at the
    first write once 256 bytes are out (so a big value ends mid-way, as TF Serving's does);
    a NaN or infinity ends it too (rapidjson's Writer refuses them)."""
    writer = PrettyWriter()
    writer.single_line = True
    size = [0]

    def fits() -> bool:
        size[0] = sum(len(p.encode("utf-8", "surrogateescape")) for p in writer.parts)
        return size[0] < _DEBUG_STRING_LIMIT

    stack = [(value, None)]
    while stack:
        item, kind = stack.pop()
        if not fits():
            break
        if kind == "end_object":
            writer.end_object()
        elif kind == "end_array":
            writer.end_array()
        elif kind == "key":
            writer.key(item)
        elif isinstance(item, dict):
            writer.start_object()
            stack.append((None, "end_object"))
            for name, member in reversed(list(item.items())):
                stack.append((member, None))
                stack.append((name, "key"))
        elif isinstance(item, list):
            writer.start_array()
            stack.append((None, "end_array"))
            stack.extend((member, None) for member in reversed(item))
        else:
            token = scalar_text(item)
            if token is None:
                break
            writer.raw(token)
    return writer.text()


def scalar_text(value) -> str | None:
    """A scalar as rapidjson's Writer writes what it parsed: integers as they are (past 64 bits
    rapidjson holds a double), doubles in its shortest form; None for NaN and infinities."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, int) and -(2**63) <= value < 2**64:
        return str(value)
    return double_text(float(value))


def double_text(value: float) -> str | None:
    """rapidjson's ``Writer::Double``: shortest digits, laid out by its ``Prettify`` (1e21 and up
    as "1e21", below 1e-6 as "1e-7", else positional with ".0" on whole numbers)."""
    if value != value or value in (float("inf"), float("-inf")):
        return None
    if value == 0:
        return "-0.0" if str(value)[0] == "-" else "0.0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    k = int(exponent or 0) - len(fraction)
    stripped = digits.rstrip("0")
    k += len(digits) - len(stripped)
    digits = stripped
    length, kk = len(digits), len(digits) + k
    if 0 <= k and kk <= 21:
        text = digits + "0" * k + ".0"
    elif 0 < kk <= 21:
        text = digits[:kk] + "." + digits[kk:]
    elif -6 < kk <= 0:
        text = "0." + "0" * -kk + digits
    elif length == 1:
        text = digits + "e" + str(kk - 1)
    else:
        text = digits[0] + "." + digits[1:] + "e" + str(kk - 1)
    return sign + text


# ---------------------------------------------------------------------------------------------
# protobuf's JSON printer


def proto_json(message, *, preserve_names: bool = False) -> str:
    """``MessageToJsonString`` with ``add_whitespace`` and ``always_print_fields_with_no_presence``
    (and ``preserve_proto_field_names`` if asked), as TF Serving prints status and metadata."""
    return pretty(proto_document(message, preserve_names=preserve_names)) + "\n"


def proto_document(message, *, preserve_names: bool = False) -> dict:
    """The JSON object ``proto_json`` prints, as a dict in its order."""
    document = json_format.MessageToDict(
        message,
        preserving_proto_field_name=preserve_names,
        always_print_fields_with_no_presence=True,
    )
    return _in_field_order(message.DESCRIPTOR, document, preserve_names)


def pretty(value, level: int = 0) -> str:
    """A JSON value laid out as protobuf's printer does (one space per level)."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent_proto(level + 1)
        members = ",\n".join(
            inner + quote_proto(str(k)) + ": " + pretty(v, level + 1) for k, v in value.items()
        )
        return "{\n" + members + "\n" + indent_proto(level) + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        inner = indent_proto(level + 1)
        return (
            "[\n" + ",\n".join(inner + pretty(v, level + 1) for v in value) + "\n" + indent_proto(level) + "]"
        )
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return json.dumps(value, ensure_ascii=False)


def indent_proto(level: int) -> str:
    return " " * level


def quote_proto(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _in_field_order(message_descriptor, document: dict, preserve_names: bool) -> dict:
    """``MessageToDict``'s dict with fields in field-number order (it puts defaults last) and
    map keys sorted, recursively; well-known types keep their own JSON form."""
    if message_descriptor.full_name.startswith("google.protobuf."):
        return document
    ordered = {}
    for field in sorted(message_descriptor.fields, key=lambda f: f.number):
        name = field.name if preserve_names else field.json_name
        if name not in document:
            continue
        value = document[name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            value = {k: _ordered_value(value_field, value[k], preserve_names) for k in sorted(value)}
        elif field.is_repeated:
            value = [_ordered_value(field, v, preserve_names) for v in value]
        else:
            value = _ordered_value(field, value, preserve_names)
        ordered[name] = value
    return ordered


def _ordered_value(field, value, preserve_names: bool):
    if field.message_type is not None and isinstance(value, dict):
        return _in_field_order(field.message_type, value, preserve_names)
    return value
