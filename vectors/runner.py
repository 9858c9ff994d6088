"""Calling the async backends from synchronous code (Django views, services, Celery tasks).

Network clients (httpx, gRPC, the MongoDB driver) bind their connections to the event loop
that opened them, so every backend call of a process runs on one long-lived event loop in a
daemon thread (started on first use, again after a fork). The caller's context variables
(tenant scope, current span) go with the call.

Backends that set ``runs_in_caller_thread`` (pgvector: it needs the caller's database
connection, transaction and ``app.tenant_id``) run in the calling thread instead, through
``asgiref``'s ``async_to_sync``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync

T = TypeVar("T")

#: Seconds a call may take before the caller stops waiting (the backend's own timeouts
#: are shorter; this only bounds a hung loop).
CALL_TIMEOUT_SECONDS = 120.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid = 0


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="vector-backends",
                             daemon=True).start()
            _loop, _pid = loop, os.getpid()
        return _loop


def call(function: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``await function(*args, **kwargs)`` from synchronous code; returns its result or
    raises its exception.

    ``function`` is a bound method of a backend: when that backend
    ``runs_in_caller_thread``, it runs here; otherwise on the backends' event loop.
    """
    owner = getattr(function, "__self__", None)
    if getattr(owner, "runs_in_caller_thread", False):
        return async_to_sync(function)(*args, **kwargs)
    loop = _background_loop()
    context = contextvars.copy_context()
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def start() -> None:
        task: asyncio.Task[T] = loop.create_task(function(*args, **kwargs), context=context)  # type: ignore[arg-type]

        def done(finished: asyncio.Task[T]) -> None:
            if finished.cancelled():
                future.cancel()
            elif finished.exception() is not None:
                future.set_exception(finished.exception())  # type: ignore[arg-type]
            else:
                future.set_result(finished.result())

        task.add_done_callback(done)

    loop.call_soon_threadsafe(start)
    return future.result(timeout=CALL_TIMEOUT_SECONDS)
