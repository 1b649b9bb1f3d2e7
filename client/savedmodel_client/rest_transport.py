"""TF Serving's REST API under the high-level client's calls, over the standard library's HTTP.

Predict sends the columnar form (``{"inputs": ...}``), bytes as ``{"b64": ...}``; JSON carries
no dtypes, so outputs take the dtypes the signature declares (the client passes the signature
it read from the metadata). TF Serving's REST API has no output filter: the server answers every
output and the client keeps those asked for. One keep-alive connection per thread; TLS through an
``ssl.SSLContext`` with the client's CA and certificate. MultiInference has no REST API in TF
Serving: UNIMPLEMENTED, as the server would answer.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import threading
from urllib.parse import urlsplit

import numpy as np

from savedmodel_client import dtypes
from savedmodel_client.errors import ServingError

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class RestTransport:
    """The calls against ``address`` ("host:port" or an http(s):// URL)."""

    def __init__(self, address: str, *, tls=None, headers=None) -> None:
        self._headers = dict(headers or {})
        url = urlsplit(address if "://" in address else ("https://" if tls else "http://") + address)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not a REST address: {address!r}")
        self._host, self._port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        self._prefix = url.path.rstrip("/")
        self._context = _ssl_context(tls) if url.scheme == "https" else None
        self._server_name = tls.server_name if tls is not None else None
        self._local = threading.local()

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    # -- calls

    def predict(self, spec, inputs: dict, output_filter, signature, timeout) -> dict[str, np.ndarray]:
        document = {"inputs": {alias: _json_value(value) for alias, (value, _) in inputs.items()}}
        if spec.signature_name:
            document["signature_name"] = spec.signature_name
        answer = self._request("POST", spec.rest_path() + ":predict", document, timeout)
        outputs = answer.get("outputs")
        names = sorted(signature.outputs) if signature is not None else list(output_filter or ())
        if len(names) == 1 and not (isinstance(outputs, dict) and names[0] in outputs):
            outputs = {names[0]: outputs}  # one output: TF Serving writes its value alone
        if not isinstance(outputs, dict):
            raise ServingError("INTERNAL", f"unexpected predict response: {str(answer)[:200]}")
        declared = signature.outputs if signature is not None else {}
        if output_filter:
            missing = [name for name in output_filter if name not in outputs]
            if missing:
                raise ServingError(
                    "INVALID_ARGUMENT", f"output tensor alias not found in signature: {missing[0]}"
                )
            outputs = {name: outputs[name] for name in output_filter}
        return {name: _array(value, declared.get(name)) for name, value in sorted(outputs.items())}

    def classify(self, spec, examples, context, timeout) -> list[list[tuple[str, float]]]:
        answer = self._request(
            "POST", spec.rest_path() + ":classify", _examples_document(spec, examples, context), timeout
        )
        return [[(str(label), float(score)) for label, score in row] for row in answer["results"]]

    def regress(self, spec, examples, context, timeout) -> np.ndarray:
        answer = self._request(
            "POST", spec.rest_path() + ":regress", _examples_document(spec, examples, context), timeout
        )
        return np.array(answer["results"], np.float32).reshape(-1)

    def multi_inference(self, spec, tasks, examples, context, timeout) -> list:
        raise ServingError(
            "UNIMPLEMENTED", "MultiInference has no REST API in TF Serving: use the gRPC transport"
        )

    def metadata(self, spec, timeout) -> dict:
        answer = self._request("GET", spec.rest_path() + "/metadata", None, timeout)
        signatures = answer.get("metadata", {}).get("signature_def", {})
        return {
            "model_spec": answer.get("model_spec", {}),
            "signature_def": signatures.get("signature_def", {}),
        }

    def status(self, spec, timeout) -> list[dict]:
        answer = self._request("GET", spec.rest_path(), None, timeout)
        return [
            {
                "version": int(entry.get("version", 0)),
                "state": entry.get("state", "UNKNOWN"),
                "error_code": entry.get("status", {}).get("error_code", "OK"),
                "error_message": entry.get("status", {}).get("error_message", ""),
            }
            for entry in answer.get("model_version_status", [])
        ]

    # -- HTTP

    def _request(self, method: str, path: str, document, timeout) -> dict:
        body = None if document is None else json.dumps(document).encode()
        headers = {"Content-Type": "application/json", **self._headers} if body is not None else self._headers
        for attempt in (0, 1):  # a kept-alive connection the server closed: once more on a new one
            connection, reused = self._connection(timeout)
            try:
                connection.request(method, self._prefix + path, body, headers)
                response = connection.getresponse()
                payload = response.read()
                break
            except _STALE as error:
                self.close()
                if not reused or attempt:
                    raise ServingError(
                        "UNAVAILABLE", f"connection to {self._host}:{self._port} lost: {error}"
                    ) from None
            except TimeoutError:
                self.close()
                raise ServingError("DEADLINE_EXCEEDED", "Deadline Exceeded") from None
            except ssl.SSLError as error:
                self.close()
                raise ServingError(
                    "UNAVAILABLE", f"TLS handshake with {self._host}:{self._port} failed: {error}"
                ) from None
            except OSError as error:
                self.close()
                raise ServingError(
                    "UNAVAILABLE", f"failed to connect to {self._host}:{self._port}: {error}"
                ) from None
        if response.will_close:
            self.close()
        try:
            answer = json.loads(payload) if payload else {}
        except ValueError:
            answer = {"error": payload[:1024].decode("utf-8", "replace")}
        if response.status != 200:
            message = answer.get("error", "") if isinstance(answer, dict) else str(answer)
            raise ServingError.from_http(response.status, message)
        return answer

    def _connection(self, timeout) -> tuple[http.client.HTTPConnection, bool]:
        connection = getattr(self._local, "connection", None)
        reused = connection is not None
        if connection is None:
            if self._context is not None:
                connection = http.client.HTTPSConnection(self._host, self._port, context=self._context)
                if self._server_name:  # the name the certificate carries, where it is not the host's
                    connection.host = self._server_name
                    connection._create_connection = _connect_to(self._host, self._port)
            else:
                connection = http.client.HTTPConnection(self._host, self._port)
            self._local.connection = connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection, reused


def _connect_to(host: str, port: int):
    def create(address, timeout=None, source_address=None):
        return socket.create_connection((host, port), timeout, source_address)

    return create


def _ssl_context(tls) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if tls is not None:
        if tls.root_certificates:
            context.load_verify_locations(cadata=tls.root_certificates.decode())
        if tls.certificate_chain:
            _load_client_certificate(context, tls.certificate_chain, tls.private_key)
    return context


def _load_client_certificate(context: ssl.SSLContext, chain: bytes, key: bytes | None) -> None:
    """ssl reads certificates only from files: written to private temporary files, then removed."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        paths = []
        for name, data in (("chain.pem", chain), ("key.pem", key)):
            if data is None:
                paths.append(None)
                continue
            path = os.path.join(directory, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                out.write(data)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1])


def _json_value(value):
    """An input as JSON: nested lists, bytes as {"b64": ...}."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            return _json_strings(value.tolist())
        if value.dtype.kind == "c":
            raise ServingError(
                "INVALID_ARGUMENT", "complex tensors have no JSON form in TF Serving's REST API"
            )
        return value.astype(np.float64).tolist() if value.dtype.kind in "fV" else value.tolist()
    if isinstance(value, np.generic):
        return _json_value(np.asarray(value))
    return _json_strings(value)


def _json_strings(value):
    if isinstance(value, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [_json_strings(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_value(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _array(value, dtype: int | None) -> np.ndarray:
    """A JSON output as an array of the signature's dtype (strings as bytes, b64 decoded)."""
    if dtype == dtypes.string.as_datatype_enum:
        flat = _strings(value)
        array = np.empty(len(flat), dtype=object)
        array[:] = flat
        return array.reshape(_shape(value))
    if dtype is None:
        return np.asarray(value)
    try:
        target = np.dtype(dtypes.as_dtype(dtype).as_numpy_dtype)
    except (TypeError, ValueError, ImportError):
        return np.asarray(value)
    return np.asarray(value, dtype=np.float64 if target.kind in "fV" else None).astype(target)


def _strings(value) -> list[bytes]:
    if isinstance(value, list):
        return [item for v in value for item in _strings(v)]
    if isinstance(value, dict) and "b64" in value:
        return [base64.b64decode(value["b64"])]
    return [str(value).encode()]


def _shape(value) -> tuple[int, ...]:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return tuple(shape)


def _examples_document(spec, examples, context) -> dict:
    document = {"examples": [_example_json(e) for e in examples]}
    if context is not None:
        document["context"] = _example_json(context)
    if spec.signature_name:
        document["signature_name"] = spec.signature_name
    return document


def _example_json(example) -> dict:
    """An Example as TF Serving's REST API reads one: a value or a list per feature, bytes as b64."""
    out = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        if kind == "bytes_list":
            values = [_b64_object(v) for v in feature.bytes_list.value]
        elif kind == "float_list":
            values = [float(v) for v in feature.float_list.value]
        elif kind == "int64_list":
            values = list(feature.int64_list.value)
        else:
            values = []
        out[name] = values
    return out


def _b64_object(value: bytes):
    return {"b64": base64.b64encode(value).decode("ascii")}
