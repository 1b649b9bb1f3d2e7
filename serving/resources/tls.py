"""TLS credentials from an SSLConfig file (TF Serving's ``--ssl_config_file`` format), checked at
start-up and picked up again when the file changes (certificate rotation without a restart).

An SSLConfig holds the PEM text of the server's key and certificate chain, a CA and whether
clients must present a certificate signed by it. ``SslConfigFile`` reads one, and proves the key
and certificate with Python's ``ssl`` module before anything serves: a mismatched key, a
certificate that is no PEM, or ``client_verify`` without a CA is one clear error at start-up
instead of every handshake failing later. ``refresh()`` re-reads the file when its mtime, size
or inode changed (a rewrite, or a Kubernetes secret's symlink swap); a new config that fails the
same checks is logged and the last good one kept, so a half-written rotation never takes the
port down. gRPC asks for a fresh config at each handshake (``grpc.dynamic_ssl_server_credentials``,
``serving/server.py``); REST's ``ssl.SSLContext`` is reloaded in place (``reload_context``).

Thread-safe: ``refresh`` may race with itself (both read the same file; one result wins).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
import tempfile
import threading

from google.protobuf import text_format

from apis.tensorflow_serving.config import ssl_config_pb2
from runtime import errors

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TlsMaterial:
    """What an SSLConfig says, as PEM bytes."""

    server_key: bytes
    server_cert: bytes
    custom_ca: bytes | None
    client_verify: bool


def read_ssl_config(path: str, flag: str) -> TlsMaterial:
    """The SSLConfig at ``path``, checked (``check``); InvalidArgumentError naming ``flag``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise errors.InvalidArgumentError(None, None, f"--{flag}: cannot read {path}: {e}") from None
    try:
        config = text_format.Parse(text, ssl_config_pb2.SSLConfig())
    except text_format.ParseError as e:
        raise errors.InvalidArgumentError(None, None, f"--{flag}: {path} is not an SSLConfig: {e}") from None
    material = TlsMaterial(
        config.server_key.encode(),
        config.server_cert.encode(),
        config.custom_ca.encode() or None,
        config.client_verify,
    )
    check(material, f"--{flag} ({path})")
    return material


def check(material: TlsMaterial, what: str) -> None:
    """InvalidArgumentError unless the key and certificate load and match, and the CA loads."""
    if not material.server_key or not material.server_cert:
        raise errors.InvalidArgumentError(None, None, f"{what}: server_key and server_cert are required")
    if material.client_verify and not material.custom_ca:
        raise errors.InvalidArgumentError(
            None, None, f"{what}: client_verify needs a custom_ca to verify with"
        )
    try:
        load_into(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), material)
    except (ssl.SSLError, ValueError) as e:
        reason = (
            "the server_key does not match the server_cert" if "KEY_VALUES_MISMATCH" in str(e) else str(e)
        )
        raise errors.InvalidArgumentError(None, None, f"{what}: {reason}") from None


def load_into(context: ssl.SSLContext, material: TlsMaterial) -> None:
    """Load the key, certificate chain and CA into ``context`` (ssl reads keys only from files:
    written to a private temporary directory, removed at once)."""
    with tempfile.TemporaryDirectory(prefix="tls-") as directory:
        paths = []
        for name, data in (("cert.pem", material.server_cert), ("key.pem", material.server_key)):
            path = os.path.join(directory, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                out.write(data)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1])
    if material.custom_ca:
        context.load_verify_locations(cadata=material.custom_ca.decode())


class SslConfigFile:
    """One SSLConfig file and its last good contents (``material``)."""

    def __init__(self, path: str, flag: str) -> None:
        self.path, self.flag = path, flag
        self._stamp = self._stat()
        self.material = read_ssl_config(path, flag)
        self._lock = threading.Lock()

    def _stat(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def refresh(self) -> bool:
        """Re-read the file if it changed; True when new, good material replaced the old."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return False
        with self._lock:
            if stamp == self._stamp:
                return False
            self._stamp = stamp
            try:
                material = read_ssl_config(self.path, self.flag)
            except errors.InvalidArgumentError as e:
                logger.error("Keeping the previous TLS certificate: %s", e.message)
                return False
            if material == self.material:
                return False
            if material.client_verify != self.material.client_verify:
                logger.error("Keeping client_verify=%s until a restart", self.material.client_verify)
                material = dataclasses.replace(material, client_verify=self.material.client_verify)
            self.material = material
        logger.info("Loaded a new TLS certificate from %s", self.path)
        return True

    def server_context(self) -> ssl.SSLContext:
        """A server-side SSLContext of the current material (clients verified if it says so)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        load_into(context, self.material)
        if self.material.client_verify:
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def reload_context(self, context: ssl.SSLContext) -> bool:
        """``refresh``, and load new material into ``context`` (connections accepted after it
        get the new certificate; open ones keep theirs). True if it changed."""
        if not self.refresh():
            return False
        load_into(context, self.material)
        return True
