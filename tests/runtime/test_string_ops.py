"""String ops against TensorFlow: hashes (FarmHash, TF's Hash64, SipHash), AsString's printf
formats, joins and splits, case, Substr, RE2 regexes (``regex_ops``), Unicode decoding
(``unicode_ops``) and base64.

TF's side: ``tests/oracle/builders/breadth_records.py``; shared checks in ``test_parsing_ops``.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from runtime import kernels
from runtime.kernels.hashing import fingerprint_cat64, hash64, siphash24
from tests.runtime.test_parsing_ops import check_record, check_record_through_session, records_of

STRINGS = records_of("string_ops", "regex_ops", "unicode_ops", ops=("StringJoin",))


@pytest.mark.parametrize("record", STRINGS, ids=lambda r: r.name)
def test_string_record(record) -> None:
    check_record(record)


@pytest.mark.parametrize("record", STRINGS, ids=lambda r: r.name)
def test_string_record_through_session(record) -> None:
    check_record_through_session(record)


def test_string_records_cover_the_ops() -> None:
    ops = {r.op for r in STRINGS}
    wanted = {
        "StringToHashBucketFast", "StringToHashBucket", "StringToHashBucketStrong", "AsString", "StringJoin",
        "ReduceJoin", "StringSplit", "StringSplitV2", "StringStrip", "StringLower", "StringUpper", "Substr",
        "StringLength", "RegexReplace", "StaticRegexReplace", "RegexFullMatch", "StaticRegexFullMatch",
        "UnicodeDecode", "UnicodeDecodeWithOffsets", "EncodeBase64", "DecodeBase64", "StringNGrams",
    }  # fmt: skip
    assert wanted <= ops, sorted(wanted - ops)


def test_hashes_are_unsigned_64_bit() -> None:
    for value in (
        hash64(b""),
        hash64(b"abcdefghijk"),
        siphash24(1, 2, b"x"),
        fingerprint_cat64(2**64 - 1, 5),
    ):
        assert 0 <= value < 2**64


def test_siphash_reference_vector() -> None:
    # The SipHash paper's test vector: key 00..0f, message 00..0e.
    key = bytes(range(16))
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    assert siphash24(k0, k1, bytes(range(15))) == 0xA129CA6149BE45E5


def test_a_pattern_that_backtracks_finishes_in_linear_time() -> None:
    """RE2, not a backtracking engine: ``(a+)+$`` over 27 a's and a '!' takes seconds in Python's
    ``re`` (minutes at 30); RE2 answers in microseconds. The bound is generous on purpose."""
    text = np.array([b"a" * 27 + b"!", b"a" * 100_000 + b"!"], dtype=object)
    start = time.perf_counter()
    matched = kernels.lookup("StaticRegexFullMatch").fn(text, pattern="(a+)+$")
    replaced = kernels.lookup("RegexReplace").fn(text, np.array(b"(a*)*$", object), np.array(b"x", object))
    assert time.perf_counter() - start < 1.0
    assert matched.tolist() == [False, False]
    assert [v[-2:] for v in replaced.tolist()] == [b"!x", b"!x"]


def test_re2_posix_classes_and_end_anchor() -> None:
    fn = kernels.lookup("StaticRegexReplace").fn
    out = fn(np.array([b"ab1\n", b"X y"], dtype=object), pattern="[[:alpha:]]+$", rewrite="_")
    assert out.tolist() == [b"ab1\n", b"X _"]
