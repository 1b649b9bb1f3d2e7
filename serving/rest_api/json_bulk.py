"""Large outputs rendered as byte matrices: one row per value, padded with NUL, by numpy.

``json_writer.decimal_tokens`` and ``nested_run`` cost a Python str per value; for a 16 MB
answer that is most of a REST predict's time (the issue's "JSON at the JSON library's speed").
Here float32 values are written as ``WriteDecimal`` writes them (``%.6g`` where it reads back,
else ``%.9g``; ".0" after whole numbers; NaN, Infinity) from their decimal digits computed in
float64, and the lists around them are separator rows chosen per value; the answer is the
matrix's non-NUL bytes in row-major order.

Fails safe: a value whose digits float64 cannot settle (within a rounding error of a tie, or
of a float32's half-way point) is written by ``json_writer``'s own one-value path, and what
this does not render (other dtypes, tiny arrays) is the caller's general path. Held equal to
``decimal_tokens`` and ``nested_run`` by generated values and shapes in the tests.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from serving.rest_api import json_writer

MIN_VALUES = 64  # below this, the per-value path is as fast

_PAD = 0
# Columns of a value's row: sign, "0.000", integer digits, ".", fraction digits, the "0" of
# ".0", "e+dd". A value's text is its row's non-NUL bytes.
_SIGN, _LEAD, _WHOLE, _POINT, _FRACTION, _ZERO, _EXP = 0, 1, 6, 15, 16, 25, 26
_WIDTH = 30
# 10**k for k in -60..59 as the nearest doubles (Python's int -> float is correctly rounded).
_POW10 = np.array([float(10**k) if k >= 0 else 1 / 10**-k for k in range(-60, 60)])
_NINE = np.arange(9)
# Which of the nine digits a row shows, by the digits before the point and the significant
# ones: before it (the integer part, zeros included), and after it.
_BEFORE = (_NINE[None, :] < np.arange(10)[:, None]).astype(np.uint8)
_AFTER = (
    (_NINE[None, None, :] >= np.arange(10)[:, None, None])
    & (_NINE[None, None, :] < np.arange(10)[None, :, None])
).astype(np.uint8)
_SPECIALS = {
    name: np.frombuffer(name.encode().ljust(_WIDTH, b"\0"), np.uint8)
    for name in ("NaN", "Infinity", "-Infinity")
}


def _scaled(magnitude: np.ndarray, power: np.ndarray) -> np.ndarray:
    """``magnitude * 10**power`` in float64 (within two roundings)."""
    return magnitude * _POW10[power + 60]


def _digits(magnitude: np.ndarray, precision: int):
    """The ``precision`` significant digits of each (positive) value, rounded half-even, as an
    integer; its decimal exponent; the value in units of its last digit (``scaled``, so that
    a decimal's distance from it is ``rounded - scaled``); and whether float64 may have
    rounded it wrongly (``scaled`` within its error of a half)."""
    exponent = np.floor(np.log10(magnitude)).astype(np.int64)
    scaled = _scaled(magnitude, precision - 1 - exponent)
    low, high = scaled < 10 ** (precision - 1), scaled >= 10**precision  # log10 a step off
    if low.any() or high.any():
        exponent = exponent - low + high
        scaled = _scaled(magnitude, precision - 1 - exponent)
    rounded = np.rint(scaled)
    # ``scaled`` is off by a few of its ulps at most (< 10**precision * 5e-16).
    doubt = np.abs(scaled - np.floor(scaled) - 0.5) < 10.0 ** (precision - 15)
    return rounded, exponent, scaled, doubt


def _reads_back(value32: np.ndarray, rounded, exponent, scaled, precision: int):
    """Whether each decimal ``rounded`` x 10**(exponent - precision + 1) reads back (to the
    nearest float32) as ``value32`` (positive), and whether float64 cannot tell (the decimal
    within its error of a half-way point between two float32 values)."""
    step = np.spacing(value32)
    step[value32 == np.finfo(np.float32).max] = np.spacing(np.nextafter(np.finfo(np.float32).max, 0))
    half_up = step.astype(np.float64) / 2  # (past the largest float32: that step again, to infinity)
    # Just above a power of two (mantissa bits all zero, not subnormal), the step down halves.
    power_of_two = (value32.view(np.uint32) & 0x7FFFFF == 0) & (value32 > np.float32(1.2e-38))
    distance = rounded - scaled
    half = np.where((distance < 0) & power_of_two, half_up / 2, half_up)
    gap = _scaled(half, precision - 1 - exponent) - np.abs(distance)
    return gap > 0, np.abs(gap) < 1e-8


def _normal(rounded, exponent, precision: int):
    """``rounded`` as an integer of ``precision`` digits (a carry to 10**precision moved into
    the exponent)."""
    carry = rounded >= 10**precision
    return np.where(carry, rounded / 10, rounded).astype(np.uint32), exponent + carry


def decimal_rows(values: np.ndarray, spare: int = 0) -> np.ndarray:
    """``decimal_tokens`` of a float32 array, as a (values, 30 + ``spare``) matrix of
    NUL-padded ASCII (the spare columns NUL, for what follows each value)."""
    with np.errstate(over="ignore", invalid="ignore"):  # (NaN and the largest values' steps)
        return _decimal_rows(values, spare)


def _decimal_rows(values: np.ndarray, spare: int) -> np.ndarray:
    flat = values.reshape(-1)
    count = len(flat)
    finite = np.isfinite(flat)
    magnitude32 = np.abs(np.where(finite, flat, np.float32(1)))
    zero = magnitude32 == 0
    magnitude32[zero] = 1
    magnitude = magnitude32.astype(np.float64)

    r6, e6, scaled6, doubt = _digits(magnitude, 6)
    six, close = _reads_back(magnitude32, r6, e6, scaled6, 6)
    six |= zero
    doubt |= close
    m6, e6 = _normal(r6, e6, 6)
    r9, e9, _, doubt9 = _digits(magnitude, 9)
    m9, e9 = _normal(r9, e9, 9)
    mantissa = np.where(six, m6 * np.uint32(1000), m9)  # nine digits either way
    exponent = np.where(six, e6, e9)
    mantissa[zero] = 0
    exponent[zero] = 0
    doubt = finite & ~zero & (doubt | (~six & doubt9))

    digits = np.empty((count, 9), np.uint8)
    rest = mantissa
    for column in range(8, -1, -1):  # (numpy divides by a scalar without a division per value)
        shorter = rest // 10
        digits[:, column] = rest - shorter * 10
        rest = shorter
    significant = 9 - np.argmax(digits[:, ::-1] != 0, axis=1)
    significant[zero] = 1
    digits += ord("0")

    fixed = (exponent >= -4) & (exponent < np.where(six, 6, 9))
    whole = fixed & (exponent >= 0)
    small = fixed & ~whole
    scientific = ~fixed
    # Digits before the point: the integer part, one in the exponent form, none below one.
    point = np.where(whole, exponent + 1, scientific).astype(np.intp)

    rows = np.zeros((count, _WIDTH + spare), np.uint8)
    rows[:, _SIGN] = np.signbit(flat) * np.uint8(ord("-"))
    rows[:, _LEAD] = small * np.uint8(ord("0"))
    rows[:, _LEAD + 1] = small * np.uint8(ord("."))
    for zeros in range(1, 4):  # between "0." and the digits: 0.0dd (e = -2) to 0.000dd (e = -4)
        rows[:, _LEAD + 1 + zeros] = (small & (exponent <= -1 - zeros)) * np.uint8(ord("0"))
    rows[:, _WHOLE:_POINT] = digits * _BEFORE[point]
    rows[:, _POINT] = (whole | (scientific & (significant > 1))) * np.uint8(ord("."))
    rows[:, _FRACTION:_ZERO] = digits * _AFTER[point, significant]
    rows[:, _ZERO] = (whole & (significant <= point)) * np.uint8(ord("0"))
    size = np.abs(exponent)
    rows[:, _EXP] = scientific * np.uint8(ord("e"))
    rows[:, _EXP + 1] = scientific * np.where(exponent < 0, ord("-"), ord("+")).astype(np.uint8)
    rows[:, _EXP + 2] = scientific * (size // 10 + ord("0")).astype(np.uint8)
    rows[:, _EXP + 3] = scientific * (size % 10 + ord("0")).astype(np.uint8)

    for i in np.flatnonzero(~finite).tolist():
        rows[i, :_WIDTH] = _SPECIALS[json_writer._decimal_token(float(flat[i]), True)]
    for i in np.flatnonzero(doubt).tolist():
        token = json_writer._decimal_token(float(flat[i]), True).encode("ascii")
        rows[i, :_WIDTH] = np.frombuffer(token.ljust(_WIDTH, b"\0"), np.uint8)
    return rows


def text(rows: np.ndarray) -> str:
    """The non-NUL bytes of ``rows``, row-major, as text."""
    return rows[rows != _PAD].tobytes().decode("ascii")


def renders(values: np.ndarray, dtype: int, inner: tuple[int, ...]) -> bool:
    """Whether ``nested_rows`` renders these rows (float32, enough of them, no empty lists)."""
    return (
        dtype == dtypes.DT_FLOAT and values.dtype == np.float32 and values.size >= MIN_VALUES and all(inner)
    )


def nested_rows(
    values: np.ndarray, rows: int, inner: tuple[int, ...], depth: int, single_line: bool, row_sep: str
) -> str:
    """``json_writer.nested_run`` of ``values`` (``rows`` arrays of shape ``inner``) with their
    ``decimal_tokens``: each value's row followed by a row of the separator that says which
    lists close and open after it (``json_writer.run_layout``)."""
    head, separators, which, tail = json_writer.run_layout(values.size, inner, depth, single_line, row_sep)
    encoded = [separator.encode("ascii") for separator in separators]
    table = np.zeros((len(encoded), max(map(len, encoded))), np.uint8)
    for i, separator in enumerate(encoded):
        table[i, : len(separator)] = np.frombuffer(separator, np.uint8)
    rows = decimal_rows(values, table.shape[1])
    rows[:, _WIDTH:] = table[which]
    return head + text(rows) + tail
