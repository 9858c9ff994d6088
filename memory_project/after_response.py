"""Bookkeeping writes that run once the response has been sent.

Counting a retrieval (``reference_count``, ``last_referenced_at``, ...) is a write of whole
rows: on the 100k bench tenant the one UPDATE per search took 17 ms when the rows' pages had
room for a HOT update and 40–80 ms when they had not (every index, HNSW included, gets the
new row version). None of it changes the answer, so the search, recall and get endpoints
hand it to :func:`after_response`: the WSGI server calls the response's ``close()`` once the
body is on the wire, Django sends ``request_finished`` there, and the deferred work runs then,
in the same worker thread, before the thread takes its next request. Django's test client
also closes each response before returning it, so tests see the writes at once.

Outside a request (a shell, a task, a management command) the work runs immediately. Work
deferred by a request whose response is an error (status ≥ 400) is dropped. A failure is
logged with its traceback and never reaches the client, which already has its answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

_local = threading.local()


def after_response(work: Callable[[], Any]) -> None:
    """Run ``work`` once the current response has been sent, or now outside a request."""
    pending: list[Callable[[], Any]] | None = getattr(_local, "pending", None)
    if pending is None:
        work()
    else:
        pending.append(work)


def _run_pending(**_: Any) -> None:
    pending: list[Callable[[], Any]] = getattr(_local, "pending", None) or []
    _local.pending = None
    for work in pending:
        try:
            work()
        except Exception:
            logger.exception("work deferred until after the response failed")


request_finished.connect(_run_pending, dispatch_uid="memory_project.after_response")


class AfterResponseMiddleware:
    """Opens the request's list of deferred work; drops it when the response is an error."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        _local.pending = []
        try:
            response = self.get_response(request)
        except BaseException:
            _local.pending = []
            raise
        if response.status_code >= 400:
            _local.pending = []
        return response
