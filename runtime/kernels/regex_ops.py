"""Regex ops: RegexReplace, StaticRegexReplace, RegexFullMatch, StaticRegexFullMatch.

TF's regex kernels run RE2, and so do ours (``google-re2``): the same syntax (POSIX classes such as
``[[:^alpha:]]``, ``\\p{L}``, ``\\Q...\\E``), the same leftmost-first matching over UTF-8 bytes, and
linear time whatever the pattern and input. A backtracking engine would let one request string
stall a worker (``(a+)+$`` over 27 characters takes seconds in Python's ``re``); RE2 bounds both
time and memory (its ``max_mem``, 8 MiB by default as in TF, refuses larger programs).

This module is the package's one door to RE2: ``compile_re2`` (cached, TF's error text), and
``replace`` / ``global_replace`` with RE2's own rewrite rules, which TF calls as ``RE2::Replace``
and ``RE2::GlobalReplace``. Strings are numpy object arrays of ``bytes``, as in ``string_ops.py``.
"""

from __future__ import annotations

import functools

import numpy as np
import re2

from runtime.kernels.registry import kernel
from runtime.kernels.string_ops import _invalid, _map, _shape, _strings

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # TF's error reaches the client; RE2's own log line would be noise


def _bytes(value: bytes | str) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: bytes | str):
    """``pattern`` compiled by RE2 with TF's options (RE2's defaults: UTF-8, Perl classes).

    An invalid pattern raises TF's InvalidArgumentError "Invalid pattern: <p>, error: <RE2's>".
    """
    raw = _bytes(pattern)
    try:
        return re2.compile(raw, _OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else ""
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise _invalid(f"Invalid pattern: {raw.decode('utf-8', 'replace')}, error: {reason}") from None


@functools.lru_cache(maxsize=256)
def _rewrite_parts(rewrite: bytes) -> tuple[tuple, bool, int]:
    """RE2's rewrite string as (parts, valid, highest group named): parts are bytes literals and
    group numbers (``\\0``..``\\9``; ``\\\\`` is a backslash). Any other escape ends the parts there
    and makes it invalid: RE2's ``Rewrite`` then fails after writing what came before."""
    parts: list = []
    literal = bytearray()
    valid = True
    for escaped, text in _escapes(rewrite):
        literal += text
        if escaped is None:
            continue
        if escaped.isdigit():
            parts += [bytes(literal), int(escaped)]
            literal.clear()
        elif escaped == b"\\":
            literal += escaped
        else:
            valid = False
            break
    parts.append(bytes(literal))
    # RE2's MaxSubmatch reads the whole string, past an invalid escape too.
    highest = max((int(e) for e, _ in _escapes(rewrite) if e and e.isdigit()), default=0)
    return tuple(p for p in parts if p != b""), valid, highest


def _escapes(rewrite: bytes):
    """(escaped character or None, literal text before it) pairs; b"" for a final backslash."""
    start = 0
    while (i := rewrite.find(b"\\", start)) >= 0:
        yield rewrite[i + 1 : i + 2], rewrite[start:i]
        start = i + 2
    yield None, rewrite[start:]


def _rewrite(match, parts: tuple) -> bytes:
    return b"".join(p if isinstance(p, bytes) else (match.group(p) or b"") for p in parts)


def replace(text: bytes, compiled, rewrite: bytes) -> bytes:
    """``RE2::Replace``: the first match rewritten; ``text`` unchanged when nothing matches, the
    rewrite names a group the pattern lacks, or the rewrite is invalid."""
    parts, valid, highest = _rewrite_parts(rewrite)
    if highest > compiled.groups or not valid:
        return text
    match = compiled.search(text)
    if match is None:
        return text
    start, end = match.span()
    return text[:start] + _rewrite(match, parts) + text[end:]


def global_replace(text: bytes, compiled, rewrite: bytes) -> bytes:
    """``RE2::GlobalReplace``: every non-overlapping match rewritten, left to right. An empty match
    right where the previous match ended is skipped (one UTF-8 character, or one byte when that is
    no valid character, is copied instead), so ``a*`` over ``baaa`` gives ``-b-`` and not ``-b--``.
    An invalid rewrite writes its valid prefix per match; a missing group leaves ``text`` as is."""
    parts, valid, highest = _rewrite_parts(rewrite)
    if highest > compiled.groups:
        return text
    out: list[bytes] = []
    position, last_end, count = 0, -1, 0
    while position <= len(text):
        match = compiled.search(text, position)
        if match is None:
            break
        start, end = match.span()
        out.append(text[position:start])
        if start == end == last_end:
            step = _char_length(text, position) or 1
            out.append(text[position : position + step])
            position += step
            continue
        out.append(_rewrite(match, parts))
        position = last_end = end
        count += 1
    if count == 0:
        return text
    out.append(text[position:])
    return b"".join(out)


def _char_length(text: bytes, position: int) -> int:
    """Length of the valid UTF-8 character at ``position`` (surrogates allowed, as RE2's
    ``chartorune``), or 0 where there is none."""
    for length in range(1, 5):
        try:
            text[position : position + length].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            continue
        return length if position + length <= len(text) else 0
    return 0


_PUNCTUATION = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~")  # escaped, each is itself in RE2


@functools.lru_cache(maxsize=256)
def byte_class(pattern: bytes) -> bytes | None:
    """The bytes ``pattern`` matches where it is one bracket expression of printable ASCII
    characters, escaped punctuation and ranges, such as Keras' TextVectorization punctuation
    strip: every match is then one ASCII byte (a UTF-8 character past ASCII has no byte below
    128), and a global replace by one byte or none is a translation. None for any other pattern,
    which RE2 runs. Which bytes match is RE2's own answer, asked once per ASCII byte."""
    if len(pattern) < 3 or pattern[:1] != b"[" or pattern[1:2] in (b"^", b"]") or pattern[-1:] != b"]":
        return None
    i, end = 1, len(pattern) - 1
    while i < end:
        if pattern[i] == ord("\\"):
            if pattern[i + 1] not in _PUNCTUATION:
                return None  # \d, \x41, \pL, ...
            i += 2
        elif pattern[i] in b"[]" or not 0x20 <= pattern[i] < 0x7F:
            return None  # a POSIX class, the class ending early, a non-ASCII or control character
        else:
            i += 1
    if i != end:
        return None  # the last ``]`` was escaped
    compiled = compile_re2(pattern)
    return bytes(b for b in range(128) if compiled.fullmatch(bytes([b])) is not None)


def _regex_replace(input, pattern: bytes | str, rewrite: bytes | str, replace_global: bool) -> np.ndarray:
    compiled = compile_re2(pattern)
    rewrite = _bytes(rewrite)
    if replace_global and len(rewrite) <= 1 and rewrite != b"\\":
        members = byte_class(_bytes(pattern))
        if members is not None:  # (a twin of global_replace, tested against it)
            table = bytes.maketrans(members, rewrite * len(members)) if rewrite else None
            return _map(input, lambda s: s.translate(table, b"" if rewrite else members))
    apply = global_replace if replace_global else replace
    return _map(input, lambda s: apply(s, compiled, rewrite))


def _scalar_text(value, what: str = "Pattern") -> bytes:
    array = _strings(value)
    if array.ndim != 0:
        raise _invalid(f"{what} must be scalar, but received {_shape(array)}")
    return array.item()


@kernel("RegexReplace")
def regex_replace(input, pattern, rewrite, *, replace_global=True):
    compile_re2(_scalar_text(pattern))  # TF checks the pattern before the rewrite's shape
    return _regex_replace(input, _scalar_text(pattern), _scalar_text(rewrite, "Rewrite"), replace_global)


@kernel("StaticRegexReplace")
def static_regex_replace(input, *, pattern, rewrite, replace_global=True):
    return _regex_replace(input, pattern, rewrite, replace_global)


def _full_match(input, pattern) -> np.ndarray:
    compiled = compile_re2(pattern)
    return _map(input, lambda s: compiled.fullmatch(s) is not None, np.bool_)


@kernel("RegexFullMatch")
def regex_full_match(input, pattern):
    return _full_match(input, _scalar_text(pattern))


@kernel("StaticRegexFullMatch")
def static_regex_full_match(input, *, pattern):
    return _full_match(input, pattern)
