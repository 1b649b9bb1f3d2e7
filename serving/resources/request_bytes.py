"""The bytes of requests in flight, bounded: ``--max_request_bytes_in_flight`` (ours).

A request's memory is a multiple of its size (a JSON body whose arrays of numbers
``serving.rest_api.json_numbers`` reads: 6-9x at its peak; one the general path reads, a Python object
per number: 16-20x; a gRPC request about 3x), so many large
requests at once grew the process until it was killed (16 REST bodies of 16 MB: 136 MiB ->
2.4 GB). Every transport admits a request of ``SMALL`` bytes or more here before it is
decoded: its charge (its bytes, times ``JSON_WEIGHT`` for a JSON body) is added to what is in
flight if it fits the limit; else the request waits up to ``WAIT_SECONDS`` for room, then is
answered RESOURCE_EXHAUSTED (HTTP 429), which clients retry. A request alone is always
admitted, however large (its size is bounded by the transport's own limits). When a large
request ends, the heap's free pages go back to the system (``heap.trim_soon``).

Small requests are not counted (their memory is bounded by the threads that run them), so
the common request takes no lock.
"""

from __future__ import annotations

import threading
import time

from runtime import errors
from serving.resources import heap, memory

SMALL = 64 << 10  # below this, a request is not counted
JSON_WEIGHT = 8  # a JSON body's charge per byte: what reading it into values takes (measured)
WAIT_SECONDS = 1.0
TRIM_BYTES = 4 << 20  # a request this large gives its freed pages back when it ends
FLAG = "--max_request_bytes_in_flight"


def default_limit() -> int:
    """A sixteenth of the memory this process may use (its cgroup's limit, else the machine's),
    at least 256 MiB and at most 4 GiB: room for a few dozen large requests' peaks."""
    total = memory.available_bytes()
    return max(256 << 20, min(total // 16, 4 << 30)) if total else 1 << 30


class Ticket:
    """One admitted request's charge; ``release`` (once) gives it back."""

    __slots__ = ("_owner", "charge", "size")

    def __init__(self, owner: RequestBytes | None, charge: int, size: int) -> None:
        self._owner, self.charge, self.size = owner, charge, size

    def release(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._release(self.charge)
            if self.size >= TRIM_BYTES:
                heap.trim_soon()


_FREE = Ticket(None, 0, 0)


class RequestBytes:
    """The charges of the requests in flight against ``limit`` bytes (0 or less: no limit).
    Thread-safe."""

    def __init__(self, limit: int, wait_seconds: float = WAIT_SECONDS) -> None:
        self.limit = limit
        self.wait_seconds = wait_seconds
        self._cond = threading.Condition()
        self.in_flight = 0
        self.refused = 0

    def _charge(self, size: int, json: bool) -> int:
        return size * JSON_WEIGHT if json else size

    def try_admit(self, size: int, *, json: bool = False) -> Ticket | None:
        """The ticket of a request of ``size`` bytes if it fits now (or is small), else None."""
        if size < SMALL:
            return _FREE
        charge = self._charge(size, json)
        with self._cond:
            if self.limit > 0 and self.in_flight and self.in_flight + charge > self.limit:
                return None
            self.in_flight += charge
        return Ticket(self, charge, size)

    def admit(self, size: int, *, json: bool = False) -> Ticket:
        """``try_admit``, waiting up to ``WAIT_SECONDS`` for room; then RESOURCE_EXHAUSTED."""
        ticket = self.try_admit(size, json=json)
        if ticket is not None:
            return ticket
        charge = self._charge(size, json)
        deadline = time.monotonic() + self.wait_seconds
        with self._cond:
            while self.in_flight and self.in_flight + charge > self.limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self.refusal(size)
                self._cond.wait(left)
            self.in_flight += charge
        return Ticket(self, charge, size)

    def refusal(self, size: int) -> errors.ResourceExhaustedError:
        """The error of a request that found no room (counted)."""
        with self._cond:
            self.refused += 1
        return errors.ResourceExhaustedError(
            None,
            None,
            f"The server is at its limit of {self.limit} bytes of requests in flight ({FLAG}); "
            f"this request of {size} bytes did not fit. Retry later.",
        )

    def _release(self, charge: int) -> None:
        with self._cond:
            self.in_flight -= charge
            self._cond.notify_all()


UNLIMITED = RequestBytes(0)


def from_flag(value: int) -> RequestBytes:
    """The limit of ``--max_request_bytes_in_flight``: -1 (or less) is ``default_limit()``,
    0 is none."""
    return RequestBytes(default_limit() if value < 0 else value)
