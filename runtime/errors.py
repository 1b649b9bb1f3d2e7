"""Errors mirroring ``tf.errors``: one class per canonical code.

Every failure the runtime, the loader and the server report is an ``OpError`` carrying a canonical
code (the values of ``tensorflow.error.Code``, which are gRPC's status codes). ``serving/`` maps the
code once to gRPC and once to HTTP, so the class chosen here is what a client finally sees.
"""

from __future__ import annotations

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16

CODE_NAMES = {
    OK: "OK",
    CANCELLED: "CANCELLED",
    UNKNOWN: "UNKNOWN",
    INVALID_ARGUMENT: "INVALID_ARGUMENT",
    DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
    NOT_FOUND: "NOT_FOUND",
    ALREADY_EXISTS: "ALREADY_EXISTS",
    PERMISSION_DENIED: "PERMISSION_DENIED",
    RESOURCE_EXHAUSTED: "RESOURCE_EXHAUSTED",
    FAILED_PRECONDITION: "FAILED_PRECONDITION",
    ABORTED: "ABORTED",
    OUT_OF_RANGE: "OUT_OF_RANGE",
    UNIMPLEMENTED: "UNIMPLEMENTED",
    INTERNAL: "INTERNAL",
    UNAVAILABLE: "UNAVAILABLE",
    DATA_LOSS: "DATA_LOSS",
    UNAUTHENTICATED: "UNAUTHENTICATED",
}


class OpError(Exception):
    """Base class: ``node_def`` and ``op`` name where it failed (None outside a graph), ``message``."""

    code = UNKNOWN

    def __init__(self, node_def=None, op=None, message: str = "", *args):
        super().__init__(message)
        self.node_def = node_def
        self.op = op
        self.message = message

    @property
    def error_code(self) -> int:
        return self.code

    def __str__(self) -> str:
        return self.message


def _error(name: str, code: int) -> type[OpError]:
    cls = type(name, (OpError,), {"code": code, "__doc__": f"Canonical code {CODE_NAMES[code]}."})
    cls.__module__ = __name__
    return cls


CancelledError = _error("CancelledError", CANCELLED)
UnknownError = _error("UnknownError", UNKNOWN)
InvalidArgumentError = _error("InvalidArgumentError", INVALID_ARGUMENT)
DeadlineExceededError = _error("DeadlineExceededError", DEADLINE_EXCEEDED)
NotFoundError = _error("NotFoundError", NOT_FOUND)
AlreadyExistsError = _error("AlreadyExistsError", ALREADY_EXISTS)
PermissionDeniedError = _error("PermissionDeniedError", PERMISSION_DENIED)
ResourceExhaustedError = _error("ResourceExhaustedError", RESOURCE_EXHAUSTED)
FailedPreconditionError = _error("FailedPreconditionError", FAILED_PRECONDITION)
AbortedError = _error("AbortedError", ABORTED)
OutOfRangeError = _error("OutOfRangeError", OUT_OF_RANGE)
UnimplementedError = _error("UnimplementedError", UNIMPLEMENTED)
InternalError = _error("InternalError", INTERNAL)
UnavailableError = _error("UnavailableError", UNAVAILABLE)
DataLossError = _error("DataLossError", DATA_LOSS)
UnauthenticatedError = _error("UnauthenticatedError", UNAUTHENTICATED)

_BY_CODE = {cls.code: cls for cls in OpError.__subclasses__()}


def error_for_code(code: int, message: str, node_def=None, op=None) -> OpError:
    """The ``OpError`` subclass for a canonical code, like ``tf.errors.exception_type_from_error_code``."""
    return _BY_CODE.get(code, UnknownError)(node_def, op, message)
