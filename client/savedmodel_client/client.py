"""The high-level client: TF Serving's calls with numpy arrays and dicts in and out.

    from savedmodel_client import Client
    with Client("localhost:8500") as client:                     # gRPC; "rest" for port 8501
        outputs = client.predict("half_plus_two", {"x": [1.0, 2.0]})

gRPC and REST answer the same calls with the same values. A call's ``timeout`` (seconds) bounds
it whole, retries included; UNAVAILABLE (the server not up yet, a connection lost, a model
being loaded) is retried with exponential backoff and jitter, nothing else is. Inputs that are
not numpy arrays take the dtype the signature declares (read once from the model's metadata and
kept; a signature the metadata lacks is left to the server to refuse); arrays go as they are.
Every failure is a ``ServingError``.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from savedmodel_client.errors import ServingError
from savedmodel_client.examples import make_example
from savedmodel_client.model_spec import ModelSpec
from savedmodel_client.tensorflow.core.framework import types_pb2

RETRIED = frozenset({"UNAVAILABLE"})


@dataclasses.dataclass(frozen=True)
class TlsConfig:
    """PEM bytes: the CA that signed the server's certificate (None: the system's), and the
    client's certificate and key for servers that verify clients; ``server_name`` overrides the
    name checked against the server's certificate."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Signature:
    """A signature's inputs and outputs as alias -> TF dtype enum."""

    inputs: dict[str, int]
    outputs: dict[str, int]
    method_name: str = ""


class Client:
    """TF Serving's API on ``address`` over ``transport`` "grpc" (the default) or "rest".

    ``timeout``: the default per call (None: none); ``retries``: how many times UNAVAILABLE is
    retried, first after ``backoff`` seconds, doubling up to ``max_backoff``; ``root_certificates``,
    ``certificate_chain``, ``private_key``: PEM bytes or file paths, any of them turning TLS on
    (``tls=True`` alone: TLS with the system's CAs); ``channel_options``: more gRPC channel options
    (messages of any size are allowed by default); ``auth_token``: a bearer token sent with every
    call (``authorization: Bearer ...``, gRPC metadata or an HTTP header).
    """

    def __init__(
        self,
        address: str,
        transport: str = "grpc",
        *,
        timeout: float | None = None,
        retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        tls: bool = False,
        root_certificates=None,
        certificate_chain=None,
        private_key=None,
        server_name: str | None = None,
        channel_options=(),
        auth_token: str | None = None,
    ) -> None:
        pems = [_pem(x) for x in (root_certificates, certificate_chain, private_key)]
        config = TlsConfig(*pems, server_name) if tls or any(pems) or address.startswith("https://") else None
        if transport == "grpc":
            from savedmodel_client.grpc_transport import GrpcTransport

            metadata = (("authorization", f"Bearer {auth_token}"),) if auth_token else ()
            self._transport = GrpcTransport(address, tls=config, options=channel_options, metadata=metadata)
        elif transport == "rest":
            from savedmodel_client.rest_transport import RestTransport

            headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
            self._transport = RestTransport(address, tls=config, headers=headers)
        else:
            raise ValueError(f"transport is 'grpc' or 'rest', not {transport!r}")
        self.transport = transport
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._signatures: dict[ModelSpec, Signature] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    # -- TF Serving's calls

    def predict(
        self,
        model: str,
        inputs: Mapping,
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str = "",
        output_filter=None,
        timeout: float | None = None,
    ) -> dict[str, np.ndarray]:
        """Predict: ``inputs`` maps the signature's input keys to arrays (or lists, scalars,
        strings); returns the outputs by key (those of ``output_filter`` if given)."""
        spec = ModelSpec(model, version, label, signature_name)
        deadline = self._deadline(timeout)
        plain = [alias for alias, value in inputs.items() if not isinstance(value, np.ndarray)]
        signature = self._known_signature(spec, deadline) if plain or self.transport == "rest" else None
        feeds = {}
        for alias, value in inputs.items():
            dtype = signature.inputs.get(alias) if signature is not None and alias in plain else None
            feeds[alias] = (value, dtype)
        return self._retrying(
            lambda t: self._transport.predict(spec, feeds, output_filter, signature, t), deadline
        )

    def classify(
        self, model: str, examples, *, context=None, version=None, label=None, signature_name="", timeout=None
    ) -> list[list[tuple[str, float]]]:
        """Classify tf.Examples (dicts of feature values, or Example protos): (label, score)
        pairs per example."""
        spec = ModelSpec(model, version, label, signature_name)
        examples, context = _examples(examples, context)
        return self._retrying(
            lambda t: self._transport.classify(spec, examples, context, t), self._deadline(timeout)
        )

    def regress(
        self, model: str, examples, *, context=None, version=None, label=None, signature_name="", timeout=None
    ) -> np.ndarray:
        """Regress tf.Examples: one float32 value per example."""
        spec = ModelSpec(model, version, label, signature_name)
        examples, context = _examples(examples, context)
        return self._retrying(
            lambda t: self._transport.regress(spec, examples, context, t), self._deadline(timeout)
        )

    def multi_inference(
        self, model: str, examples, tasks, *, context=None, version=None, label=None, timeout=None
    ) -> list:
        """Several classify / regress signatures on the same examples in one call (gRPC only):
        ``tasks`` are (method, signature_name) pairs, method "classify" or "regress"; the results
        in their order, as ``classify`` and ``regress`` return them."""
        spec = ModelSpec(model, version, label)
        examples, context = _examples(examples, context)
        tasks = [(method, name) for method, name in tasks]
        return self._retrying(
            lambda t: self._transport.multi_inference(spec, tasks, examples, context, t),
            self._deadline(timeout),
        )

    def metadata(self, model: str, *, version=None, label=None, timeout=None) -> dict:
        """GetModelMetadata: ``{"model_spec": {...}, "signature_def": {name: SignatureDef as a
        dict}}``, proto field names kept (as TF Serving's REST API prints them)."""
        spec = ModelSpec(model, version, label)
        return self._retrying(lambda t: self._transport.metadata(spec, t), self._deadline(timeout))

    def status(self, model: str, *, version=None, label=None, timeout=None) -> list[dict]:
        """GetModelStatus: per version ``{"version", "state", "error_code", "error_message"}``."""
        spec = ModelSpec(model, version, label)
        return self._retrying(lambda t: self._transport.status(spec, t), self._deadline(timeout))

    def signature(self, spec: ModelSpec, timeout: float | None = None) -> Signature:
        """The signature ``spec`` names, from the model's metadata (kept per spec)."""
        with self._lock:
            known = self._signatures.get(spec)
        if known is not None:
            return known
        bare = ModelSpec(spec.name, spec.version, spec.label)
        document = self._retrying(lambda t: self._transport.metadata(bare, t), self._deadline(timeout))
        name = spec.signature_name or "serving_default"
        found = document["signature_def"].get(name)
        if found is None:
            raise ServingError("FAILED_PRECONDITION", f'Serving signature key "{name}" not found.')
        signature = Signature(
            {alias: _dtype(info) for alias, info in found.get("inputs", {}).items()},
            {alias: _dtype(info) for alias, info in found.get("outputs", {}).items()},
            found.get("method_name", ""),
        )
        with self._lock:
            self._signatures[spec] = signature
        return signature

    def _known_signature(self, spec: ModelSpec, deadline: float | None) -> Signature | None:
        """The signature, or None where the server would refuse the call: its error is the one to give."""
        try:
            return self.signature(spec, _remaining(deadline))
        except ServingError as error:
            if error.code in RETRIED or error.code == "DEADLINE_EXCEEDED":
                raise
            return None

    # -- deadlines and retries

    def _deadline(self, timeout: float | None) -> float | None:
        timeout = self.timeout if timeout is None else timeout
        return None if timeout is None else time.monotonic() + timeout

    def _retrying(self, call, deadline: float | None):
        attempt = 0
        while True:
            try:
                return call(_remaining(deadline))
            except ServingError as error:
                if error.code not in RETRIED or attempt >= self.retries:
                    raise
                pause = min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)
                attempt += 1


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise ServingError("DEADLINE_EXCEEDED", "Deadline Exceeded")
    return left


def _examples(examples, context):
    if isinstance(examples, Mapping):
        raise TypeError("examples are a list of dicts (or Example protos), not one dict")
    return [make_example(e) for e in examples], None if context is None else make_example(context)


def _dtype(info: dict) -> int:
    name = info.get("dtype", "DT_INVALID")
    return types_pb2.DataType.Value(name) if isinstance(name, str) else int(name)


def _pem(value) -> bytes | None:
    """PEM bytes as given, or read from a path."""
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()
