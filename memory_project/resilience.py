"""Circuit breakers per backend and the request's "degraded" flag.

Breakers (``memory_project.breaker``) follow seed 001 "Backend Circuit Breaker": a backend's
circuit opens after ``CIRCUIT_BREAKER_FAIL_MAX`` (5) failures within the last
``CIRCUIT_BREAKER_WINDOW_SECONDS`` (60 s), successes in between notwithstanding; while open,
calls fail at once with ``BACKEND_CIRCUIT_OPEN`` (HTTP 503, retryable, ``Retry-After``);
after ``CIRCUIT_BREAKER_RESET_SECONDS`` (30 s) the circuit half-opens and exactly one call is
a trial: success closes it, failure opens it again for another 30 s. Calls through a closed
breaker run concurrently.

Breakers live in the process (each gunicorn or Celery worker process has its own): an
outage is detected by every process within five failed calls.

The degraded flag: code that skips an optional backend (a cache, the rate limiter) calls
:func:`mark_degraded`; :class:`DegradedHeaderMiddleware` returns the reasons in the
``X-Memory-Degraded`` response header, e.g. ``X-Memory-Degraded: cache``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from memory_project.breaker import CircuitBreaker, CircuitOpenError, whole_seconds
from memory_project.errors import BackendCircuitOpen, RateLimited

T = TypeVar("T")

DEGRADED_HEADER = "X-Memory-Degraded"

#: Backends guarded by a breaker.
EMBEDDING = "embedding"
REDIS = "redis"

_breakers: dict[str, CircuitBreaker] = {}
_lock = threading.Lock()


_profiles: dict[str, dict[str, Any]] = {}


def breaker_profile(name: str, **params: Any) -> None:
    """Give backend ``name``'s breaker its own parameters (``CircuitBreaker`` keywords: e.g.
    a failure rate instead of a count); apps call this from ``AppConfig.ready()``."""
    with _lock:
        _profiles[name] = params
        _breakers.pop(name, None)


def breaker(name: str) -> CircuitBreaker:
    """The process-wide breaker of backend ``name``, created from settings on first use
    (``CIRCUIT_BREAKER_FAIL_MAX``, ``..._WINDOW_SECONDS``, ``..._RESET_SECONDS``, then the
    backend's :func:`breaker_profile`)."""
    with _lock:
        cb = _breakers.get(name)
        if cb is None:
            params: dict[str, Any] = {
                "fail_max": settings.CIRCUIT_BREAKER_FAIL_MAX,
                "window_seconds": settings.CIRCUIT_BREAKER_WINDOW_SECONDS,
                "reset_seconds": settings.CIRCUIT_BREAKER_RESET_SECONDS,
                "exclude": (RateLimited,),  # a backend that asks us to slow down is not broken
                **_profiles.get(name, {}),
            }
            cb = CircuitBreaker(name, **params)
            _breakers[name] = cb
        return cb


def reset_breakers() -> None:
    """Forget every breaker (they are re-created from settings); for tests and reloads."""
    with _lock:
        _breakers.clear()


def call_guarded(name: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``func`` through backend ``name``'s breaker.

    Every exception ``func`` raises counts as a failure of the backend (``RateLimited``
    excepted) and is re-raised.

    Raises:
        BackendCircuitOpen: the circuit is open (``details``: backend, retryAfter in whole
            seconds, at least 1).
    """
    try:
        return breaker(name).call(func, *args, **kwargs)
    except CircuitOpenError as exc:
        raise BackendCircuitOpen(
            f"The {name} backend is failing; its circuit is open.",
            details={"backend": name, "retryAfter": whole_seconds(exc.retry_after)},
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
