"""Bookkeeping writes that run once the response has been sent.

Counting a retrieval (``reference_count``, ``last_referenced_at``, ...) is a write of whole
rows, dearer still when the rows' pages have no room for a HOT update (every index, HNSW
included, gets the new row version; figures: ``docs/performance.md``, "After the
response"). None of it changes the answer, so the search and recall endpoints hand
it to :func:`after_response`: the WSGI server calls the response's ``close()`` once the body
is on the wire, Django sends ``request_finished`` there, and the deferred work is queued to
one background thread per process (``AFTER_RESPONSE_IN_BACKGROUND``, on by default). Running
it in the request's thread instead would delay the next request on the same keep-alive
connection, which gunicorn reads only when that thread is done.

With the setting off (the tests' default) the work runs in the request's thread at
``close()``; Django's test client closes each response before returning it, so tests see the
writes at once. Outside a request (a shell, a task, a management command) the work runs
immediately. Work deferred by a request whose response is an error (status ≥ 400) is
dropped. A failure is logged with its traceback and never reaches the client, which already
has its answer. The queue is in memory: work still queued when a process is killed
(SIGKILL) is lost; a normal exit waits for it.

Deferred work runs in a copy of the request's context on another thread, where
``django.core.cache.cache`` would open a new Redis connection each time: it uses
``memory_project.thread_cache.thread_cache()`` instead.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.core.signals import request_finished
from django.db import connection
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

_local = threading.local()
_background: ThreadPoolExecutor | None = None
_background_lock = threading.Lock()


def after_response(work: Callable[[], Any], *, even_after_errors: bool = False) -> None:
    """Run ``work`` once the current response has been sent, or now outside a request.

    ``even_after_errors``: keep it when the response is an error too (e.g. "this API key was
    used"); by default an error response drops it.
    """
    pending: list[Callable[[], Any]] | None = getattr(_local, "pending", None)
    if pending is None:
        work()
    else:
        pending.append(work)
        if even_after_errors:
            getattr(_local, "kept", []).append(work)


def _run_all(pending: list[Callable[[], Any]], *, own_connection: bool) -> None:
    if own_connection:
        connection.close_if_unusable_or_obsolete()  # a broken or expired connection reopens
    for work in pending:
        try:
            work()
        except Exception:
            logger.exception("work deferred until after the response failed")


def _executor() -> ThreadPoolExecutor:
    global _background
    with _background_lock:
        if _background is None:
            _background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="after-response")
        return _background


def _run_pending(**_: Any) -> None:
    pending: list[Callable[[], Any]] = getattr(_local, "pending", None) or []
    _local.pending = None
    if not pending:
        return
    if settings.AFTER_RESPONSE_IN_BACKGROUND:
        _executor().submit(contextvars.copy_context().run, _run_all, pending,
                           own_connection=True)
    else:
        _run_all(pending, own_connection=False)


def in_background(work: Callable[[], Any]) -> None:
    """Run ``work`` now on the process's background thread (the one deferred work runs on),
    in a copy of the caller's context, without waiting for it; with
    ``AFTER_RESPONSE_IN_BACKGROUND`` off (the tests' default), in the caller's thread before
    returning. For work no response waits on, wherever it is found (a request's pool thread
    included). A failure is logged with its traceback and not raised."""
    if settings.AFTER_RESPONSE_IN_BACKGROUND:
        _executor().submit(contextvars.copy_context().run, _run_all, [work], own_connection=True)
    else:
        _run_all([work], own_connection=False)


def _close_connection() -> None:
    connection.close()  # resolved on the calling thread: the background thread's own


def drain() -> None:
    """Wait until the work queued so far has run (the next deferred work starts a new
    queue)."""
    global _background
    with _background_lock:
        executor, _background = _background, None
    if executor is not None:
        executor.submit(_close_connection).result()
        executor.shutdown(wait=True)


request_finished.connect(_run_pending, dispatch_uid="memory_project.after_response")


class AfterResponseMiddleware:
    """Opens the request's list of deferred work; drops it when the response is an error
    (except work deferred ``even_after_errors``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        _local.pending = []
        _local.kept = []
        try:
            response = self.get_response(request)
        except BaseException:
            _local.pending = list(_local.kept)
            raise
        if response.status_code >= 400:
            _local.pending = list(_local.kept)
        return response
