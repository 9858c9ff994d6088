"""Work deferred until the response has been sent (``memory_project.after_response``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from memory_project.after_response import AfterResponseMiddleware, after_response, drain

# Closing a response sends request_finished, on which Django also tidies the connections.
pytestmark = pytest.mark.django_db


def _serve(status: int, work: Callable[[], None]) -> HttpResponse:
    def view(request: HttpRequest) -> HttpResponse:
        after_response(work)
        return HttpResponse(status=status)

    return AfterResponseMiddleware(view)(RequestFactory().get("/"))


def test_outside_a_request_the_work_runs_at_once() -> None:
    done: list[int] = []
    after_response(lambda: done.append(1))
    assert done == [1]


def test_in_a_request_the_work_waits_for_the_response_to_be_closed() -> None:
    done: list[str] = []
    response = _serve(200, lambda: done.append("counted"))
    assert response.status_code == 200 and done == []
    response.close()  # what the WSGI server does once the body is sent
    assert done == ["counted"]
    request_finished.send(sender=None)
    assert done == ["counted"]  # once only


def test_an_error_response_drops_the_work() -> None:
    done: list[str] = []
    _serve(404, lambda: done.append("counted"))
    request_finished.send(sender=None)
    assert done == []


def test_a_failure_is_logged_and_the_other_work_still_runs(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    done: list[str] = []

    def view(request: HttpRequest) -> HttpResponse:
        after_response(lambda: 1 / 0)
        after_response(lambda: done.append("second"))
        return HttpResponse()

    AfterResponseMiddleware(view)(RequestFactory().get("/"))
    with caplog.at_level(logging.ERROR, logger="memory_project.after_response"):
        request_finished.send(sender=None)
    assert done == ["second"]
    assert "ZeroDivisionError" in caplog.text


def test_in_the_background_the_work_runs_on_its_own_thread_after_the_close(settings: Any
                                                                           ) -> None:
    settings.AFTER_RESPONSE_IN_BACKGROUND = True
    ran_on: list[str] = []
    gate = threading.Event()

    def work() -> None:
        gate.wait(5)
        ran_on.append(threading.current_thread().name)

    response = _serve(200, work)
    response.close()  # returns at once: the work waits for the gate on another thread
    assert ran_on == []
    gate.set()
    drain()
    assert len(ran_on) == 1 and ran_on[0].startswith("after-response")


def test_work_kept_even_after_errors_survives_an_error_response() -> None:
    done: list[str] = []

    def view(request: HttpRequest) -> HttpResponse:
        after_response(lambda: done.append("key used"), even_after_errors=True)
        after_response(lambda: done.append("results counted"))
        return HttpResponse(status=404)

    AfterResponseMiddleware(view)(RequestFactory().get("/")).close()
    assert done == ["key used"]
