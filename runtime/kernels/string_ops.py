"""String ops: hashing into buckets, formatting, splitting, case, substrings, base64, n-grams.
Regexes live in ``regex_ops.py``, Unicode decoding in ``unicode_ops.py``; both share this module's
helpers (``_strings``, ``_map``, ``_invalid``, ``_shape``).

Strings are numpy object arrays of ``bytes``, as TF's kernels see them. Hashes are TF's exactly:
``StringToHashBucketFast`` is FarmHash Fingerprint64 (``pyfarmhash``), ``StringToHashBucket`` TF's
own ``Hash64`` and ``StringToHashBucketStrong`` SipHash-2-4 (``runtime/kernels/hashing.py``).
"""

from __future__ import annotations

import base64
import binascii

import farmhash
import numpy as np

from runtime import dtypes, errors
from runtime.kernels.hashing import hash64, siphash24_memo
from runtime.kernels.registry import kernel


def _strings(value) -> np.ndarray:
    return np.asarray(value, dtype=object)


def _map(value, fn, dtype=object) -> np.ndarray:
    array = _strings(value)
    out = np.empty(array.shape, dtype=dtype)
    out.reshape(-1)[:] = [fn(v) for v in array.reshape(-1).tolist()]
    return out


def _invalid(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


def _check_buckets(num_buckets: int) -> None:
    if num_buckets <= 0:
        raise _invalid("Number of buckets must be at least 1")


# --------------------------------------------------------------------------------- hashing


@kernel("StringToHashBucketFast")
def string_to_hash_bucket_fast(input, *, num_buckets):
    _check_buckets(num_buckets)
    array = _strings(input)
    # One C call per string and one numpy modulo: no Python lambda per string.
    fingerprints = np.fromiter(map(farmhash.fingerprint64, array.reshape(-1).tolist()), np.uint64, array.size)
    return (fingerprints % np.uint64(num_buckets)).astype(np.int64).reshape(array.shape)


@kernel("StringToHashBucket")
def string_to_hash_bucket(string_tensor, *, num_buckets):
    _check_buckets(num_buckets)
    return _map(string_tensor, lambda s: hash64(s) % num_buckets, np.int64)


@kernel("StringToHashBucketStrong")
def string_to_hash_bucket_strong(input, *, num_buckets, key):
    _check_buckets(num_buckets)
    if len(key) != 2:
        raise _invalid("Key must have 2 elements")
    k0, k1 = (int(k) & 0xFFFFFFFFFFFFFFFF for k in key)
    array = _strings(input)
    hashes = siphash24_memo(k0, k1, array.reshape(-1).tolist())
    return np.array([h % num_buckets for h in hashes], dtype=np.int64).reshape(array.shape)


# --------------------------------------------------------------------------------- formatting

_FLOATS = {dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_HALF, dtypes.DT_BFLOAT16}
_COMPLEX = {dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128}


@kernel("AsString")
def as_string(input, *, precision=-1, scientific=False, shortest=False, width=-1, fill="", T=None):
    """printf formatting as TF builds it: ``%<fill><width>.<precision><d|f|e|g>``."""
    array = np.asarray(input)
    dtype = T if T is not None else dtypes.from_numpy(array.dtype)
    is_float = dtype in _FLOATS or dtype in _COMPLEX
    if len(fill) > 1:
        raise _invalid("Fill string must be one or fewer characters")
    if scientific and shortest:
        raise _invalid("Cannot select both scientific and shortest notation")
    if precision > -1 and not is_float:
        raise _invalid(f"precision not supported for datatype {dtypes.name(dtype)}")
    if (scientific or shortest) and not is_float:
        raise _invalid(f"scientific and shortest format not supported for datatype {dtypes.name(dtype)}")
    spec = "%"
    if fill:
        if fill not in " +-0#":
            raise _invalid(f'Fill argument not supported: "{fill}"')
        spec += fill
    if width > -1:
        spec += str(width)
    if precision > -1:
        spec += f".{precision}"
    if dtype == dtypes.DT_BOOL:
        return _map(array, lambda v: b"true" if v else b"false")
    if dtype == dtypes.DT_STRING:
        return _map(array, lambda v: (spec + "s").encode() % v)
    if is_float:
        spec += "g" if shortest else "e" if scientific else "f"
        if dtype in _COMPLEX:
            spec = f"({spec},{spec})"
            return _map(array, lambda v: (spec % (v.real, v.imag)).encode())
        return _map(array.astype(np.float64), lambda v: _c_float(spec % v).encode())
    spec += "d"
    return _map(array, lambda v: (spec % v).encode())


def _c_float(text: str) -> str:
    # glibc prints "-nan" for a NaN with the sign bit set; Python never does. TF's NaNs are positive.
    return text


# --------------------------------------------------------------------------------- joining/splitting


@kernel("ReduceJoin")
def reduce_join(inputs, reduction_indices, *, keep_dims=False, separator=""):
    array = _strings(inputs)
    sep = separator.encode() if isinstance(separator, str) else separator
    axes = np.asarray(reduction_indices, dtype=np.int64).reshape(-1).tolist()
    rank = array.ndim
    normalized = []
    for axis in axes:
        if not -rank <= axis < rank:
            raise errors.OutOfRangeError(
                None, None, f"Invalid reduction dimension {axis} for input with {rank} dimension(s)"
            )
        a = axis % rank if rank else axis
        if a in normalized:
            raise _invalid(f"Duplicate reduction dimension {a}")
        normalized.append(a)
    if np.ndim(reduction_indices) == 0 and not axes:
        normalized = []
    kept = [d for d in range(rank) if d not in normalized]
    reduced = normalized[::-1]  # TF reduces one axis after another: the first named varies fastest
    moved = np.transpose(array, kept + reduced) if rank else array
    kept_shape = [array.shape[d] for d in kept]
    width = int(np.prod([array.shape[d] for d in reduced], dtype=np.int64))
    rows = moved.reshape(-1, width) if moved.size else np.empty((int(np.prod(kept_shape)), width), object)
    out = np.empty(rows.shape[0], dtype=object)
    out[:] = [sep.join(row) for row in rows.tolist()]
    if keep_dims:
        return out.reshape([1 if d in normalized else array.shape[d] for d in range(rank)])
    return out.reshape(kept_shape)


def _sparse_split(pieces: list[list[bytes]]) -> tuple:
    lengths = [len(p) for p in pieces]
    total = sum(lengths)
    if total <= 64:  # (row, position) pairs in a Python list: numpy's fixed costs dominate
        pairs: list = []
        for i, count in enumerate(lengths):
            pairs += [x for j in range(count) for x in (i, j)]
        indices = np.array(pairs, dtype=np.int64).reshape(total, 2)
    else:
        counts = np.array(lengths, dtype=np.int64)
        indices = np.empty((total, 2), dtype=np.int64)
        indices[:, 0] = np.repeat(np.arange(len(pieces), dtype=np.int64), counts)
        starts = np.cumsum(counts) - counts
        indices[:, 1] = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
    values = np.empty(total, dtype=object)
    values[:] = [v for p in pieces for v in p]
    shape = np.array([len(pieces), max(lengths, default=0)], dtype=np.int64)
    return indices, values, shape


def _rank1(value, name: str = "input") -> list:
    array = _strings(value)
    if array.ndim != 1:
        raise _invalid(f"{name} must be a vector, got shape: {list(array.shape)}")
    return array.tolist()


@kernel("StringSplit")
def string_split(input, delimiter, *, skip_empty=True):
    """Splits on any byte of ``delimiter`` (every byte when it is empty)."""
    rows = _rank1(input)
    delim = _strings(delimiter)
    if delim.ndim != 0:
        raise _invalid(f"delimiter must be a scalar, got shape: {list(delim.shape)}")
    delim = delim.item()
    pieces = []
    for row in rows:
        if not row:
            pieces.append([])
            continue
        if not delim:
            pieces.append([row[i : i + 1] for i in range(len(row))])
            continue
        parts, start = [], 0
        for i, byte in enumerate(row):
            if byte in delim:
                parts.append(row[start:i])
                start = i + 1
        parts.append(row[start:])
        pieces.append([p for p in parts if p] if skip_empty else parts)
    return _sparse_split(pieces)


_WHITESPACE = b" \t\n\v\f\r"


@kernel("StringSplitV2")
def string_split_v2(input, sep, *, maxsplit=-1):
    """Splits on ``sep`` (runs of ASCII whitespace when empty), at most ``maxsplit`` times."""
    rows = _rank1(input)
    separator = _strings(sep)
    if separator.ndim != 0:
        raise _invalid(f"sep must be a scalar, got shape: {list(separator.shape)}")
    separator = separator.item()
    limit = maxsplit if maxsplit > 0 else -1
    if maxsplit == 0:
        pieces = [[row] for row in rows]
    elif separator:
        pieces = [row.split(separator, limit) for row in rows]
    elif limit < 0:  # bytes.split() splits on the same six ASCII whitespace bytes, in C
        pieces = [row.split() for row in rows]
    else:
        pieces = [_split_whitespace(row, limit) for row in rows]
    return _sparse_split(pieces)


def _split_whitespace(row: bytes, limit: int) -> list[bytes]:
    """Runs of whitespace separate tokens; after ``limit`` tokens the (stripped) rest is one more,
    even when empty (TF's ``SplitV2``)."""
    parts, i, n = [], 0, len(row)
    while i < n and row[i] in _WHITESPACE:
        i += 1
    while i < n:
        j = i
        while j < n and row[j] not in _WHITESPACE:
            j += 1
        parts.append(row[i:j])
        i = j
        while i < n and row[i] in _WHITESPACE:
            i += 1
        if limit > 0 and len(parts) == limit:
            parts.append(row[i:])
            break
    return parts


# --------------------------------------------------------------------------------- case, strip, length


@kernel("StringStrip")
def string_strip(input):
    return _map(input, lambda s: s.strip(_WHITESPACE))


def _case(value, encoding: str, ascii_fn, unicode_fn) -> np.ndarray:
    if not encoding:
        return _map(value, ascii_fn)
    if encoding.lower().replace("-", "") != "utf8":
        raise _invalid(f"Unsupported encoding: {encoding}")
    return _map(
        value, lambda s: unicode_fn(s.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    )


@kernel("StringLower")
def string_lower(input, *, encoding=""):
    return _case(input, encoding, bytes.lower, str.lower)


@kernel("StringUpper")
def string_upper(input, *, encoding=""):
    return _case(input, encoding, bytes.upper, str.upper)


def _utf8_length(s: bytes) -> int:
    # Counts bytes that are not UTF-8 continuation bytes, as TF does (even for invalid UTF-8).
    return sum(1 for b in s if b & 0xC0 != 0x80)


@kernel("StringLength")
def string_length(input, *, unit="BYTE"):
    if unit == "UTF8_CHAR":
        return _map(input, _utf8_length, np.int32)
    return _map(input, len, np.int32)


def _char_starts(s: bytes) -> list[int]:
    return [i for i, b in enumerate(s) if b & 0xC0 != 0x80]


@kernel("Substr")
def substr(input, pos, len, *, unit="BYTE"):
    """Substrings by byte or UTF-8 character; a negative ``pos`` counts from the end."""
    strings = _strings(input)
    positions = np.asarray(pos)
    lengths = np.asarray(len)
    if positions.shape != lengths.shape:
        raise _invalid(
            f"pos and len should have the same shape, got: {_shape(positions)} vs. {_shape(lengths)}"
        )
    try:
        shape = np.broadcast_shapes(strings.shape, positions.shape)
    except ValueError:
        raise _invalid(f"Incompatible shapes: {_shape(strings)} vs. {_shape(positions)}") from None
    flat_s = np.broadcast_to(strings, shape).reshape(-1).tolist()
    flat_p = np.broadcast_to(positions, shape).reshape(-1).tolist()
    flat_l = np.broadcast_to(lengths, shape).reshape(-1).tolist()
    out = []
    for i, (s, p, n) in enumerate(zip(flat_s, flat_p, flat_l)):
        starts = _char_starts(s) if unit == "UTF8_CHAR" else None
        size = builtins_len(starts) if starts is not None else builtins_len(s)
        if abs(p) > size:
            raise errors.InvalidArgumentError(
                None, None, f"pos {p} out of range for string b'{_escape(s)}' at index {i}"
            )
        start = p + size if p < 0 else p
        end = size if n < 0 else min(start + n, size)
        if starts is None:
            out.append(s[start:end])
        else:
            byte_start = starts[start] if start < size else builtins_len(s)
            byte_end = starts[end] if end < size else builtins_len(s)
            out.append(s[byte_start:byte_end])
    result = np.empty(builtins_len(out), dtype=object)
    result[:] = out
    return result.reshape(shape)


builtins_len = len


def _escape(s: bytes) -> str:
    """Bytes as TF's CEscape prints them inside b'...'."""
    out = []
    for b in s:
        ch = chr(b)
        if ch in "\\'\"":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


def _shape(array) -> str:
    return "[" + ",".join(str(d) for d in np.shape(array)) + "]"


# --------------------------------------------------------------------------------- base64


@kernel("EncodeBase64")
def encode_base64(input, *, pad=False):
    if pad:
        return _map(input, base64.urlsafe_b64encode)
    return _map(input, lambda s: base64.urlsafe_b64encode(s).rstrip(b"="))


_BASE64_WEBSAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _b64decode(s: bytes) -> bytes:
    stripped = s.rstrip(b"=")
    if len(stripped) % 4 == 1:
        raise _invalid("Base64 string length cannot be 1 modulo 4.")
    if len(s) - len(stripped) > 2 or not _BASE64_WEBSAFE.issuperset(stripped):
        raise _invalid("Invalid character found in base64.")
    try:
        return base64.b64decode(stripped + b"=" * (-len(stripped) % 4), altchars=b"-_", validate=True)
    except binascii.Error:
        raise _invalid("Invalid character found in base64.") from None


@kernel("DecodeBase64")
def decode_base64(input):
    return _map(input, _b64decode)


# --------------------------------------------------------------------------------- n-grams


def _flat_windows(tokens: list, sep: bytes, width: int) -> list:
    """Entry k: ``tokens[k : k + width]`` joined by ``sep`` (windows crossing rows are never read)."""
    if width == 1:
        return tokens
    return list(map(sep.join, zip(*[tokens[k:] for k in range(width)])))


@kernel("StringNGrams")
def string_ngrams(
    data, data_splits, *, separator, ngram_widths, left_pad, right_pad, pad_width, preserve_short_sequences
):  # fmt: skip
    """N-grams of each ragged row, every width in turn, padded as TF pads (TextVectorization's ngrams)."""
    tokens = _strings(data).reshape(-1).tolist()
    splits = np.asarray(data_splits)
    sep, left, right = (x.encode() if isinstance(x, str) else x for x in (separator, left_pad, right_pad))

    def padding(width: int) -> int:
        return min(width - 1 if pad_width < 0 else pad_width, width - 1)

    def ngrams(row: list, width: int, number: int) -> list[bytes]:
        pad = padding(width)
        out = []
        for k in range(number):
            left_n = max(0, pad - k)
            right_n = max(0, pad - (number - (k + 1)))
            start = 0 if left_n > 0 else k - pad
            middle = row[start : start + width - left_n - right_n]
            out.append(sep.join([left] * left_n + middle + [right] * right_n))
        return out

    def windows(row: list, width: int) -> list[bytes]:
        """Every n-gram of the padded row: its windows of ``width`` (what ``ngrams`` yields for
        the full count, without its per-n-gram bookkeeping)."""
        pad = padding(width)
        if width == 1:
            return row[:]
        padded = [left] * pad + row + [right] * pad if pad else row
        return [sep.join(padded[k : k + width]) for k in range(len(padded) - width + 1)]

    # Unpadded, a row's n-grams are a slice of the whole batch's: joined once, not row by row.
    joined = {w: _flat_windows(tokens, sep, w) for w in ngram_widths if not padding(w)}
    values: list[bytes] = []
    out_splits = [0]
    for start, stop in zip(splits[:-1].tolist(), splits[1:].tolist()):
        row = tokens[start:stop]
        produced = len(values)
        for width in ngram_widths:
            flat = joined.get(width)
            values += windows(row, width) if flat is None else flat[start : max(start, stop - width + 1)]
        if preserve_short_sequences and len(values) == produced and row:
            values += ngrams(row, len(row) + 2 * pad_width, 1)
        out_splits.append(len(values))
    result = np.empty(len(values), dtype=object)
    result[:] = values
    return result, np.array(out_splits, dtype=splits.dtype)
