"""How the server leaves: lame duck, refusal, the calls it admitted, then the process.

grpcio's ``server.stop(grace)`` lets calls already running finish, but the gRPC core cancels
every call that reaches it from then on, and those it holds not yet handed to a worker: clients
see CANCELLED, which they do not retry (measured: up to 14 calls per SIGTERM at concurrency 16,
and still some with every other phase below in place, as long as clients keep sending). A
process that ends without that stop leaves its clients UNAVAILABLE instead (the connection
closes), which they retry. So on SIGTERM the server leaves in phases of its own:

1. Lame duck (``--lame_duck_seconds``): health (gRPC Health, REST readiness) turns NOT_SERVING
   at once while every request is still answered, so load balancers and health-checking
   clients stop sending here.
2. Refusal: a request that arrives now is answered UNAVAILABLE (REST: 503) at once, and calls
   already admitted run to their end. The phase lasts until no request has arrived for
   ``QUIET_SECONDS`` (or ``MAX_REFUSAL_SECONDS``) and no admitted call is left (``wait_idle``).
3. The transports close (REST answers what it received first) and the process exits
   (``exit_process``) without grpcio's stop: a call that still reaches it meets a closed
   connection, never a cancellation.

Transports ask ``refusing`` per request (a plain attribute read), call ``refused()`` when they
turn one away, and hold ``admitted`` from the admission of each call until it ends (a list's
append and pop: atomic under the GIL, no lock). For gRPC that is when the RPC terminates, its
answer written, not when its handler returns: a 120 MB answer takes longer to leave than any
fixed wait. The same admission bounds the bytes of large requests in flight
(``request_bytes``, ``serving/resources/request_bytes.py``). From the signal on (``draining``) HTTP answers close their connection, so that no
client is left sending on a kept-alive connection the server is about to close. Thread-safe. A second signal during the drain ends the process at once.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable

from serving.resources.request_bytes import UNLIMITED, RequestBytes

logger = logging.getLogger(__name__)

QUIET_SECONDS = 0.1
MAX_REFUSAL_SECONDS = 2.0
FLUSH_SECONDS = 0.2  # a margin for the last answers' bytes to leave after their calls ended
REFUSAL_MESSAGE = "Server is shutting down"


class Drain:
    """The shutdown phases shared by every transport of one server."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, request_bytes: RequestBytes = UNLIMITED
    ) -> None:
        self.request_bytes = request_bytes  # the bytes of large requests in flight, bounded
        self.draining = False  # from the signal on: answers ask clients to reconnect
        self.refusing = False
        self.admitted: list[None] = []  # one entry per call running
        self._clock = clock
        self._last_refused = 0.0

    def refused(self) -> None:
        """A transport turned a request away (it answers UNAVAILABLE with REFUSAL_MESSAGE)."""
        self._last_refused = self._clock()

    def run(self, not_serving: Callable[[], None], lame_duck_seconds: float, grace_seconds: float) -> bool:
        """Phases 1 and 2: ``not_serving()`` (health turns NOT_SERVING), the lame duck, then
        refusal until quiet and the admitted calls are done (up to ``grace_seconds``). True
        when none is left."""
        self.draining = True
        not_serving()
        if lame_duck_seconds > 0:
            logger.info("Lame duck: health reports NOT_SERVING; serving for %.1fs more", lame_duck_seconds)
            time.sleep(lame_duck_seconds)
        self.refusing = True
        self._last_refused = started = self._clock()
        while True:
            now = self._clock()
            if now - self._last_refused >= QUIET_SECONDS or now - started >= MAX_REFUSAL_SECONDS:
                break
            time.sleep(QUIET_SECONDS / 4)
        logger.info("No longer accepting requests")
        idle = self.wait_idle(grace_seconds)
        if not idle:
            logger.warning(
                "%d call(s) still running after the %.0fs grace period", len(self.admitted), grace_seconds
            )
        return idle

    def wait_idle(self, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for the admitted calls to end; True if none is left."""
        deadline = self._clock() + timeout
        while self.admitted and self._clock() < deadline:
            time.sleep(0.005)
        return not self.admitted


def exit_process(code: int) -> None:
    """Ends the process now, ``FLUSH_SECONDS`` after the calls it admitted ended (``wait_idle``): the
    kernel closes its connections, so a call still arriving fails UNAVAILABLE for its client.
    (A normal interpreter exit would let grpcio's server shut down, which cancels them.)"""
    time.sleep(FLUSH_SECONDS)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
