"""serving.resources.request_bytes: the bound on the bytes of large requests in flight."""

from __future__ import annotations

import threading
import time

import pytest

from runtime import errors
from serving.resources import request_bytes
from serving.resources.request_bytes import JSON_WEIGHT, SMALL, RequestBytes

MB = 1 << 20


def test_charges_add_up_to_the_limit_and_releases_make_room():
    bounded = RequestBytes(10 * MB, wait_seconds=0)
    first, second = bounded.try_admit(4 * MB), bounded.try_admit(4 * MB)
    assert first and second and bounded.in_flight == 8 * MB
    assert bounded.try_admit(4 * MB) is None
    first.release()
    first.release()  # once only
    assert bounded.in_flight == 4 * MB
    third = bounded.try_admit(4 * MB)
    assert third is not None
    second.release(), third.release()
    assert bounded.in_flight == 0


def test_a_json_body_is_charged_by_its_weight_and_small_requests_are_not_counted():
    bounded = RequestBytes(10 * MB, wait_seconds=0)
    ticket = bounded.try_admit(MB, json=True)
    assert bounded.in_flight == JSON_WEIGHT * MB
    for _ in range(1000):
        assert bounded.try_admit(SMALL - 1) is not None
    assert bounded.in_flight == JSON_WEIGHT * MB
    assert bounded.try_admit(MB, json=True) is None
    ticket.release()


def test_a_request_alone_is_admitted_whatever_its_size():
    bounded = RequestBytes(1, wait_seconds=0)
    ticket = bounded.admit(64 * MB)
    with pytest.raises(
        errors.ResourceExhaustedError, match=r"limit of 1 bytes .*--max_request_bytes_in_flight"
    ):
        bounded.admit(SMALL)
    assert bounded.refused == 1
    ticket.release()
    bounded.admit(64 * MB).release()


def test_a_waiting_request_is_admitted_when_room_is_made_within_its_wait():
    bounded = RequestBytes(MB, wait_seconds=30)
    ticket = bounded.admit(MB)
    threading.Timer(0.2, ticket.release).start()
    start = time.monotonic()
    bounded.admit(MB).release()
    assert 0.15 < time.monotonic() - start < 10
    assert bounded.refused == 0


def test_the_flag():
    assert request_bytes.from_flag(0).limit == 0
    assert request_bytes.from_flag(123).limit == 123
    default = request_bytes.from_flag(-1).limit
    assert 256 * MB <= default <= 4 << 30
    unlimited = request_bytes.from_flag(0)
    tickets = [unlimited.admit(1 << 30) for _ in range(8)]
    assert unlimited.in_flight == 8 << 30
    for ticket in tickets:
        ticket.release()
