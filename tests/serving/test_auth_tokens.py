"""Bearer tokens (``serving/resources/auth.py``): the file's format, the checks and their codes."""

from __future__ import annotations

import pytest

from runtime import errors
from serving.resources import auth


def test_the_token_file_format():
    table = auth.parse_tokens("# comment\n\n  tok-a  \ntok-b m1,m2\ntok-c m3 m4, m5\n#tok-d\n")
    assert len(table) == 3
    assert table[auth._digest("tok-a")] is auth.EVERY_MODEL
    assert table[auth._digest("tok-b")] == {"m1", "m2"}
    assert table[auth._digest("tok-c")] == {"m3", "m4", "m5"}
    assert auth._digest("#tok-d") not in table and auth._digest("tok-d") not in table


@pytest.mark.parametrize(
    "header, token",
    [
        ("Bearer abc", "abc"),
        ("bearer   abc ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer(header, token):
    assert auth.bearer(header) == token


def test_authorize(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("all\nsome m1\n")
    tokens = auth.TokenFile(str(path))
    tokens.authorize("Bearer all", ("m1", "m9"))
    tokens.authorize("Bearer all", auth.EVERY_MODEL)
    tokens.authorize("Bearer some", ("m1",))
    for header, models, error in (
        (None, ("m1",), errors.UnauthenticatedError),
        ("Bearer nope", ("m1",), errors.UnauthenticatedError),
        ("Bearer som", ("m1",), errors.UnauthenticatedError),
        ("Bearer some", ("m2",), errors.PermissionDeniedError),
        ("Bearer some", ("m1", "m2"), errors.PermissionDeniedError),
        ("Bearer some", auth.EVERY_MODEL, errors.PermissionDeniedError),
    ):
        with pytest.raises(error):
            tokens.authorize(header, models)


def test_an_unreadable_file_fails_at_once(tmp_path):
    with pytest.raises(errors.InvalidArgumentError, match="--auth_token_file: cannot read"):
        auth.TokenFile(str(tmp_path / "missing"))
