"""JSON text as TF Serving reads it: rapidjson's grammar and its error texts.

TF Serving's REST API parses request bodies with rapidjson (``kParseNanAndInfFlag |
kParseStopWhenDoneFlag``). ``loads`` reads what it reads, and refuses what it refuses with its
words ("JSON Parse error: Invalid value. at offset: 17"):

- orjson reads the common, strictly standard body (measured: 0.65 ms for 8 rows of 784 floats,
  130 kB, where the standard library takes 3.8 ms);
- what orjson refuses and rapidjson accepts (``NaN``, ``Inf``/``Infinity``, data after the
  document, bytes that are not UTF-8 inside strings) is read by the standard library (8 ms for
  that body with a NaN in it);
- what rapidjson refuses fails with its own message and offset, found by ``diagnose``, a scan
  that walks the text as rapidjson's iterative parser does (run only where a reader failed).

Integers past 64 bits are doubles, as in rapidjson. A duplicated key keeps its last value here
(rapidjson's lookups find the first). Strings are ``str``; bytes that are not UTF-8 travel as
surrogate escapes (``surrogateescape``), so ``text.encode("utf-8", "surrogateescape")`` gives
back the bytes sent. Writing is ``serving.rest_api.json_writer``.

Also here: JSON values as ``json_tensor.cc`` reads them, for both halves of the codec (type
names, b64 objects, "signature_name", its ``FormatError``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re

import orjson

from runtime import errors
from serving.rest_api import json_numbers, json_writer

_WS = b" \t\n\r"


# ---------------------------------------------------------------------------------------------
# reading


def loads(body: bytes, *, lift_numbers: bool = False):
    """The JSON document of a request body; InvalidArgumentError with rapidjson's text if it
    is not one. Strings may hold surrogate escapes of bytes that are not UTF-8. With
    ``lift_numbers`` (a Predict body), its large arrays of numbers may come as
    ``json_numbers.Numbers``."""
    if not body:
        raise errors.InvalidArgumentError(None, None, "JSON Parse error: The document is empty")
    if lift_numbers:
        doc = json_numbers.lift(body)
        if doc is not None:
            return doc
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return _loads_as_rapidjson(body)


def _loads_as_rapidjson(body: bytes):
    """What orjson refused: the document as rapidjson reads it, or rapidjson's error. Python's
    reader takes the rest; ``diagnose`` (a byte-at-a-time scan, so only where it must) finds
    rapidjson's error where Python's reader fails, and where the text holds what Python reads
    and rapidjson refuses: a number past a double's range, a lone surrogate escape."""
    if _SURROGATE_ESCAPE.search(body):
        _raise_if_refused(body)
    text = body.decode("utf-8", "surrogateescape")
    if _RAPIDJSON_NON_FINITE.search(body):
        text = _NON_FINITE.sub(_standard_non_finite, text)
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        return _DECODER.raw_decode(text, start)[0]
    except RecursionError:
        _raise_if_refused(body)
        raise errors.InvalidArgumentError(
            None, None, "JSON Parse error: The document is nested too deeply."
        ) from None
    except (ValueError, OverflowError) as e:
        _raise_if_refused(body)
        offset = getattr(e, "pos", 0)  # what rapidjson reads and Python does not (none known)
        raise errors.InvalidArgumentError(
            None, None, f"JSON Parse error: {_INVALID} at offset: {offset}"
        ) from None


def _raise_if_refused(body: bytes) -> None:
    problem = diagnose(body)
    if problem is not None:
        message, offset = problem
        raise errors.InvalidArgumentError(None, None, f"JSON Parse error: {message} at offset: {offset}")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0:  # past a double's range: rapidjson refuses the number
        raise OverflowError(text)
    return value


def _int_in_double_range(text: str) -> int:
    value = int(text)
    if len(text) > 300:
        float(value)  # OverflowError past a double's range, as rapidjson refuses it
    return value


_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_int=_int_in_double_range)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # rapidjson wants them paired; Python does not
_RAPIDJSON_NON_FINITE = re.compile(rb"Inf(?!inity)|-NaN")  # spellings Python's reader lacks
# A string literal (kept) or rapidjson's spellings of non-finite numbers that Python's reader
# lacks ("Inf", "-Inf", "-NaN"): rewritten to Python's ("Infinity", "-Infinity", "NaN").
_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:Infinity|Inf|NaN)')


def _standard_non_finite(match: re.Match) -> str:
    token = match.group()
    if token[0] == '"':
        return token
    sign = "-" if token[0] == "-" else ""
    return "NaN" if token.endswith("NaN") else sign + "Infinity"


_EMPTY = "The document is empty."
_INVALID = "Invalid value."
_MISS_NAME = "Missing a name for object member."
_MISS_COLON = "Missing a colon after a name of object member."
_MISS_COMMA_CURLY = "Missing a comma or '}' after an object member."
_MISS_COMMA_BRACKET = "Missing a comma or ']' after an array element."
_BAD_HEX = "Incorrect hex digit after \\u escape in string."
_BAD_SURROGATE = "The surrogate pair in string is invalid."
_BAD_ESCAPE = "Invalid escape character in string."
_MISS_QUOTE = "Missing a closing quotation mark in string."
_BAD_ENCODING = "Invalid encoding in string."
_TOO_BIG = "Number too big to be stored in double."
_MISS_FRACTION = "Miss fraction part in number."
_MISS_EXPONENT = "Miss exponent in number."


class _Refused(Exception):
    def __init__(self, message: str, offset: int):
        super().__init__(message, offset)
        self.message, self.offset = message, offset


def diagnose(data: bytes) -> tuple[str, int] | None:
    """rapidjson's (message, offset) for text its iterative parser refuses; None if it reads a
    whole document (anything after the document is ignored, as ``kParseStopWhenDoneFlag`` does).
    The end of input, or a NUL byte, ends the text."""
    end = data.find(b"\0")
    scanner = _Scanner(data, len(data) if end < 0 else end)
    try:
        scanner.document()
    except _Refused as refused:
        return refused.message, refused.offset
    return None


class _Scanner:
    """rapidjson's ``IterativeParse`` over bytes, keeping nothing: only where it would fail."""

    def __init__(self, data: bytes, end: int):
        self.data, self.end, self.pos = data, end, 0

    def peek(self) -> int:
        return self.data[self.pos] if self.pos < self.end else 0

    def skip_ws(self) -> int:
        while self.pos < self.end and self.data[self.pos] in _WS:
            self.pos += 1
        return self.peek()

    def document(self) -> None:
        if not self.skip_ws():
            raise _Refused(_EMPTY, self.pos)
        if self.peek() in b"]},:":  # no value can start here: rapidjson's start state fails
            raise _Refused(_EMPTY, self.pos)
        stack: list[str] = []  # "[" or "{" per open container
        self.value(stack)
        while stack:
            c = self.skip_ws()
            close, missing = (
                (ord("]"), _MISS_COMMA_BRACKET) if stack[-1] == "[" else (ord("}"), _MISS_COMMA_CURLY)
            )
            if c == close:
                self.pos += 1
                stack.pop()
            elif c == ord(","):
                self.pos += 1
                self.skip_ws()
                if stack[-1] == "{":
                    self.member_name()
                self.value(stack)
            else:
                raise _Refused(missing, self.pos)

    def member_name(self) -> None:
        if self.peek() != ord('"'):
            raise _Refused(_MISS_NAME, self.pos)
        self.string()
        if self.skip_ws() != ord(":"):
            raise _Refused(_MISS_COLON, self.pos)
        self.pos += 1
        self.skip_ws()

    def value(self, stack: list[str]) -> None:
        """One value at ``pos``. A container is opened (pushed) and its first member read, in
        a loop rather than by recursion: rapidjson's iterative parser reads any depth."""
        while self.peek() in (ord("["), ord("{")):
            c = self.peek()
            self.pos += 1
            if self.skip_ws() == (ord("]") if c == ord("[") else ord("}")):
                self.pos += 1
                return
            stack.append(chr(c))
            if c == ord("{"):
                self.member_name()
        c = self.peek()
        if c == ord('"'):
            return self.string()
        for word in (b"true", b"false", b"null"):
            if c == word[0]:
                return self.literal(word)
        self.number()

    def literal(self, word: bytes) -> None:
        for expected in word:
            if self.peek() != expected:
                raise _Refused(_INVALID, self.pos)
            self.pos += 1

    def string(self) -> None:
        self.pos += 1  # the opening quote
        data = self.data
        while True:
            c = self.peek()
            if c == ord('"'):
                self.pos += 1
                return
            if c == ord("\\"):
                self._escape()
            elif c == 0:
                raise _Refused(_MISS_QUOTE, self.pos)
            elif c < 0x20:
                raise _Refused(_BAD_ENCODING, self.pos)
            else:
                self.pos += 1
                while self.pos < self.end and data[self.pos] not in b'"\\' and data[self.pos] >= 0x20:
                    self.pos += 1

    def _escape(self) -> None:
        start = self.pos
        self.pos += 1
        e = self.peek()
        if e in b'"/\\bfnrt' and e:
            self.pos += 1
            return
        if e != ord("u"):
            raise _Refused(_BAD_ESCAPE, start)
        self.pos += 1
        codepoint = self._hex4(start)
        if 0xDC00 <= codepoint <= 0xDFFF:  # a low surrogate first
            raise _Refused(_BAD_SURROGATE, start)
        if 0xD800 <= codepoint <= 0xDBFF:
            if self.peek() != ord("\\") or self.data[self.pos + 1 : self.pos + 2] != b"u":
                raise _Refused(_BAD_SURROGATE, start)
            self.pos += 2
            if not 0xDC00 <= self._hex4(start) <= 0xDFFF:
                raise _Refused(_BAD_SURROGATE, start)

    def _hex4(self, start: int) -> int:
        digits = self.data[self.pos : min(self.pos + 4, self.end)]
        if len(digits) < 4 or not all(chr(d) in "0123456789abcdefABCDEF" for d in digits):
            raise _Refused(_BAD_HEX, start)
        self.pos += 4
        return int(digits, 16)

    def number(self) -> None:
        start = self.pos
        if self.peek() == ord("-"):
            self.pos += 1
        c = self.peek()
        if c in (ord("N"), ord("I")):
            return self._non_finite(c)
        if not ord("0") <= c <= ord("9"):
            raise _Refused(_INVALID, self.pos)
        self.pos += 1
        if c != ord("0"):
            self._digits()
        if self.peek() == ord("."):
            self.pos += 1
            if not self._digits():
                raise _Refused(_MISS_FRACTION, self.pos)
        if self.peek() in (ord("e"), ord("E")):
            self.pos += 1
            if self.peek() in (ord("+"), ord("-")):
                self.pos += 1
            if not self._digits():
                raise _Refused(_MISS_EXPONENT, self.pos)
        if abs(float(self.data[start : self.pos])) == float("inf"):
            raise _Refused(_TOO_BIG, start)

    def _digits(self) -> bool:
        first = self.pos
        while ord("0") <= self.peek() <= ord("9"):
            self.pos += 1
        return self.pos > first

    def _non_finite(self, c: int) -> None:
        word = b"NaN" if c == ord("N") else b"Inf"
        for expected in word:
            if self.peek() != expected:
                raise _Refused(_INVALID, self.pos)
            self.pos += 1
        if word == b"Inf" and self.peek() == ord("i"):
            for expected in b"inity":
                if self.peek() != expected:
                    raise _Refused(_INVALID, self.pos)
                self.pos += 1


# ---------------------------------------------------------------------------------------------
# JSON values as json_tensor.cc reads them

SIGNATURE_KEY = "signature_name"
BASE64_KEY = "b64"


def _invalid_argument(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def format_error(value, *text: str) -> errors.InvalidArgumentError:
    """``FormatError``: the offending JSON value quoted, then what is wrong with it."""
    return _invalid_argument(f"JSON Value: {json_writer.debug_string(value)} " + "".join(text))


def type_name(value) -> str:
    """``JsonTypeString``."""
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def is_b64_object(value) -> bool:
    """``IsValBase64Object``: an object whose only member is "b64", a string."""
    return type(value) is dict and len(value) == 1 and type(value.get(BASE64_KEY)) is str


_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_ASCII_SPACE = str.maketrans("", "", " \t\n\v\f\r")


def decode_base64(value: dict) -> bytes:
    """``JsonDecodeBase64Object`` with ``absl::Base64Unescape``'s leniency: whitespace is
    skipped and padding may be left off."""
    if not is_b64_object(value):
        raise _invalid_argument(
            f"JSON Value: {json_writer.debug_string(value)} not formatted correctly for base64 data"
        )
    text = value[BASE64_KEY].translate(_ASCII_SPACE)
    data = text.rstrip("=")
    padding = len(text) - len(data)
    if not _BASE64.fullmatch(text) or len(data) % 4 == 1 or (padding and len(text) % 4):
        raise _invalid_argument("Unable to base64 decode")
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        raise _invalid_argument("Unable to base64 decode") from None


def decode_base64_all(values: list) -> list[bytes] | None:
    """``decode_base64`` of every value, where each is a b64 object of canonical base64 (a
    multiple of 4 characters, padded, no whitespace): one C call per value, no Python checks.
    None where any is not (``decode_base64`` of each then gives the result or the error)."""
    try:
        texts = [value[BASE64_KEY] for value in values if len(value) == 1]
        joined = "".join(texts)  # (TypeError where one is not a str)
        if len(texts) != len(values) or len(joined) % 4:
            return None
        decoded = [binascii.a2b_base64(text, strict_mode=True) for text in texts]
    except (TypeError, KeyError, AttributeError, binascii.Error, ValueError):
        return None
    # Strict mode refuses padding inside and text past it; were a text's length not a multiple
    # of 4, the bytes would not add up.
    if sum(map(len, decoded)) != len(joined) // 4 * 3 - joined.count("="):
        return None
    return decoded


def as_bytes(text: str) -> bytes:
    """A JSON string's bytes, as sent (see the module's note on surrogate escapes)."""
    return text.encode("utf-8", "surrogateescape")


def fill_signature(doc: dict, model_spec) -> None:
    """``FillSignature``: the optional "signature_name", which must be a string."""
    if SIGNATURE_KEY in doc:
        name = doc[SIGNATURE_KEY]
        if type(name) is not str:
            raise format_error(doc, "not formatted correctly. 'signature_name' key must be a string value.")
        model_spec.signature_name = name
