"""Bearer tokens (``--auth_token_file``, ours), checked on both ports.

The file holds one token per line, optionally followed by the models it may call (separated by
spaces or commas); a token with no models may call every model and the calls that name none
(``HandleReloadConfigRequest``, ``GET /v1/models``, the metrics page). Blank lines and lines
starting with ``#`` are skipped. The file is read again when it changes (checked at most once a
second), so tokens are added and revoked without a restart; a file that cannot be read keeps the
last tokens (logged).

A call without a token, or with one the file does not hold, is UNAUTHENTICATED (HTTP 401); a
token that may not call the model it names is PERMISSION_DENIED (403). Tokens are kept as their
SHA-256 digests and looked up by digest, so neither a comparison's time nor a log line (none
names a token) tells anything about a token. Health and readiness probes need no token
(``exempt``); the metrics page does unless ``--auth_metrics=false``.

Thread-safe: the table is replaced whole on reload.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time

from runtime import errors

logger = logging.getLogger(__name__)

AUTHORIZATION = "authorization"
EVERY_MODEL = None  # a token's models: None, every model
_RECHECK_SECONDS = 1.0
_SEPARATORS = re.compile(r"[\s,]+")
MISSING = "Missing bearer token: send 'authorization: Bearer <token>'"
INVALID = "Invalid bearer token"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def parse_tokens(text: str) -> dict[bytes, frozenset[str] | None]:
    """Token digest -> the models it may call (None: every one)."""
    table: dict[bytes, frozenset[str] | None] = {}
    for line in text.splitlines():
        fields = [f for f in _SEPARATORS.split(line.strip()) if f]
        if not fields or fields[0].startswith("#"):
            continue
        token, models = fields[0], fields[1:]
        table[_digest(token)] = frozenset(models) if models else EVERY_MODEL
    return table


def bearer(header: str | None) -> str | None:
    """The token of an ``authorization: Bearer <token>`` value (None: no bearer token)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class TokenFile:
    """The tokens of one file, re-read when it changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._stamp = self._stat()
        try:
            with open(path, encoding="utf-8") as f:
                self._table = parse_tokens(f.read())
        except (OSError, UnicodeDecodeError) as e:
            raise errors.InvalidArgumentError(
                None, None, f"--auth_token_file: cannot read {path}: {e}"
            ) from None
        if not self._table:
            logger.warning("--auth_token_file %s holds no token: every call will be refused", path)

    def _stat(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < _RECHECK_SECONDS:
            return
        with self._lock:
            if now - self._checked < _RECHECK_SECONDS:
                return
            self._checked = now
            stamp = self._stat()
            if stamp is None or stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                with open(self.path, encoding="utf-8") as f:
                    self._table = parse_tokens(f.read())
            except (OSError, UnicodeDecodeError) as e:
                logger.error("Keeping the previous tokens: cannot read %s: %s", self.path, e)
                return
        logger.info("Loaded %d token(s) from %s", len(self._table), self.path)

    def authorize(self, header: str | None, models=()) -> None:
        """Raise unless the ``authorization`` header's token may make a call naming ``models``
        (``authenticate``, then ``permit``)."""
        permit(self.authenticate(header), models)

    def authenticate(self, header: str | None) -> frozenset[str] | None:
        """The models the ``authorization`` header's token may call (None: every one);
        UNAUTHENTICATED without a token the file holds."""
        self._refresh()
        token = bearer(header)
        if token is None:
            raise errors.UnauthenticatedError(None, None, MISSING)
        allowed = self._table.get(_digest(token), _UNKNOWN)
        if allowed is _UNKNOWN:
            raise errors.UnauthenticatedError(None, None, INVALID)
        return allowed


def permit(allowed: frozenset[str] | None, models) -> None:
    """PERMISSION_DENIED unless a token allowed ``allowed`` may make a call naming ``models``
    (an iterable of model names; ``EVERY_MODEL``: a call that names none, only for tokens
    allowed every model)."""
    if allowed is EVERY_MODEL:
        return
    if models is EVERY_MODEL:
        raise errors.PermissionDeniedError(None, None, "This token may not make calls that name no model")
    for model in models:
        if model not in allowed:
            raise errors.PermissionDeniedError(None, None, f"This token may not call model '{model}'")


_UNKNOWN = object()

ACTIVE: TokenFile | None = None


def configure(path: str) -> TokenFile | None:
    """Set the process's tokens (none for an empty path); returns them."""
    global ACTIVE
    ACTIVE = TokenFile(path) if path else None
    return ACTIVE
