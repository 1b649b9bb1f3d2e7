"""A local S3-compatible server for end-to-end tests: moto's server mode on loopback, and a TCP
proxy in front of it that a test can take down and bring back (an outage of the endpoint
without losing the bucket's contents)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

from tests.e2e.conftest import free_port

BUCKET = "models-bucket"  # made by the ``s3`` fixture (conftest.py)
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing-key", "AWS_SECRET_ACCESS_KEY": "testing-secret-do-not-log"}


class MotoServer:
    """``python -m moto.server`` on 127.0.0.1; stopped by its pid."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "moto's S3 server did not start (is moto[server] installed?)"
                    ) from None
                time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Proxy:
    """Forwards 127.0.0.1:<port> to ``target_port``; ``down()`` closes every connection and
    refuses new ones (each is closed as soon as it is accepted) until ``up()``."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self._target = target_port
        self._down = threading.Event()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def down(self) -> None:
        self._down.set()
        with self._lock:
            for conn in self._conns:
                _close(conn)
            self._conns.clear()

    def up(self) -> None:
        self._down.clear()

    def close(self) -> None:
        self.down()
        _close(self._listener)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._down.is_set():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    _close(source)
    _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
