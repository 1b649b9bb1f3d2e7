#!/opt/model_server/bin/python
"""The image's HEALTHCHECK: healthy while the server says it is ready to serve.

The ports are the server's own flags, read from its command line in /proc (the entrypoint
execs the server, so the flags `docker run` appended are there; the last of a flag wins, as in
the server's parser), so the check follows `--rest_api_port=...` or `--port=...` overrides:

- REST on (``--rest_api_port`` not 0, the image's default 8501): ``GET /readyz`` answers 200
  (every configured model has a version available; 503 while loading or draining);
- REST off: the gRPC health service answers SERVING for the whole server ("").

Exit status 0 healthy, 1 not (Docker's contract); the reason is printed for `docker inspect`.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

SERVER_PROGRAMS = ("tensorflow_model_server", "model_server")
TIMEOUT_SECONDS = 4.0


def server_args(proc: str = "/proc") -> list[str]:
    """The arguments of the oldest process running the server (with --num_workers, the
    supervisor; its workers have the same ports)."""
    pids = sorted(int(name) for name in os.listdir(proc) if name.isdigit())
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        for i, arg in enumerate(argv[:3]):
            if os.path.basename(arg) in SERVER_PROGRAMS:
                return argv[i + 1 :]
    raise LookupError("no model server process found")


def flag(args: list[str], name: str, default: str) -> str:
    """The last value of ``--name=value`` or ``--name value``, else ``default``."""
    value = default
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
    return value


def check_rest(host: str, port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/readyz", timeout=TIMEOUT_SECONDS) as reply:
            return None if reply.status == 200 else f"/readyz answered {reply.status}"
    except urllib.error.HTTPError as e:
        return f"/readyz answered {e.code}: {e.read()[:200]!r}"
    except OSError as e:
        return f"/readyz on port {port}: {e}"


def check_grpc(host: str, port: int) -> str | None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"{host}:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT_SECONDS
            )
        except grpc.RpcError as e:
            return f"gRPC health on port {port}: {e.code().name} {e.details()}"
    serving = reply.status == health_pb2.HealthCheckResponse.SERVING
    return (
        None if serving else f"gRPC health: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
    )


def main() -> int:
    try:
        args = server_args()
    except LookupError as e:
        print(e)
        return 1
    host = flag(args, "grpc_bind_address", "0.0.0.0")
    host = "127.0.0.1" if host in ("", "0.0.0.0", "::", "[::]") else host
    rest_port = int(flag(args, "rest_api_port", "0"))
    if rest_port:
        problem = check_rest(host, rest_port)
    else:
        problem = check_grpc(host, int(flag(args, "port", "8500")))
    print(problem or "ready")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
