"""How the server leaves: lame duck, refusal, then the transports' own graceful stop.

grpcio's ``server.stop(grace)`` lets calls already running finish, but the gRPC core cancels
every call that reaches it from then on, and those it holds not yet handed to a worker: clients
see CANCELLED, which they do not retry (measured: up to 14 calls per SIGTERM at concurrency 16).
So on SIGTERM the server first leaves in two phases of its own, as production servers do:

1. Lame duck (``--lame_duck_seconds``): health (gRPC Health, REST readiness) turns NOT_SERVING
   at once while every request is still answered, so load balancers and health-checking
   clients stop sending here.
2. Refusal: a request that arrives now is answered UNAVAILABLE at once (clients retry
   UNAVAILABLE, on another replica), calls already received run to their end. The phase ends
   when no request has arrived for ``QUIET_SECONDS`` (or after ``MAX_REFUSAL_SECONDS``), so
   that the transports stop at a moment when no client is sending.

Then the transports stop with their grace period. Transports ask ``refusing`` per request
(a plain attribute read) and call ``refused()`` when they turn one away. Thread-safe. A second
signal during the drain ends the process at once (``serving.server``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

QUIET_SECONDS = 0.1
MAX_REFUSAL_SECONDS = 2.0
REFUSAL_MESSAGE = "Server is shutting down"


class Drain:
    """The shutdown phases shared by every transport of one server."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.refusing = False
        self._clock = clock
        self._last_refused = 0.0

    def refused(self) -> None:
        """A transport turned a request away (it answers UNAVAILABLE with REFUSAL_MESSAGE)."""
        self._last_refused = self._clock()

    def run(self, not_serving: Callable[[], None], lame_duck_seconds: float) -> None:
        """Phases 1 and 2: ``not_serving()`` (health turns NOT_SERVING), the lame duck, then
        refusal until quiet. Returns when the transports may stop."""
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
