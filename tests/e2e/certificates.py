"""Test certificates made with ``cryptography``: a CA and the certificates it signs (servers
for 127.0.0.1 and localhost, clients), as PEM files in a directory."""

from __future__ import annotations

import datetime
import ipaddress
import json
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class Authority:
    """A CA writing its certificate and the ones it issues under ``directory``."""

    def __init__(self, directory: Path, name: str = "ca") -> None:
        self.directory = directory
        self.name = name
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = self._sign(self.subject, self.key.public_key(), ca=True)
        self.cert_path = directory / f"{name}.pem"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def _sign(self, subject, public_key, *, ca: bool, usage=None, san=None) -> x509.Certificate:
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if usage is not None:
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if san is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(self.key, hashes.SHA256())

    def issue(self, name: str, *, server: bool) -> tuple[Path, Path, int]:
        """(certificate path, key path, serial number) of a new server or client certificate."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        if server:
            san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            cert = self._sign(
                subject, key.public_key(), ca=False, usage=ExtendedKeyUsageOID.SERVER_AUTH, san=san
            )
        else:
            cert = self._sign(subject, key.public_key(), ca=False, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
        cert_path, key_path = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert_path, key_path, cert.serial_number


def ssl_config_text(cert: Path, key: Path, ca: Path | None = None, client_verify: bool = False) -> str:
    """An SSLConfig (TF Serving's text format) holding the files' PEM text."""
    text = f"server_key: {json.dumps(key.read_text())}\nserver_cert: {json.dumps(cert.read_text())}\n"
    if ca is not None:
        text += f"custom_ca: {json.dumps(ca.read_text())}\n"
    if client_verify:
        text += "client_verify: true\n"
    return text


def serial_of(der: bytes) -> int:
    return x509.load_der_x509_certificate(der).serial_number
