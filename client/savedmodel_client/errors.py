"""One exception for every failed call, whichever transport made it."""

from __future__ import annotations

# TF Serving's ToHTTPStatusCode, read backwards: REST answers carry only an HTTP status and a
# message, so a code shared by several statuses reads as the most common one (400: INVALID_ARGUMENT).
_CODE_OF_HTTP = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class ServingError(Exception):
    """A call the server (or the way to it) refused.

    ``code``: the canonical status code's name, as gRPC names it ("NOT_FOUND", "UNAVAILABLE"...);
    ``message``: TF Serving's text; ``http_status``: the HTTP status, for calls made over REST.
    """

    def __init__(self, code: str, message: str, http_status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.http_status = http_status

    @classmethod
    def from_http(cls, status: int, message: str) -> ServingError:
        return cls(_CODE_OF_HTTP.get(status, "UNKNOWN"), message, status)

    @classmethod
    def from_rpc(cls, error) -> ServingError:
        """A ``grpc.RpcError`` as a ServingError."""
        return cls(error.code().name, error.details() or "")
