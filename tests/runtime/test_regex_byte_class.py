"""The byte-class fast path of StaticRegexReplace / RegexReplace against RE2's general replace.

A pattern that is one bracket expression of ASCII characters (Keras' TextVectorization strips
punctuation with one) is run as a byte translation (``regex_ops.byte_class``); every other pattern
runs in RE2. The two must give the same bytes on any input: text, other scripts, invalid UTF-8.
"""

from __future__ import annotations

import numpy as np
import pytest

from runtime import kernels
from runtime.kernels.regex_ops import byte_class, compile_re2, global_replace

KERAS_STRIP = rb"""[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']"""
CLASSES = [KERAS_STRIP, b"[a-c]", b"[-a]", b"[a-]", rb"[a\-c]", b"[a-c-e]", b"[ ]", rb"[\]\[]", b"[,-.]"]
NOT_CLASSES = [
    b"[^a]",
    rb"[\d]",
    b"[[:punct:]]",
    b"[a]+",
    rb"[ab\]",
    b"[]a]",
    b"a",
    b"[\xc3\xa9]",
    b"(?i)[a]",
    b"[\t]",
]


def _texts(seed: int, count: int = 400) -> list[bytes]:
    rng = np.random.default_rng(seed)
    alphabet = [bytes([b]) for b in range(128)] + [
        "é".encode(),
        "中".encode(),
        "😀".encode(),
        b"\xff",
        b"\xc3",
        b"\x80",
    ]
    texts = [b"", b"Hello, World! It's 5.0 - [ok]", "naïve café — ‘quoted’".encode()]
    for _ in range(count):
        texts.append(b"".join(alphabet[i] for i in rng.integers(0, len(alphabet), rng.integers(0, 24))))
    return texts


@pytest.mark.parametrize("pattern", CLASSES)
@pytest.mark.parametrize("rewrite", [b"", b" ", b"x"])
def test_a_byte_class_replaces_as_re2_does(pattern, rewrite):
    assert byte_class(pattern) is not None
    texts = _texts(len(pattern))
    general = [global_replace(t, compile_re2(pattern), rewrite) for t in texts]
    fast = kernels.load_all()["StaticRegexReplace"].fn(
        np.array(texts, dtype=object), pattern=pattern, rewrite=rewrite
    )
    assert fast.tolist() == general
    dynamic = kernels.load_all()["RegexReplace"].fn(
        np.array(texts, dtype=object), np.array(pattern, dtype=object), np.array(rewrite, dtype=object)
    )
    assert dynamic.tolist() == general


@pytest.mark.parametrize("pattern", NOT_CLASSES)
def test_other_patterns_run_in_re2(pattern):
    assert byte_class(pattern) is None


def test_a_class_and_its_members():
    assert byte_class(KERAS_STRIP) == b"".join(
        sorted(bytes([c]) for c in b"""!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~""")
    )
    assert byte_class(b"[a-c-e]") == b"-abce"  # a range, then ``-`` and ``e`` themselves
    assert byte_class(rb"[a\-c]") == b"-ac"  # an escaped ``-`` is no range


def test_multi_byte_and_backslash_rewrites_take_re2s_path():
    texts = np.array([b"a,b", b"x.y"], dtype=object)
    fn = kernels.load_all()["StaticRegexReplace"].fn
    assert fn(texts, pattern=b"[,.]", rewrite=b"--").tolist() == [b"a--b", b"x--y"]
    assert fn(texts, pattern=b"[,.]", rewrite=b"<\\0>").tolist() == [b"a<,>b", b"x<.>y"]
    assert fn(texts, pattern=b"[,.]", rewrite=b"", replace_global=False).tolist() == [b"ab", b"xy"]
