"""Circuit breakers per backend and the request's "degraded" flag.

Breakers (pybreaker) follow seed 001 "Backend Circuit Breaker": a backend's circuit opens
after ``CIRCUIT_BREAKER_FAIL_MAX`` (5) failures within ``CIRCUIT_BREAKER_WINDOW_SECONDS``
(60 s); while open, calls fail at once with ``BACKEND_CIRCUIT_OPEN`` (HTTP 503, retryable,
``Retry-After``); after ``CIRCUIT_BREAKER_RESET_SECONDS`` (30 s) the circuit half-opens and
the next call is a trial: success closes it, failure opens it again for another 30 s.

Breakers live in the process (each gunicorn or Celery worker process has its own): an
outage is detected by every process within five failed calls.

The degraded flag: code that skips an optional backend (a cache, the rate limiter) calls
:func:`mark_degraded`; :class:`DegradedHeaderMiddleware` returns the reasons in the
``X-Memory-Degraded`` response header, e.g. ``X-Memory-Degraded: cache``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TypeVar

import pybreaker
from django.conf import settings
from django.http import HttpRequest, HttpResponse

from memory_project.errors import BackendCircuitOpen, RateLimited

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEGRADED_HEADER = "X-Memory-Degraded"

#: Backends guarded by a breaker.
EMBEDDING = "embedding"
REDIS = "redis"


class _WindowListener(pybreaker.CircuitBreakerListener):
    """Turns pybreaker's consecutive-failure count into "N failures within a window": when
    the first counted failure is older than the window, the count starts again."""

    def __init__(self, window_seconds: float) -> None:
        self.window_seconds = window_seconds
        self.first_failure_at: float | None = None

    def before_call(self, cb: pybreaker.CircuitBreaker, func: Any, *args: Any,
                    **kwargs: Any) -> None:
        if (cb.current_state == pybreaker.STATE_CLOSED and self.first_failure_at is not None
                and time.monotonic() - self.first_failure_at > self.window_seconds):
            self.first_failure_at = None
            cb.close()  # resets the failure counter

    def failure(self, cb: pybreaker.CircuitBreaker, exc: BaseException) -> None:
        if cb.fail_counter == 1 or self.first_failure_at is None:
            self.first_failure_at = time.monotonic()

    def success(self, cb: pybreaker.CircuitBreaker) -> None:
        self.first_failure_at = None

    def state_change(self, cb: pybreaker.CircuitBreaker, old_state: Any, new_state: Any) -> None:
        self.first_failure_at = None
        logger.warning("circuit %s: %s -> %s", cb.name,
                       getattr(old_state, "name", old_state), new_state.name)


_breakers: dict[str, pybreaker.CircuitBreaker] = {}
_lock = threading.Lock()


def breaker(name: str) -> pybreaker.CircuitBreaker:
    """The process-wide breaker of backend ``name``, created from settings on first use."""
    with _lock:
        cb = _breakers.get(name)
        if cb is None:
            cb = pybreaker.CircuitBreaker(
                fail_max=settings.CIRCUIT_BREAKER_FAIL_MAX,
                reset_timeout=settings.CIRCUIT_BREAKER_RESET_SECONDS,
                listeners=[_WindowListener(settings.CIRCUIT_BREAKER_WINDOW_SECONDS)],
                name=name,
                exclude=[RateLimited],  # a backend that asks us to slow down is not broken
                throw_new_error_on_trip=False,  # the call that trips it raises its own error
            )
            _breakers[name] = cb
        return cb


def reset_breakers() -> None:
    """Forget every breaker (they are re-created from settings); for tests and reloads."""
    with _lock:
        _breakers.clear()


def retry_after_seconds(cb: pybreaker.CircuitBreaker) -> int:
    """Whole seconds until ``cb`` half-opens (at least 1)."""
    opened_at = cb._state_storage.opened_at  # pybreaker exposes no public accessor
    if opened_at is None:
        return 1
    remaining = cb.reset_timeout - (datetime.now(UTC) - opened_at).total_seconds()
    return max(1, int(remaining + 0.999))


def call_guarded(name: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``func`` through backend ``name``'s breaker.

    Every exception ``func`` raises counts as a failure of the backend and is re-raised.

    Raises:
        BackendCircuitOpen: the circuit is open (``details``: backend, retryAfter).
    """
    cb = breaker(name)
    try:
        return cb.call(func, *args, **kwargs)
    except pybreaker.CircuitBreakerError:
        retry_after = retry_after_seconds(cb)
        raise BackendCircuitOpen(
            f"The {name} backend is failing; its circuit is open.",
            details={"backend": name, "retryAfter": retry_after},
        ) from None


_degraded: ContextVar[tuple[str, ...]] = ContextVar("degraded", default=())


def mark_degraded(reason: str) -> None:
    """Flag the current request as served without ``reason`` (e.g. ``"cache"``)."""
    current = _degraded.get()
    if reason not in current:
        _degraded.set((*current, reason))


def degraded_reasons() -> tuple[str, ...]:
    """What the current request was served without, in the order it was skipped."""
    return _degraded.get()


class DegradedHeaderMiddleware:
    """Clears the degraded flag per request and returns it as ``X-Memory-Degraded``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _degraded.set(())
        try:
            response = self.get_response(request)
            reasons = _degraded.get()
            if reasons:
                response[DEGRADED_HEADER] = ",".join(reasons)
            return response
        finally:
            _degraded.reset(token)
