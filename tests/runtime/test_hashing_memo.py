"""siphash24_memo: the same hashes as siphash24, for repeated strings, across calls and keys, and
after the memo restarts."""

from __future__ import annotations

from runtime.kernels import hashing


def test_memo_gives_siphash24_for_repeats_keys_and_restarts(monkeypatch):
    items = [b"a", b"bb", b"a", b"", b"x" * 20, b"bb"] * 4
    for key in ((1, 2), (3, 4)):
        want = [hashing.siphash24(*key, item) for item in items]
        assert hashing.siphash24_memo(*key, items) == want
        assert hashing.siphash24_memo(*key, items) == want  # from the memo this time
    monkeypatch.setattr(hashing, "_MEMO_SIZE", 2)  # every call overflows: the memo restarts
    more = [b"p", b"q", b"r", b"a"]
    assert hashing.siphash24_memo(1, 2, more) == [hashing.siphash24(1, 2, s) for s in more]
    assert len(hashing._MEMOS[(1, 2)]) <= 4
