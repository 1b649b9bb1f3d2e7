"""Records for the breadth ops (tf.Example parsing, strings, lookup tables, sparse and ragged ops).

Plain data (numpy and the stdlib only), read by both sides: ``tests/oracle/builders/
breadth_records.py`` evaluates them in TensorFlow and stores TF's outputs or errors under
``<cache>/breadth_records/``; ``tests/runtime/test_{parsing,string,lookup,sparse}_ops.py`` run our
kernels on the same inputs and compare.

Two kinds:

- ``RECORDS``: one op on fixed inputs (``tests/runtime/op_records.OpRecord``, same conventions as
  the dense op records: inputs in TF's order, a list for a list input, attrs by TF's names).
- ``SCENARIOS``: names of small multi-node graphs (tables need a handle op, an initialiser and a
  lookup) that the builder constructs with TF's Python API; the GraphDef, the feeds and TF's
  fetched values are stored, and the test runs the same GraphDef through ``runtime.Session``.

Serialized ``tf.train.Example`` protos are written here by a small wire encoder, so that malformed
and unusual encodings (unpacked floats, duplicate keys, empty ``Feature``) can be recorded too.
"""

from __future__ import annotations

import struct

import numpy as np

from tests.runtime.op_records import OpRecord, dt

RECORDS: list[OpRecord] = []
_counts: dict[str, int] = {}


def rec(op: str, *inputs, rtol=None, atol=None, compare=None, **attrs) -> None:
    n = _counts.get(op, 0)
    _counts[op] = n + 1
    RECORDS.append(OpRecord(f"{op}.b{n:03d}", op, tuple(inputs), attrs, rtol, atol, compare))


def s(*values) -> np.ndarray:
    return np.array([v.encode() if isinstance(v, str) else v for v in values], dtype=object)


def s0(value) -> np.ndarray:
    return np.array(value.encode() if isinstance(value, str) else value, dtype=object)


def i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def i32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int32)


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# --------------------------------------------------------------------------------- Example encoder


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def feature(values, kind: str | None = None, packed: bool = True) -> bytes:
    """A serialized ``Feature``: bytes, int64 or float list by the values' type or ``kind``."""
    values = list(values)
    if kind is None:
        if all(isinstance(v, (str, bytes)) for v in values) and values:
            kind = "bytes"
        elif all(isinstance(v, int) for v in values) and values:
            kind = "int64"
        else:
            kind = "float"
    if kind == "none":
        return b""
    if kind == "bytes":
        body = b"".join(_delimited(1, v.encode() if isinstance(v, str) else v) for v in values)
        return _delimited(1, body)
    if kind == "int64":
        if packed:
            body = _delimited(1, b"".join(_varint(v) for v in values)) if values else b""
        else:
            body = b"".join(_varint(1 << 3) + _varint(v) for v in values)
        return _delimited(3, body)
    if packed:
        body = _delimited(1, struct.pack(f"<{len(values)}f", *values)) if values else b""
    else:
        body = b"".join(_varint(1 << 3 | 5) + struct.pack("<f", v) for v in values)
    return _delimited(2, body)


def example_entries(entries) -> bytes:
    """An Example from (key, serialized Feature) pairs, in order (duplicates allowed)."""
    body = b"".join(_delimited(1, _delimited(1, key.encode()) + _delimited(2, f)) for key, f in entries)
    return _delimited(1, body)


def ex(**features) -> bytes:
    """An Example: each keyword a feature; a scalar is a one-value list."""
    entries = []
    for key, value in features.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        entries.append((key, feature(values)))
    return example_entries(entries)


def batch(*examples) -> np.ndarray:
    return np.array(list(examples), dtype=object)


EMPTY = s()
NO_NAMES = s()


# --------------------------------------------------------------------------------- tf.Example parsing

_NUMPY = {"float": np.float32, "int64": np.int64, "string": object}


def required(dtype: str) -> np.ndarray:
    return np.zeros(0, dtype=_NUMPY[dtype])


def default(dtype: str, values) -> np.ndarray:
    if dtype == "string":
        return np.asarray(
            [v.encode() if isinstance(v, str) else v for v in np.ravel(values)], dtype=object
        ).reshape(np.shape(values))
    return np.asarray(values, dtype=_NUMPY[dtype])


def parse_v2(serialized, dense=(), sparse=(), ragged=(), names=NO_NAMES) -> None:
    """dense: (key, dtype, shape, default); sparse: (key, dtype); ragged: (key, dtype, splits dtype)."""
    rec(
        "ParseExampleV2",
        serialized,
        names,
        s(*[k for k, _ in sparse]),
        s(*[d[0] for d in dense]),
        s(*[r[0] for r in ragged]),
        [d[3] for d in dense],
        num_sparse=len(sparse),
        sparse_types=[dt(t) for _, t in sparse],
        ragged_value_types=[dt(r[1]) for r in ragged],
        ragged_split_types=[dt(r[2]) for r in ragged],
        dense_shapes=[list(d[2]) for d in dense],
    )


_E1 = ex(age=31.5, ids=[3, 1, 4], words=["a", "bc"], flag=1, vec=[1.0, 2.0, 3.0])
_E2 = example_entries(
    [
        ("age", feature([20.0])),
        ("ids", feature([9])),
        ("words", feature([], kind="bytes")),
        ("flag", feature([0])),
        ("vec", feature([4.0, 5.0, 6.0])),
    ]
)
_E3 = ex(vec=[7.0, 8.0, 9.0])
_STD = [
    ("age", "float", [], default("float", -1.0)),
    ("flag", "int64", [1], default("int64", [7])),
    ("vec", "float", [3], required("float")),
]
parse_v2(batch(_E1, _E2, _E3), dense=_STD, sparse=[("ids", "int64"), ("words", "string")])
parse_v2(batch(_E1, _E2, _E3), dense=_STD, ragged=[("ids", "int64", "int64"), ("words", "string", "int32")])
parse_v2(s0(_E1), dense=_STD, sparse=[("ids", "int64")], ragged=[("words", "string", "int64")])
parse_v2(batch(), dense=_STD, sparse=[("ids", "int64")])
parse_v2(batch(_E1, _E3), dense=[("vec", "float", [3, 1], required("float"))])
parse_v2(batch(_E1, _E2), dense=[("words", "string", [None], default("string", "pad"))])
parse_v2(batch(_E1, _E2, _E3), dense=[("ids", "int64", [None], default("int64", 0))])
parse_v2(batch(_E1, _E2, _E3), dense=[("ids", "int64", [None], required("int64"))])
parse_v2(batch(_E1, _E3), dense=[("vec", "float", [None, 3], default("float", 0.5))])
parse_v2(batch(_E1, _E2), dense=[("words", "string", [2], default("string", ["x", "y"]))])
parse_v2(batch(ex(s="only")), dense=[("s", "string", [], default("string", "d"))], sparse=[("s", "string")])
# Encodings TF's fast parser must accept: unpacked numbers, empty Feature, duplicate keys.
parse_v2(
    batch(example_entries([("f", feature([1.0, 2.0], packed=False)), ("i", feature([5, 6], packed=False))])),
    dense=[("f", "float", [2], required("float"))],
    sparse=[("i", "int64")],
)
parse_v2(batch(example_entries([("i", feature([], kind="none"))])), sparse=[("i", "int64")])
parse_v2(
    batch(example_entries([("i", feature([], kind="none"))])),
    dense=[("i", "int64", [None], default("int64", 3))],
)
parse_v2(
    batch(example_entries([("i", feature([], kind="none"))])), dense=[("i", "int64", [2], required("int64"))]
)
parse_v2(
    batch(example_entries([("i", feature([], kind="none"))])),
    dense=[("i", "int64", [2], default("int64", [1, 2]))],
)
parse_v2(batch(example_entries([("i", feature([], kind="none"))])), ragged=[("i", "float", "int64")])
parse_v2(batch(example_entries([("i", feature([1])), ("i", feature([2, 3]))])), sparse=[("i", "int64")])
parse_v2(batch(b""), dense=[("a", "float", [], default("float", 2.0))], sparse=[("b", "string")])
parse_v2(batch(ex(a=1.0), ex(a=2.0)), dense=[("a", "float", [], required("float"))], names=s("n0", "n1"))
# TF's errors.
parse_v2(batch(ex(a=[1.0, 2.0, 3.0])), dense=[("a", "float", [2], required("float"))])
parse_v2(batch(ex(a=1.0)), dense=[("a", "int64", [1], required("int64"))])
parse_v2(batch(ex(b=1.0)), dense=[("a", "int64", [1], required("int64"))])
parse_v2(
    batch(ex(b=1.0), ex(c=2)), dense=[("a", "string", [], required("string"))], names=s("first", "second")
)
parse_v2(batch(b"garbage"), dense=[("a", "float", [], default("float", 0.0))])
parse_v2(batch(ex(a=1.0)), sparse=[("a", "int64")])
parse_v2(batch(ex(a="x")), ragged=[("a", "float", "int64")])
parse_v2(batch(ex(a=[1, 2, 3])), dense=[("a", "int64", [None, 2], default("int64", 0))])
parse_v2(batch(ex(a=["x", "y"])), dense=[("a", "string", [1], required("string"))])
parse_v2(batch(ex(a=["x"])), dense=[("a", "string", [2], required("string"))])
parse_v2(batch(ex(a=[1, 2, 3])), dense=[("a", "int64", [2], required("int64"))])
parse_v2(s0(ex(a=[1, 2, 3])), dense=[("a", "int64", [2], required("int64"))])
parse_v2(s0(ex(a=1.0)), dense=[("a", "int64", [], required("int64"))])
parse_v2(s0(ex(a=1.0)), dense=[("b", "int64", [], required("int64"))])
parse_v2(s0(ex(a=1.0)), sparse=[("a", "int64")])
parse_v2(s0(ex(a=["x"])), dense=[("a", "string", [2], required("string"))])
parse_v2(s0(b"garbage"), dense=[("a", "float", [], default("float", 0.0))])
parse_v2(batch(_E1, _E2, b"\x0a\x05\x0a\x03\x0a\x01"), sparse=[("ids", "int64")])

rec(
    "ParseExample",
    batch(_E1, _E2, _E3),
    NO_NAMES,
    [s0("ids"), s0("words")],
    [s0("age"), s0("vec")],
    [default("float", -1.0), required("float")],
    sparse_types=[dt("int64"), dt("string")],
    dense_shapes=[[], [3]],
)
rec(
    "ParseExample",
    batch(_E1, ex(x=1)),
    s("a", "b"),
    [],
    [s0("vec")],
    [required("float")],
    sparse_types=[],
    dense_shapes=[[3]],
)
rec(
    "ParseSingleExample",
    s0(_E1),
    [default("float", -1.0), default("int64", [0, 0])],
    num_sparse=2,
    sparse_keys=["ids", "words"],
    dense_keys=["age", "missing"],
    sparse_types=[dt("int64"), dt("string")],
    dense_shapes=[[], [2]],
)
rec(
    "ParseSingleExample",
    s0(_E3),
    [required("float")],
    num_sparse=0,
    sparse_keys=[],
    dense_keys=["age"],
    sparse_types=[],
    dense_shapes=[[]],
)

rec("DecodeRaw", s(b"\x01\x00\x02\x00", b"\xff\xff\x00\x80"), out_type=dt("int16"))
rec("DecodeRaw", s(b"\x01\x00\x02\x00", b"\xff\xff\x00\x80"), out_type=dt("int16"), little_endian=False)
rec("DecodeRaw", s(struct.pack("<2f", 1.5, -2.0)), out_type=dt("float"))
rec("DecodeRaw", s0(b"abc"), out_type=dt("uint8"))
rec("DecodeRaw", s(b"ab", b"abc"), out_type=dt("uint8"))
rec("DecodeRaw", s(b"abc"), out_type=dt("int32"))
rec("StringToNumber", s("1.5", "-2", " 3e2", "inf", "nan", "1e40"))
rec("StringToNumber", s("12", "-7", "+4"), out_type=dt("int32"))
rec("StringToNumber", s("9223372036854775807", "-1"), out_type=dt("int64"))
rec("StringToNumber", s("1.5"), out_type=dt("int32"))
rec("StringToNumber", s("abc"))
rec("StringToNumber", s("3000000000"), out_type=dt("int32"))
rec("StringToNumber", s("0x1A", "1.0"), out_type=dt("double"))


# --------------------------------------------------------------------------------- strings

_WORDS = s("hello", "", "TensorFlow", "ünïcödé", "a b\tc", "\xff\xfe".encode("latin-1"), "x" * 40)
rec("StringToHashBucketFast", _WORDS, num_buckets=1000)
rec("StringToHashBucketFast", s("a", "b", "c").reshape(3, 1), num_buckets=2**62)
rec("StringToHashBucketFast", s0("scalar"), num_buckets=7)
rec("StringToHashBucketFast", s("x"), num_buckets=0)
rec("StringToHashBucket", _WORDS, num_buckets=1000)
rec("StringToHashBucket", s("abcdefgh", "abcdefghi", "abcdefghijklmnopq"), num_buckets=2**62)
rec("StringToHashBucketStrong", _WORDS, num_buckets=1000, key=[1, 2])
# Enough strings (of 0 to 24 bytes) for the kernel's batched SipHash.
rec("StringToHashBucketStrong", s(*("abcdefghijklmnopqrstuvwxy"[:n] for n in range(25))), num_buckets=97,
    key=[7, -5])  # fmt: skip
rec(
    "StringToHashBucketStrong",
    s("abcdefgh", "abcdefghijklmno", ""),
    num_buckets=2**62,
    key=[2**63 - 1, 12345],
)

_FLOATS = f32([0.0, -1.5, 3.14159265, 1e10, 1e-7, -0.0, 123456.789])
rec("AsString", _FLOATS)
rec("AsString", _FLOATS, precision=2)
rec("AsString", _FLOATS, scientific=True)
rec("AsString", _FLOATS, shortest=True)
rec("AsString", _FLOATS, shortest=True, precision=3)
rec("AsString", _FLOATS, width=12, fill="0", precision=1)
rec("AsString", _FLOATS, width=12)
rec("AsString", np.asarray([1e300, -2.5, 0.1], np.float64), precision=20)
rec("AsString", f32([np.inf, -np.inf, np.nan]))
rec("AsString", i64([0, -5, 2**40]))
rec("AsString", i32([[1, -22], [333, 0]]), width=5)
rec("AsString", i32([1, -22]), width=5, fill="-")
rec("AsString", i32([1, -22]), width=5, fill="+")
rec("AsString", np.asarray([True, False]))
rec("AsString", np.asarray([1.5 + 2j], np.complex64))
rec("AsString", i32([1]), precision=2)
rec("AsString", f32([1.0]), scientific=True, shortest=True)
rec("AsString", f32([1.0]), width=3, fill="ab")
rec("AsString", f32([1.0]), width=3, fill="x")
rec("AsString", np.asarray([7], np.int8))

rec("StringJoin", [s("a", "b"), s("c", "d")])
rec("StringJoin", [s("a", "b"), s0("-"), s("c", "d")], separator="/")
rec("StringJoin", [s0("x"), s0("y")], separator=", ")
rec("StringJoin", [s("a", "b"), s("c", "d", "e")])
rec("ReduceJoin", s("a", "b", "c", "d").reshape(2, 2), i32(1))
rec("ReduceJoin", s("a", "b", "c", "d").reshape(2, 2), i32(0), separator="-")
rec("ReduceJoin", s("a", "b", "c", "d").reshape(2, 2), i32([0, 1]), separator="+")
rec("ReduceJoin", s("a", "b", "c", "d").reshape(2, 2), i32(-1), keep_dims=True)
rec("ReduceJoin", s("a", "b", "c", "d", "e", "f").reshape(1, 2, 3), i32([2, 0]), separator=".")
rec("ReduceJoin", s("a", "b"), i32([]))
rec("ReduceJoin", s("a", "b"), i32(3))
rec("ReduceJoin", np.zeros((0, 2), object), i32(0))

_SENTENCES = s("hello world", "  leading and  double  spaces ", "", "one", "a,b,,c", "tab\tsep\nnl")
rec("StringSplit", _SENTENCES, s0(" "))
rec("StringSplit", _SENTENCES, s0(" "), skip_empty=False)
rec("StringSplit", _SENTENCES, s0(", "))
rec("StringSplit", s("abc", "de"), s0(""))
rec("StringSplitV2", _SENTENCES, s0(""))
rec("StringSplitV2", _SENTENCES, s0(" "))
rec("StringSplitV2", _SENTENCES, s0(","))
rec("StringSplitV2", _SENTENCES, s0(""), maxsplit=1)
rec("StringSplitV2", _SENTENCES, s0(" "), maxsplit=2)
rec("StringSplitV2", s("a<>b<>c", "<>"), s0("<>"))
rec("StringSplitV2", s("a b"), s("x", "y"))

rec("StringStrip", s("  a b  ", "\t\nx\r\x0b\x0c", "", "none"))
rec("StringLower", s("HeLLo", "ÀÉÎ", "123 ABC"))
rec("StringLower", s("HeLLo", "ÀÉÎ", "ΣΑΣ"), encoding="utf-8")
rec("StringUpper", s("HeLLo", "àéî", "straße"))
rec("StringUpper", s("HeLLo", "àéî"), encoding="utf-8")
rec("StringLength", s("abc", "", "ünï", "\xff".encode("latin-1")))
rec("StringLength", s("abc", "", "ünï", "日本語"), unit="UTF8_CHAR")
rec("StringLength", s("x").reshape(1, 1))

rec("Substr", s("hello", "world"), i32([1, 2]), i32([3, 10]))
rec("Substr", s("hello", "world"), i32(-3), i32(2))
rec("Substr", s("hello"), i32(5), i32(1))
rec("Substr", s("hello"), i32(6), i32(1))
rec("Substr", s("hello"), i32(-6), i32(1))
rec("Substr", s("héllo wörld", "日本語テキスト"), i32(1), i32(4), unit="UTF8_CHAR")
rec("Substr", s("héllo"), i32(-2), i32(5), unit="UTF8_CHAR")
rec("Substr", s("ab", "cd", "ef", "gh").reshape(2, 2), i32([0, 1]), i32([1, 1]))
rec("Substr", s0("scalar"), i32(2), i32(-1))

_TEXT = s("Hello, World!", "  The quick brown fox.  ", "a$b", "line1\nline2\n", "ÀBC déf", "")
rec("StaticRegexReplace", _TEXT, pattern="[!\"#$%&()\\*\\+,-\\./:;<=>?@\\[\\\\\\]^_`{|}~\\']", rewrite="")
rec("StaticRegexReplace", _TEXT, pattern="o", rewrite="0", replace_global=False)
rec("StaticRegexReplace", _TEXT, pattern="(\\w+) (\\w+)", rewrite="\\2 \\1")
rec("StaticRegexReplace", _TEXT, pattern="\\s+", rewrite=" ")
rec("StaticRegexReplace", _TEXT, pattern="^\\s+|\\s+$", rewrite="")
rec("StaticRegexReplace", _TEXT, pattern="$", rewrite="<END>")
rec("StaticRegexReplace", _TEXT, pattern="[[:upper:]]", rewrite="_")
rec("StaticRegexReplace", _TEXT, pattern="é|À", rewrite="?")
rec("StaticRegexReplace", _TEXT, pattern=".", rewrite="\\0\\0", replace_global=False)
rec("StaticRegexReplace", _TEXT, pattern="l", rewrite="\\\\")
rec("RegexReplace", _TEXT, s0("[aeiou]"), s0("*"))
rec("RegexReplace", _TEXT, s0("(o)"), s0("[\\1]"), replace_global=False)
rec("RegexReplace", _TEXT, s0("("), s0("x"))
rec("StaticRegexFullMatch", _TEXT, pattern=".*o.*")
rec("StaticRegexFullMatch", _TEXT, pattern="[A-Za-z, !]+")
rec("StaticRegexFullMatch", s("line1\n", "line1"), pattern="line1$")
rec("StaticRegexFullMatch", s("éa", "ea"), pattern=".a")
rec("RegexFullMatch", _TEXT, s0("\\S*"))
rec("RegexFullMatch", s("abc", "ABC", "a1"), s0("[a-z]+|[A-Z]+"))

# RE2's own syntax and rules, which Python's re lacks or words differently (issue 17, item 6):
# linear time on patterns that backtrack, POSIX and Unicode classes, \Q...\E, empty matches in a
# global replace, RE2's rewrite strings and its error texts.
_PATHOLOGICAL = s("a" * 27 + "!", "a" * 27, "", "b" * 27)
rec("StaticRegexFullMatch", _PATHOLOGICAL, pattern="(a+)+$")
rec("RegexFullMatch", _PATHOLOGICAL, s0("(a|aa)*b"))
rec("StaticRegexReplace", _PATHOLOGICAL, pattern="(a+)+$", rewrite="x")
rec("RegexReplace", _PATHOLOGICAL, s0("(a*)*!"), s0("<\\1>"))
rec("StaticRegexReplace", _TEXT, pattern="[[:^alpha:]]", rewrite="_")
rec("StaticRegexReplace", _TEXT, pattern="[^[:space:][:punct:]]+", rewrite="w")
rec("StaticRegexFullMatch", s("ab", "a1", "", "é"), pattern="[[:^digit:]]*")
rec("StaticRegexReplace", _TEXT, pattern="\\p{L}+", rewrite="<\\0>")
rec("StaticRegexReplace", _TEXT, pattern="\\PL", rewrite="")
rec("StaticRegexReplace", s("αβγ abc", "Ωmega"), pattern="\\p{Greek}", rewrite="g")
rec("StaticRegexFullMatch", s("héllo", "hello1", "日本"), pattern="\\pL+")
rec("StaticRegexFullMatch", s("a.b", "axb", "a.b.c"), pattern="\\Qa.b\\E")
rec("StaticRegexReplace", s("a.b axb (x)"), pattern="\\Q(x)\\E|\\Q.\\E", rewrite="Q")
rec("StaticRegexReplace", s("baaa", "", "aXa", "héé"), pattern="a*", rewrite="-")
rec("StaticRegexReplace", s("héé", b"a\xffb", "", "日本"), pattern="", rewrite="-")
rec("StaticRegexReplace", s("abc abc", ""), pattern="\\b", rewrite="|")
rec("StaticRegexReplace", s("abab", "bbb"), pattern="b*", rewrite="[\\0]")
rec("StaticRegexReplace", s(b"\xff\xfe", b"a\xffb"), pattern="", rewrite="-")
rec("StaticRegexFullMatch", s(b"\xff", b"a\xffb", "é"), pattern=".*")
rec("StaticRegexReplace", s("é", "ab"), pattern="\\C", rewrite="x", replace_global=False)
rec("StaticRegexReplace", _TEXT, pattern="o", rewrite="1\\x2")
rec("StaticRegexReplace", _TEXT, pattern="o", rewrite="1\\x2", replace_global=False)
rec("StaticRegexReplace", _TEXT, pattern="o", rewrite="\\1")
rec("StaticRegexReplace", _TEXT, pattern="(o)", rewrite="\\1\\")
rec("StaticRegexReplace", _TEXT, pattern="(l)(l)?", rewrite="\\\\2\\2")
rec("StaticRegexReplace", _TEXT, pattern="(?i)hello|(?m)^line\\d$", rewrite="#")
rec("StaticRegexReplace", _TEXT, pattern="\\z", rewrite="$")
rec("StaticRegexFullMatch", _TEXT, pattern="(?s).*\\z")
rec("RegexReplace", _TEXT, s0("(?=o)"), s0("x"))
rec("RegexReplace", _TEXT, s("a", "b"), s0("x"))
rec("RegexReplace", _TEXT, s0("a"), s("x", "y"))
rec("RegexFullMatch", _TEXT, s0("a{1001}"))
rec("RegexFullMatch", _TEXT, s0("\\8"))
rec("StaticRegexFullMatch", _TEXT, pattern="[z-a]")
rec("StaticRegexReplace", _TEXT, pattern="x**", rewrite="")

_UNICODE = s("héllo", "日本", "", b"ab\xffc", b"\xe6\x97", "a\x01b", "😀x")
rec("UnicodeDecode", _UNICODE, input_encoding="UTF-8")
rec("UnicodeDecode", _UNICODE, input_encoding="UTF-8", errors="ignore")
rec("UnicodeDecode", _UNICODE, input_encoding="UTF-8", replacement_char=63, replace_control_characters=True)
rec("UnicodeDecode", _UNICODE, input_encoding="UTF-8", errors="strict")
rec("UnicodeDecode", s("ab", "c").reshape(2, 1), input_encoding="UTF-8", Tsplits=dt("int32"))
rec("UnicodeDecodeWithOffsets", _UNICODE, input_encoding="UTF-8")
rec("UnicodeDecode", s(b"\x00a\xd8\x3d\xde\x00"), input_encoding="UTF-16-BE")

rec("EncodeBase64", s("hello", "", "a", "ab", "\xff\xfe\xfd".encode("latin-1")))
rec("EncodeBase64", s("hello", "", "a", "ab"), pad=True)
rec("DecodeBase64", s("aGVsbG8", "", "YQ", "YWI=", "__79"))
rec("DecodeBase64", s("a"))
rec("DecodeBase64", s("ab+c"))


# --------------------------------------------------------------------------------- sparse

_IDX = i64([[0, 0], [0, 2], [1, 1], [3, 0], [3, 3]])
_SHAPE = i64([4, 4])
rec("SparseReshape", _IDX, _SHAPE, i64([2, 8]))
rec("SparseReshape", _IDX, _SHAPE, i64([-1, 2]))
rec("SparseReshape", _IDX, _SHAPE, i64([16]))
rec("SparseReshape", _IDX, _SHAPE, i64([2, 2, -1]))
rec("SparseReshape", i64([[0, 1, 2], [1, 0, 0]]), i64([2, 3, 4]), i64([6, -1]))
rec("SparseReshape", _IDX, _SHAPE, i64([3, -1]))
rec("SparseReshape", _IDX, _SHAPE, i64([-1, -1]))
rec("SparseReshape", _IDX, _SHAPE, i64([5, 5]))
rec("SparseReshape", np.zeros((0, 2), np.int64), i64([0, 3]), i64([-1, 3]))
# To the same shape TF forwards the indices unchecked, even out-of-range ones.
rec("SparseReshape", _IDX, _SHAPE, i64([-1, 4]))
rec("SparseReshape", i64([[9, 9]]), i64([4, 4]), i64([4, 4]))

_VALS = f32([1.0, 2.0, 3.0, 4.0, 5.0])
rec("SparseFillEmptyRows", _IDX, _VALS, i64([5, 4]), f32(-1.0))
rec("SparseFillEmptyRows", i64([[2, 0], [0, 1], [2, 1], [0, 0]]), s("a", "b", "c", "d"), i64([4, 2]), s0("?"))
rec("SparseFillEmptyRows", np.zeros((0, 2), np.int64), i64([]), i64([3, 5]), i64(9))
rec("SparseFillEmptyRows", i64([[0, 0, 1]]), i32([7]), i64([2, 1, 2]), i32(0))
rec("SparseFillEmptyRows", i64([[5, 0]]), f32([1.0]), i64([3, 2]), f32(0.0))
# Rows in order, none empty (columns out of order within a row): nothing moves.
rec("SparseFillEmptyRows", i64([[0, 1], [0, 0], [1, 2], [2, 0]]), f32([1, 2, 3, 4]), i64([3, 3]), f32(-1.0))

_DATA = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
for _op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"):
    rec(_op, _DATA, i32([0, 1, 4, 2, 2]), i32([0, 0, 1, 3, 3]))
    rec(_op, _DATA, i64([4, 0]), i64([0, 0]))
    rec(_op, _DATA, i32([0, 1]), i32([1, 0]))
    rec(_op, _DATA, i32([0, 7]), i32([0, 1]))
    rec(f"{_op}WithNumSegments", _DATA, i32([0, 1, 4]), i32([0, 2, 2]), i32(5))
    rec(f"{_op}WithNumSegments", _DATA, i32([0, 1]), i32([0, 3]), i64(2))
# The kernels' shortcuts: one row per segment (the row itself), and the same with an empty last segment.
for _op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"):
    rec(_op, _DATA, i32([4, 0, 2]), i64([0, 1, 2]))
    rec(f"{_op}WithNumSegments", _DATA, i32([4, 0, 2]), i32([0, 1, 2]), i32(3))
    rec(f"{_op}WithNumSegments", _DATA, i32([4, 0, 2]), i32([0, 1, 2]), i32(4))
rec("SparseSegmentSum", np.arange(6, dtype=np.int32).reshape(3, 2), i32([0, 2, 1]), i32([0, 0, 2]))
rec("SparseSegmentMean", np.arange(4, dtype=np.float64), i32([0, 1, 3]), i32([0, 1, 1]))

rec("SparseToDense", _IDX, _SHAPE, _VALS, f32(0.0))
rec("SparseToDense", i32([1, 3]), i32([5]), i32([7, 8]), i32(-1))
rec("SparseToDense", i64([[0, 1], [0, 0]]), i64([2, 2]), f32([1.0, 2.0]), f32(0.0))
rec("SparseToDense", i64([[0, 1], [0, 0]]), i64([2, 2]), f32([1.0, 2.0]), f32(0.0), validate_indices=False)
rec("SparseToDense", i64([[0, 1], [0, 1]]), i64([2, 2]), f32([1.0, 2.0]), f32(0.0))
rec("SparseToDense", i64([[0, 1], [2, 0]]), i64([2, 2]), f32(3.0), f32(0.0))
rec("SparseToDense", i64([[0, 1]]), i64([2, 2]), s("x"), s0(""))
rec("SparseToDense", i64(2), i64([4]), i64(1), i64(0))

_B = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
rec("SparseTensorDenseMatMul", _IDX, _VALS, _SHAPE, _B)
rec("SparseTensorDenseMatMul", _IDX, _VALS, _SHAPE, _B, adjoint_a=True)
rec("SparseTensorDenseMatMul", _IDX, _VALS, _SHAPE, _B.T.copy(), adjoint_b=True)
rec("SparseTensorDenseMatMul", _IDX, _VALS, _SHAPE, _B[:3])
rec("SparseReorder", i64([[1, 0], [0, 2], [0, 1], [1, 0]]), s("a", "b", "c", "d"), i64([2, 3]))
rec("SparseReorder", np.zeros((0, 2), np.int64), f32([]), i64([2, 3]))
rec("SparseReduceSum", _IDX, _VALS, _SHAPE, i32(1))
rec("SparseReduceSum", _IDX, _VALS, _SHAPE, i32([0, 1]))
rec("SparseReduceSum", _IDX, _VALS, _SHAPE, i32(0), keep_dims=True)
rec("SparseReduceSum", _IDX, i64([1, 2, 3, 4, 5]), _SHAPE, i32(-1))
rec("SparseReduceSum", _IDX, _VALS, _SHAPE, i32(2))

_SP1 = (i64([[0, 0], [1, 0], [1, 1]]), s("a", "b", "c"), i64([3, 2]))
_SP2 = (i64([[0, 0], [1, 0], [2, 0]]), i64([10, 20, 30]), i64([3, 1]))
_DENSE = s("x", "y", "z").reshape(3, 1)
for _hashed, _buckets in ((False, 0), (True, 0), (True, 100)):
    rec(
        "SparseCross",
        [_SP1[0], _SP2[0]],
        [_SP1[1], _SP2[1]],
        [_SP1[2], _SP2[2]],
        [_DENSE],
        hashed_output=_hashed,
        num_buckets=_buckets,
        hash_key=0xDECAFCAFFE,
        out_type=dt("int64" if _hashed else "string"),
        internal_type=dt("int64" if _hashed else "string"),
    )
rec(
    "SparseCross",
    [_SP1[0]],
    [_SP1[1]],
    [_SP1[2]],
    [i64([[1, 2], [3, 4], [5, 6]])],
    hashed_output=True,
    num_buckets=1000,
    hash_key=956888297470,
    out_type=dt("int64"),
    internal_type=dt("int64"),
)
rec(
    "SparseCross",
    [_SP2[0], _SP1[0]],
    [_SP2[1], _SP1[1]],
    [_SP2[2], _SP1[2]],
    [],
    hashed_output=False,
    num_buckets=0,
    hash_key=0,
    out_type=dt("string"),
    internal_type=dt("string"),
)
rec("SparseCrossV2", [_SP1[0], _SP2[0]], [_SP1[1], _SP2[1]], [_SP1[2], _SP2[2]], [_DENSE], s0("#"))
rec("SparseCrossHashed", [_SP1[0]], [_SP1[1]], [_SP1[2]], [_DENSE], i64(50), np.asarray(True), i64([3, 4]))
rec("SparseCrossHashed", [_SP1[0]], [_SP1[1]], [_SP1[2]], [_DENSE], i64(0), np.asarray(False), i64([0, 0]))
rec("SparseCrossHashed", [_SP1[0], _SP1[0]], [_SP1[1], _SP1[1]], [_SP1[2], _SP1[2]], [], i64(7), np.asarray(False),
    i64([1, 2]))  # fmt: skip
rec("RaggedTensorToTensor", i64([-1, -1]), f32([1, 2, 3, 4, 5]), f32(0), [i64([0, 2, 2, 5])],
    row_partition_types=["ROW_SPLITS"])  # fmt: skip
rec("RaggedTensorToTensor", i64([2, 4]), s("a", "b", "c", "d", "e"), s0(""), [i64([0, 2, 2, 5])],
    row_partition_types=["ROW_SPLITS"])  # fmt: skip
rec("RaggedTensorToTensor", i64(-1), i64([1, 2, 3, 4, 5, 6]), i64(-1), [i64([0, 1, 3]), i64([0, 2, 2, 6])],
    row_partition_types=["ROW_SPLITS", "ROW_SPLITS"])  # fmt: skip
rec("RaggedTensorToTensor", i64([-1, 3]), i64([1, 2, 3, 4]), i64(9), [i64(3), i64([0, 0, 2, 2])],
    row_partition_types=["FIRST_DIM_SIZE", "VALUE_ROWIDS"])  # fmt: skip
rec("RaggedTensorToTensor", i64([-1, -1, 2]), f32([[1, 2], [3, 4], [5, 6]]), f32([7, 8]), [i64([0, 1, 3])],
    row_partition_types=["ROW_SPLITS"])  # fmt: skip
rec("RaggedTensorToSparse", [i64([0, 2, 2, 5])], f32([1, 2, 3, 4, 5]))
rec("RaggedTensorToSparse", [i64([0, 1, 3]), i64([0, 2, 2, 6])], s("a", "b", "c", "d", "e", "f"))
rec("RaggedRange", i64([0, 5, 8]), i64([3, 5, 12]), i64([1, 1, 2]))
rec("RaggedRange", f32([0.0, 1.0]), f32([1.0, -1.0]), f32([0.25, -0.5]), Tsplits=dt("int32"))
rec("RaggedRange", i32(2), i32([5, 6]), i32(0))


# --------------------------------------------------------------------------------- graph scenarios

# Multi-node graphs built by the oracle builder with TF's Python API (tables, text-file vocabularies,
# StaticVocabularyTable, re-initialisation); the names are the contract between the two sides.
SCENARIOS = (
    "static_table_string_to_int64",
    "static_table_int64_to_string",
    "static_table_lookup_before_init",
    "static_table_duplicate_keys",
    "static_table_reinitialize_same",
    "static_table_reinitialize_different",
    "text_file_initialize_twice",
    "text_file_whole_line_to_line_number",
    "text_file_columns",
    "text_file_line_number_offset",
    "text_file_vocab_size",
    "text_file_vocab_size_too_large",
    "text_file_empty_line",
    "text_file_missing_columns",
    "text_file_bad_int",
    "text_file_float_values",
    "text_file_duplicate_lines",
    "static_vocabulary_table_oov_buckets",
    "index_table_from_tensor_oov",
    "mutable_table_insert_find_remove",
    "mutable_table_import_size",
    "mutable_table_of_tensors",
    "dense_hash_table",
    "string_lookup_layer_style",
    "parse_then_lookup_feature_column",
)


# --------------------------------------------------------------------------------- n-grams, tensors, CSV

_NG_DATA, _NG_SPLITS = s("a", "b", "c", "d", "e", "f"), i64([0, 4, 4, 5, 6])
for _widths, _pad, _short in (([2], 0, False), ([1, 3], 0, False), ([2], -1, False), ([3], 1, False),
                              ([3], 0, True), ([2, 4], 1, True), ([5], -1, False)):  # fmt: skip
    rec("StringNGrams", _NG_DATA, _NG_SPLITS, separator=" ", ngram_widths=_widths, left_pad="<s>",
        right_pad="</s>", pad_width=_pad, preserve_short_sequences=_short)  # fmt: skip
rec("StringNGrams", s("x", "y"), i32([0, 2]), separator="_", ngram_widths=[2], left_pad="", right_pad="",
    pad_width=0, preserve_short_sequences=False)  # fmt: skip

# TensorProtos serialized by TF's own make_tensor_proto (float32 [2] = 1.5, -2; string scalar "hi").
_FLOAT_PROTO = b"\x08\x01\x12\x04\x12\x02\x08\x02\x22\x08\x00\x00\xc0\x3f\x00\x00\x00\xc0"
rec("ParseTensor", s0(_FLOAT_PROTO), out_type=dt("float"))
rec("ParseTensor", s0(b"\x08\x07\x12\x00\x42\x02hi"), out_type=dt("string"))
rec("ParseTensor", s0(_FLOAT_PROTO), out_type=dt("int32"))

_CSV = s("1,2.5,abc", '3,,"q,""x"""', ",4.0,", "7,8,z")
rec("DecodeCSV", _CSV, [i32([0]), f32([-1.0]), s("d")])
rec("DecodeCSV", _CSV, [i32([]), f32([-1.0]), s("d")])
rec("DecodeCSV", s("1;2", "3;NA"), [i64([0]), i64([9])], field_delim=";", na_value="NA")
rec("DecodeCSV", s("1,2,3"), [i32([0]), i32([0])])
rec("DecodeCSV", s("1,x"), [i32([0]), i32([0])])
rec("DecodeCSV", s("a,b,c,d"), [s(""), s("")], select_cols=[1, 3])
rec("DecodeCSV", s('a"b,c'), [s(""), s("")], use_quote_delim=False)

_RB_SPLITS, _RB_VALUES = i64([0, 3, 3, 7]), i64([1, 1, 4, 0, 2, 2, 9])
rec("RaggedBincount", _RB_SPLITS, _RB_VALUES, i64(5), i64([]))
rec("RaggedBincount", _RB_SPLITS, _RB_VALUES, i64(5), f32([]), binary_output=True)
rec("RaggedBincount", _RB_SPLITS, _RB_VALUES, i64(5), f32([0.5, 1.0, 2.0, 1.5, 0.25, 0.25, 3.0]))
rec("RaggedBincount", _RB_SPLITS, i32([1, 1, 4, 0, 2, 2, 9]), i32(3), i32([]))
rec("SparseBincount", i64([[0, 0], [0, 1], [2, 0]]), i64([3, 3, 1]), i64([3, 2]), i64(4), i64([]))
rec("SparseBincount", i64([[0, 0], [0, 1], [2, 0]]), i64([3, 3, 1]), i64([3, 2]), i64(4), f32([]),
    binary_output=True)  # fmt: skip
rec("SparseBincount", i64([[0], [2]]), i32([3, 1]), i64([4]), i32(5), f32([2.0, 0.5]))


# --------------------------------------------------------------------------------- SequenceExample


def _features_body(features: dict) -> bytes:
    entries = [(k, feature(v if isinstance(v, (list, tuple)) else [v])) for k, v in features.items()]
    return b"".join(_delimited(1, _delimited(1, k.encode()) + _delimited(2, f)) for k, f in entries)


def _step(values) -> bytes:
    """One step's Feature; an empty step is a Feature with no kind."""
    return feature(values) if values else feature([], kind="none")


def seq_ex(context: dict, lists: dict) -> bytes:
    """A SequenceExample: context features, and per feature list the values of each step."""
    body = b"".join(
        _delimited(
            1,
            _delimited(1, key.encode())
            + _delimited(2, b"".join(_delimited(1, _step(step)) for step in steps)),
        )
        for key, steps in lists.items()
    )
    return _delimited(1, _features_body(context)) + _delimited(2, body)


def parse_seq(
    serialized,
    context_dense=(),
    context_sparse=(),
    dense=(),
    sparse=(),
    ragged=(),
    names=NO_NAMES,
    compare=None,
):
    """Feature lists: dense (key, dtype, shape, missing assumed empty), sparse (key, dtype), ragged
    (key, dtype, splits dtype)."""
    rec(
        "ParseSequenceExampleV2",
        serialized,
        names,
        s(*[k for k, _ in context_sparse]),
        s(*[d[0] for d in context_dense]),
        s(),
        s(*[k for k, _ in sparse]),
        s(*[d[0] for d in dense]),
        s(*[r[0] for r in ragged]),
        np.array([d[3] for d in dense], dtype=bool),
        [d[3] for d in context_dense],
        compare=compare,
        Ncontext_sparse=len(context_sparse),
        context_sparse_types=[dt(t) for _, t in context_sparse],
        context_ragged_value_types=[],
        context_ragged_split_types=[],
        context_dense_shapes=[list(d[2]) for d in context_dense],
        Nfeature_list_sparse=len(sparse),
        Nfeature_list_dense=len(dense),
        feature_list_dense_types=[dt(d[1]) for d in dense],
        feature_list_sparse_types=[dt(t) for _, t in sparse],
        feature_list_ragged_value_types=[dt(r[1]) for r in ragged],
        feature_list_ragged_split_types=[dt(r[2]) for r in ragged],
        feature_list_dense_shapes=[list(d[2]) for d in dense],
    )


_S1 = seq_ex(
    {"user": "u1", "age": 3.0}, {"clicks": [[1, 2], [3, 4], [5, 6]], "words": [["a"], [], ["b", "c"]]}
)
_S2 = seq_ex({"age": 5.0}, {"clicks": [[7, 8]], "words": [["d"]]})
_S3 = seq_ex({}, {})
_SEQ_ARGS = dict(
    context_dense=[("age", "float", [], default("float", -1.0))],
    context_sparse=[("user", "string")],
    dense=[("clicks", "int64", [2], True)],
    sparse=[("words", "string")],
    ragged=[("words", "string", "int64")],
)
parse_seq(batch(_S1, _S2, _S3), **_SEQ_ARGS)
parse_seq(s0(_S1), **_SEQ_ARGS)
_SEQ_ARGS["ragged"] = [("clicks", "int64", "int32")]
_SEQ_ARGS["dense"] = []
parse_seq(batch(_S1, _S2, _S3), **_SEQ_ARGS)
# Output 8 (outer splits of one SequenceExample) is a scalar TF never writes: not comparable.
parse_seq(s0(_S1), **_SEQ_ARGS, compare=(0, 1, 2, 3, 4, 5, 6, 7, 9))
parse_seq(
    s0(_S1), dense=[("clicks", "int64", [2], True)], context_dense=[("age", "float", [], required("float"))]
)
parse_seq(batch(_S1, _S3), dense=[("clicks", "int64", [2], False)])
parse_seq(batch(_S1), dense=[("clicks", "int64", [3], True)])
parse_seq(batch(_S1), dense=[("clicks", "float", [2], True)])
parse_seq(batch(_S1), sparse=[("words", "int64")])
parse_seq(batch(_S1, _S2), dense=[("words", "string", [], True)], names=s("x", "y"))
parse_seq(batch(seq_ex({}, {"w": [["a"], [1]]})), sparse=[("w", "string")], names=s("x"))

rec(
    "ParseSequenceExample",
    batch(_S1, _S2),
    NO_NAMES,
    [default("float", -1.0)],
    feature_list_dense_missing_assumed_empty=["clicks"],
    context_sparse_keys=["user"],
    context_dense_keys=["age"],
    feature_list_sparse_keys=["words"],
    feature_list_dense_keys=["clicks"],
    Ncontext_sparse=1,
    Ncontext_dense=1,
    Nfeature_list_sparse=1,
    Nfeature_list_dense=1,
    context_sparse_types=[dt("string")],
    feature_list_dense_types=[dt("int64")],
    context_dense_shapes=[[]],
    feature_list_sparse_types=[dt("string")],
    feature_list_dense_shapes=[[2]],
)
rec(
    "ParseSingleSequenceExample",
    s0(_S1),
    s("clicks"),
    [s0("user")],
    [s0("age")],
    [s0("words")],
    [s0("clicks")],
    [default("float", -1.0)],
    s0(""),
    context_sparse_types=[dt("string")],
    feature_list_dense_types=[dt("int64")],
    context_dense_shapes=[[]],
    feature_list_sparse_types=[dt("string")],
    feature_list_dense_shapes=[[2]],
)
parse_seq(batch(_S1, _S2, _S3), dense=[("clicks", "int64", [2], True)], context_sparse=[("user", "string")])
