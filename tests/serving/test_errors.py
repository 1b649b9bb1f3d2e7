"""serving.errors: OpError -> gRPC status (code kept, text cut as TF Serving cuts it) and HTTP status."""

import grpc
import pytest

from runtime import errors
from serving import errors as serving_errors


class Aborted(Exception):
    pass


class FakeContext:
    def abort(self, code, details):
        self.code, self.details = code, details
        raise Aborted


class Servicer:
    @serving_errors.grpc_method
    def Call(self, request, context):  # noqa: N802
        raise request


def _abort(exc):
    context = FakeContext()
    with pytest.raises(Aborted):
        Servicer().Call(exc, context)
    return context.code, context.details


@pytest.mark.parametrize("cls", errors.OpError.__subclasses__(), ids=lambda c: c.__name__)
def test_op_errors_keep_their_canonical_code_and_message(cls):
    code, details = _abort(cls(None, None, "some text"))
    assert code.value[0] == cls.code
    assert details == "some text"


def test_long_messages_are_truncated_like_tf_serving():
    code, details = _abort(errors.InvalidArgumentError(None, None, "x" * 2000))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details == "x" * 1024 + "...TRUNCATED"
    assert serving_errors.truncate("y" * 1024) == "y" * 1024


def test_unexpected_exceptions_become_internal():
    code, details = _abort(KeyError("boom"))
    assert code is grpc.StatusCode.INTERNAL
    assert "KeyError" in details


def test_memory_errors_become_resource_exhausted():
    code, _ = _abort(MemoryError("Unable to allocate 4 TiB"))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_successful_calls_pass_through():
    class Ok:
        @serving_errors.grpc_method
        def Call(self, request, context):  # noqa: N802
            return request + 1

    assert Ok().Call(1, FakeContext()) == 2


@pytest.mark.parametrize(
    "code, status",
    [
        (errors.OK, 200),
        (errors.INVALID_ARGUMENT, 400),
        (errors.FAILED_PRECONDITION, 400),
        (errors.NOT_FOUND, 404),
        (errors.DEADLINE_EXCEEDED, 504),
        (errors.RESOURCE_EXHAUSTED, 429),
        (errors.UNIMPLEMENTED, 501),
        (errors.UNAVAILABLE, 503),
        (errors.INTERNAL, 500),
        (errors.CANCELLED, 499),
        (99, 500),
    ],
)
def test_http_status_is_tf_servings(code, status):
    assert serving_errors.http_status(code) == status
