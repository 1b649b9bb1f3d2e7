"""Unicode decoding: UnicodeDecode and UnicodeDecodeWithOffsets (UTF-8, UTF-16 and UTF-32).

UTF-8 is decoded by hand so that invalid bytes are replaced (or skipped, or refused) one maximal
invalid subpart at a time, as TF does. Strings are numpy object arrays of ``bytes``, as in
``string_ops.py``, whose helpers these share.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.kernels.registry import kernel
from runtime.kernels.string_ops import _invalid, _strings

# --------------------------------------------------------------------------------- Unicode

_CODECS = {
    "UTF-8": "utf-8",
    "UTF-16-BE": "utf-16-be",
    "UTF-16-LE": "utf-16-le",
    "UTF-32-BE": "utf-32-be",
    "UTF-32-LE": "utf-32-le",
}


def _decode_chars(s: bytes, codec: str, errors_mode: str, replacement: int, control: bool):
    """(code points, byte offsets of their starts) of one string."""
    chars, offsets = [], []
    if codec == "utf-8":
        i, n = 0, len(s)
        while i < n:
            char, size = _utf8_char(s, i)
            if char is None:
                if errors_mode == "strict":
                    raise _invalid("Invalid formatting on input string")
                if errors_mode == "replace":
                    chars.append(replacement)
                    offsets.append(i)
            else:
                if control and (char < 0x20 or 0x7F <= char < 0xA0):
                    char = replacement
                chars.append(char)
                offsets.append(i)
            i += size
        return chars, offsets
    width = 2 if "16" in codec else 4
    text = s.decode(codec, "surrogatepass" if errors_mode == "strict" else errors_mode)
    position = 0
    for ch in text:
        chars.append(ord(ch))
        offsets.append(position)
        position += width * (2 if width == 2 and ord(ch) > 0xFFFF else 1)
    return chars, offsets


def _utf8_char(s: bytes, i: int) -> tuple[int | None, int]:
    """The code point at ``i`` and its byte length; (None, length of the maximal invalid subpart)."""
    b0 = s[i]
    if b0 < 0x80:
        return b0, 1
    if 0xC2 <= b0 <= 0xDF:
        need, low, high, value = 1, 0x80, 0xBF, b0 & 0x1F
    elif 0xE0 <= b0 <= 0xEF:
        need, value = 2, b0 & 0x0F
        low, high = (0xA0, 0xBF) if b0 == 0xE0 else (0x80, 0x9F) if b0 == 0xED else (0x80, 0xBF)
    elif 0xF0 <= b0 <= 0xF4:
        need, value = 3, b0 & 0x07
        low, high = (0x90, 0xBF) if b0 == 0xF0 else (0x80, 0x8F) if b0 == 0xF4 else (0x80, 0xBF)
    else:
        return None, 1
    j = i + 1
    for k in range(need):
        if j >= len(s):
            return None, j - i
        b = s[j]
        if not (low <= b <= high if k == 0 else 0x80 <= b <= 0xBF):
            return None, j - i
        value = (value << 6) | (b & 0x3F)
        j += 1
    return value, j - i


def _unicode_decode(input, input_encoding, errors_mode, replacement_char, control, Tsplits, offsets):
    codec = _CODECS.get(input_encoding.upper())
    if codec is None:
        raise _invalid(f"Could not create converter for input encoding: {input_encoding}")
    flat = _strings(input).reshape(-1).tolist()
    splits = [0]
    chars: list[int] = []
    starts: list[int] = []
    for s in flat:
        c, o = _decode_chars(s, codec, errors_mode, replacement_char, control)
        chars += c
        starts += o
        splits.append(len(chars))
    split_dtype = np.int32 if Tsplits == dtypes.DT_INT32 else np.int64
    result = (np.array(splits, dtype=split_dtype), np.array(chars, dtype=np.int32))
    if offsets:
        result += (np.array(starts, dtype=np.int64),)
    return result


@kernel("UnicodeDecode")
def unicode_decode(
    input, *, input_encoding, errors="replace", replacement_char=65533, replace_control_characters=False,
    Tsplits=dtypes.DT_INT64
):  # fmt: skip
    return _unicode_decode(
        input, input_encoding, errors, replacement_char, replace_control_characters, Tsplits, False
    )


@kernel("UnicodeDecodeWithOffsets")
def unicode_decode_with_offsets(
    input, *, input_encoding, errors="replace", replacement_char=65533, replace_control_characters=False,
    Tsplits=dtypes.DT_INT64
):  # fmt: skip
    return _unicode_decode(
        input, input_encoding, errors, replacement_char, replace_control_characters, Tsplits, True
    )
