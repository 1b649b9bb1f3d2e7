"""Regex ops: RegexReplace, StaticRegexReplace, RegexFullMatch, StaticRegexFullMatch.

TF's regexes are RE2's; ``compile_re2`` translates RE2's syntax to Python's ``re`` where they
differ (``$``, ``\\z``, POSIX classes, rewrite strings) and refuses what it cannot translate.
Strings are numpy object arrays of ``bytes``, as in ``string_ops.py``.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from runtime import errors
from runtime.kernels.registry import kernel
from runtime.kernels.string_ops import _invalid, _map, _shape, _strings

_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_UNSUPPORTED_ESCAPES = {
    "p": "Unicode classes (\\p)",
    "P": "Unicode classes (\\P)",
    "Q": "\\Q...\\E",
    "C": "\\C",
}


def _text(value) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: bytes | str) -> re.Pattern:
    """An RE2 pattern as a Python ``re`` pattern over str (UTF-8 decoded, ASCII classes as RE2's).

    RE2's ``$`` and ``\\z`` match only at the end of the text (Python's ``$`` also before a final
    newline); POSIX classes (``[[:alpha:]]``) become ASCII ranges. Unicode classes and ``\\Q``
    are refused with UnimplementedError rather than silently matching something else.
    """
    text = _text(pattern)
    multiline = re.search(r"\(\?[a-zA-Z]*m", text) is not None
    out, i, in_class = [], 0, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            escaped = text[i + 1 : i + 2]
            if escaped in _UNSUPPORTED_ESCAPES:
                raise errors.UnimplementedError(
                    None, None, f"RE2 pattern {text!r} uses {_UNSUPPORTED_ESCAPES[escaped]}, not supported"
                )
            out.append("\\Z" if escaped == "z" and not in_class else text[i : i + 2])
            i += 2
            continue
        if in_class:
            posix = re.match(r"\[:(\^?)([a-z]+):\]", text[i:])
            if posix and posix.group(2) in _POSIX_CLASSES and not posix.group(1):
                out.append(_POSIX_CLASSES[posix.group(2)])
                i += posix.end()
                continue
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            out.append(c)
            i += 1
            if text[i : i + 1] == "^":
                out.append("^")
                i += 1
            if text[i : i + 1] == "]":  # a leading ] is a literal
                out.append("\\]")
                i += 1
            continue
        elif c == "$" and not multiline:
            c = "\\Z"
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out), re.ASCII)
    except re.error as e:
        raise _invalid(f"Invalid pattern: {text}, error: {e}") from None


@functools.lru_cache(maxsize=256)
def rewrite_template(rewrite: bytes | str):
    """An RE2 rewrite string (``\\0``..``\\9`` groups, ``\\\\`` a backslash) as a ``re.sub`` function."""
    text = _text(rewrite)
    parts: list = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            escaped = text[i + 1 : i + 2]
            if escaped.isdigit():
                parts.append(int(escaped))
            elif escaped == "\\":
                parts.append("\\")
            else:
                raise _invalid(f"invalid rewrite pattern: {text}")
            i += 2
            continue
        parts.append(c)
        i += 1
    if all(isinstance(p, str) for p in parts):
        literal = "".join(parts)
        return lambda match: literal
    return lambda match: "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)


def _regex_replace(input, pattern: bytes | str, rewrite: bytes | str, replace_global: bool) -> np.ndarray:
    compiled = compile_re2(pattern)
    template = rewrite_template(rewrite)
    count = 0 if replace_global else 1

    def replace(s: bytes) -> bytes:
        text = s.decode("utf-8", "surrogateescape")
        return compiled.sub(template, text, count=count).encode("utf-8", "surrogateescape")

    return _map(input, replace)


def _scalar_text(value) -> bytes:
    array = _strings(value)
    if array.ndim != 0:
        raise _invalid(f"Pattern must be scalar, but received {_shape(array)}")
    return array.item()


@kernel("RegexReplace")
def regex_replace(input, pattern, rewrite, *, replace_global=True):
    return _regex_replace(input, _scalar_text(pattern), _scalar_text(rewrite), replace_global)


@kernel("StaticRegexReplace")
def static_regex_replace(input, *, pattern, rewrite, replace_global=True):
    return _regex_replace(input, pattern, rewrite, replace_global)


def _full_match(input, pattern) -> np.ndarray:
    compiled = compile_re2(pattern)
    return _map(
        input, lambda s: compiled.fullmatch(s.decode("utf-8", "surrogateescape")) is not None, np.bool_
    )


@kernel("RegexFullMatch")
def regex_full_match(input, pattern):
    return _full_match(input, _scalar_text(pattern))


@kernel("StaticRegexFullMatch")
def static_regex_full_match(input, *, pattern):
    return _full_match(input, pattern)
