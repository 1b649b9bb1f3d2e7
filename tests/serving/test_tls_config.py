"""SSLConfig files (``serving/resources/tls.py``): checked at start-up, refreshed on change."""

from __future__ import annotations

import pytest

from runtime import errors
from serving.resources import tls
from tests.e2e.certificates import Authority, ssl_config_text


@pytest.fixture
def pki(tmp_path):
    ca = Authority(tmp_path)
    return ca, ca.issue("a", server=True), ca.issue("b", server=True)


def test_a_good_config_reads_and_a_changed_one_is_refreshed(tmp_path, pki):
    ca, (cert_a, key_a, _), (cert_b, key_b, _) = pki
    path = tmp_path / "ssl.config"
    path.write_text(ssl_config_text(cert_a, key_a, ca.cert_path, client_verify=True))
    config = tls.SslConfigFile(str(path), "ssl_config_file")
    assert config.material.client_verify and config.material.server_cert == cert_a.read_bytes()
    assert not config.refresh()  # unchanged
    path.write_text(ssl_config_text(cert_b, key_a))  # a mismatched pair: kept the old
    assert not config.refresh() and config.material.server_cert == cert_a.read_bytes()
    path.write_text(ssl_config_text(cert_b, key_b, ca.cert_path, client_verify=True))
    assert config.refresh() and config.material.server_cert == cert_b.read_bytes()
    context = config.server_context()
    assert config.reload_context(context) is False


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda a, b, ca: ssl_config_text(a[0], b[1]), "the server_key does not match the server_cert"),
        (lambda a, b, ca: ssl_config_text(a[0], a[1], client_verify=True), "client_verify needs a custom_ca"),
        (lambda a, b, ca: 'server_cert: "x"\n', "server_key and server_cert are required"),
        (lambda a, b, ca: "not a proto {", "is not an SSLConfig"),
    ],
)
def test_bad_configs_are_one_clear_error(tmp_path, pki, make, message):
    ca, a, b = pki
    path = tmp_path / "ssl.config"
    path.write_text(make(a, b, ca))
    with pytest.raises(errors.InvalidArgumentError, match=message):
        tls.read_ssl_config(str(path), "rest_api_ssl_config_file")
