"""A reference TF Serving for tests: TF Serving's gRPC and REST APIs over TensorFlow 2.21 itself.

Clients are tested against this program as if against TF Serving: ``inference.py`` follows TF
Serving's request path over TensorFlow's own Session, ``rest_api.py`` its HTTP API; this file holds
the gRPC services and the process. It runs in the oracle venv (TensorFlow and
``tensorflow-serving-api``) and never imports the package under test::

    python server.py --port P --rest_api_port R --model NAME=BASE_PATH [--model ...]
        [--label NAME:LABEL=VERSION ...] [--ssl_cert F --ssl_key F [--ssl_ca F]]

Every numeric version directory under BASE_PATH is loaded at start; "latest" is the highest.
Both ports bind 127.0.0.1 only; one line ``READY`` goes to stdout once both serve; SIGTERM or
SIGINT stops it (exit status 0). With ``--ssl_ca`` both transports require a client certificate
signed by that CA. Not implemented: model reloading and config files, ``--rest_api_timeout_in_ms``
(fixed at TF Serving's default), batching, monitoring, the KServe protocol.
"""

from __future__ import annotations

import argparse
import logging
import signal
import ssl
import sys
import threading
from concurrent import futures
from dataclasses import dataclass

import grpc
from inference import (
    C,
    ServerCore,
    ServingError,
    classify,
    get_model_metadata,
    get_model_status,
    load_core,
    multi_inference,
    predict,
    regress,
)
from rest_api import RestServer
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

logger = logging.getLogger("tfs_reference.server")


@dataclass(frozen=True)
class TLSFiles:
    """The --ssl_* flags: a server certificate and key, and the CA client certificates must chain to."""

    cert: str
    key: str
    ca: str | None

    def read(self, which: str) -> bytes | None:
        path = getattr(self, which)
        if path is None:
            return None
        with open(path, "rb") as f:
            return f.read()

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        if self.ca:
            context.load_verify_locations(self.ca)
            context.verify_mode = ssl.CERT_REQUIRED
        return context


def _grpc_method(fn):
    """The one error wrapper: ServingError -> its status; the call's deadline -> Session.run's
    timeout, as TF Serving's PredictionServiceImpl sets ``RunOptions.timeout_in_ms``."""

    def handler(self, request, context):
        try:
            return fn(self.core, request, context.time_remaining())
        except ServingError as e:
            context.abort(e.code, e.message)
        except Exception as e:  # noqa: BLE001 - a bug here is reported, not hidden as UNKNOWN
            logger.exception("%s failed", fn.__name__)
            context.abort(C.INTERNAL, f"{type(e).__name__}: {e}")

    return handler


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, core: ServerCore):
        self.core = core

    Predict = _grpc_method(predict)
    Classify = _grpc_method(classify)
    Regress = _grpc_method(regress)
    MultiInference = _grpc_method(multi_inference)
    GetModelMetadata = _grpc_method(get_model_metadata)


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, core: ServerCore):
        self.core = core

    GetModelStatus = _grpc_method(get_model_status)


def start_grpc(core: ServerCore, port: int, tls: TLSFiles | None) -> grpc.Server:
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=options)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(core), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(core), server)
    address = f"127.0.0.1:{port}"
    if tls is None:
        bound = server.add_insecure_port(address)
    else:
        credentials = grpc.ssl_server_credentials(
            [(tls.read("key"), tls.read("cert"))],
            root_certificates=tls.read("ca"),
            require_client_auth=bool(tls.ca),
        )
        bound = server.add_secure_port(address, credentials)
    if not bound:
        raise SystemExit(f"cannot bind gRPC to {address}")
    server.start()
    return server


def parse_flags(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="gRPC port")
    parser.add_argument("--rest_api_port", type=int, required=True)
    parser.add_argument("--model", action="append", default=[], required=True, help="NAME=BASE_PATH")
    parser.add_argument("--label", action="append", default=[], help="NAME:LABEL=VERSION")
    parser.add_argument("--ssl_cert")
    parser.add_argument("--ssl_key")
    parser.add_argument("--ssl_ca", help="require client certificates signed by this CA")
    args = parser.parse_args(argv)
    if bool(args.ssl_cert) != bool(args.ssl_key) or (args.ssl_ca and not args.ssl_cert):
        parser.error("--ssl_cert and --ssl_key go together; --ssl_ca needs them")
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("tensorflow").propagate = False  # it has a handler of its own
    args = parse_flags(argv)
    models = dict(m.split("=", 1) for m in args.model)
    labels: dict[str, dict[str, int]] = {}
    for flag in args.label:
        target, _, version = flag.partition("=")
        name, _, label = target.rpartition(":")
        labels.setdefault(name, {})[label] = int(version)
    tls = TLSFiles(args.ssl_cert, args.ssl_key, args.ssl_ca) if args.ssl_cert else None
    stop = threading.Event()  # set before loading: a SIGTERM while loading still exits cleanly
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    core = load_core(models, labels)
    grpc_server = start_grpc(core, args.port, tls)
    rest_server = RestServer(args.rest_api_port, core, tls.ssl_context() if tls else None)
    threading.Thread(target=rest_server.serve_forever, name="rest", daemon=True).start()
    print("READY", flush=True)
    while not stop.wait(0.5):
        pass
    rest_server.shutdown()
    rest_server.server_close()
    grpc_server.stop(grace=1).wait()
    for versions in core.servables.values():
        for servable in versions.values():
            servable.session.close()
    logger.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
