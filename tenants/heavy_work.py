"""CPU-heavy work of a request, run where it cannot stall the web workers or other tenants.

A web worker serves every tenant from a few threads that share one interpreter lock. A call
that burns CPU in pure Python (PII detection on a long, digit-dense text: ``docs/performance.md``,
"PII detection") would hold that lock and make every other request of the process wait. Heavy
work therefore goes through :func:`run_heavy`, which

1. takes one of ``HEAVY_WORK_PER_TENANT`` (2) slots of the calling tenant, counted across all
   processes in Redis (:func:`tenants.ratelimit.concurrency_slot`): a tenant flooding
   its most expensive endpoint gets 429 ``RATE_LIMITED`` beyond that, and keeps at most that
   many web threads busy;
2. runs the function in a worker process (``HEAVY_WORK_PROCESSES`` per web process, default
   1, started lazily, at the lowest scheduling priority: ``HEAVY_WORK_NICE``, 19), so the web
   process waits on a pipe instead of computing, and the operating system serves the web
   processes first;
3. bounds it in time: the call's own limit (``HEAVY_WORK_TIMEOUT_SECONDS``, 10 s) and what is
   left of the request's budget (``HEAVY_WORK_REQUEST_BUDGET_SECONDS``, 20 s, for requests
   that make many heavy calls, such as a bulk add). A call over its limit has its worker
   process killed (pebble restarts it) and fails with 422 ``WORK_BUDGET_EXCEEDED``.

``HEAVY_WORK_PROCESSES=0`` runs heavy work in the calling thread (still slot-limited and
without a time limit): for processes that serve no web requests.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.conf import settings
from pebble import ProcessExpired, ProcessPool

from memory_project.errors import BackendUnavailable, WorkBudgetExceeded
from tenants.ratelimit import concurrency_slot

T = TypeVar("T")

_pool: ProcessPool | None = None
_pool_pid: int | None = None
_lock = threading.Lock()
_deadline: ContextVar[float | None] = ContextVar("heavy_work_deadline", default=None)


def _lower_priority(increment: int) -> None:
    """Worker process initializer: let the web processes go first."""
    os.nice(increment)


def _worker_pool() -> ProcessPool:
    """This process's pool, created on first use (and again after a fork)."""
    global _pool, _pool_pid
    with _lock:
        if _pool is None or _pool_pid != os.getpid():
            import multiprocessing

            _pool = ProcessPool(max_workers=settings.HEAVY_WORK_PROCESSES,
                                context=multiprocessing.get_context("spawn"),
                                initializer=_lower_priority,
                                initargs=(settings.HEAVY_WORK_NICE,))
            _pool_pid = os.getpid()
        return _pool


def shutdown() -> None:
    """Stop this process's worker processes (tests; a web worker's exit does it anyway)."""
    global _pool
    with _lock:
        if _pool is not None and _pool_pid == os.getpid():
            _pool.stop()
            _pool.join(timeout=5)
        _pool = None


@contextmanager
def request_budget(seconds: float | None = None) -> Iterator[None]:
    """Give the heavy calls made inside the block ``seconds`` in all (default
    ``HEAVY_WORK_REQUEST_BUDGET_SECONDS``); the API middleware wraps every request in one."""
    limit = settings.HEAVY_WORK_REQUEST_BUDGET_SECONDS if seconds is None else seconds
    token = _deadline.set(time.monotonic() + limit)
    try:
        yield
    finally:
        _deadline.reset(token)


def _time_limit() -> float:
    limit = float(settings.HEAVY_WORK_TIMEOUT_SECONDS)
    deadline = _deadline.get()
    if deadline is not None:
        limit = min(limit, deadline - time.monotonic())
    if limit <= 0:
        raise WorkBudgetExceeded(details={"budgetSeconds": settings.
                                          HEAVY_WORK_REQUEST_BUDGET_SECONDS})
    return limit


def run_heavy(tenant_key: str, func: Callable[..., T], *args: Any) -> T:
    """Run ``func(*args)`` as heavy work of tenant ``tenant_key`` (see the module docstring).

    ``func`` and its arguments must be picklable and ``func`` must not touch the database or
    Django settings (it runs in a fresh interpreter).

    Raises:
        RateLimited: the tenant already runs ``HEAVY_WORK_PER_TENANT`` heavy calls.
        WorkBudgetExceeded: 422, the call or the request ran out of time; nothing was stored.
        BackendUnavailable: 503, the worker process died for another reason.
    """
    with concurrency_slot(f"heavy:{tenant_key}", settings.HEAVY_WORK_PER_TENANT):
        if settings.HEAVY_WORK_PROCESSES <= 0:
            return func(*args)
        limit = _time_limit()
        future = _worker_pool().schedule(func, args=args, timeout=limit)
        try:
            return future.result()
        except (TimeoutError, FutureTimeout):
            raise WorkBudgetExceeded(
                f"This input needs more than {limit:.1f} s of processing; send less at once.",
                details={"limitSeconds": round(limit, 1)}) from None
        except ProcessExpired:
            raise BackendUnavailable("The worker process for heavy work stopped.",
                                     details={"backend": "heavy_work", "retryAfter": 1},
                                     retryable=True) from None


class RequestBudgetMiddleware:
    """Gives every request :func:`request_budget`'s time for its heavy calls."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        with request_budget():
            return self.get_response(request)
