"""Retries of calls to an outside service (an embedding or language-model provider).

Seed 001 "Retry Strategy", with tenacity: transient failures (connection errors, timeouts,
HTTP 408/5xx) are retried up to ``PROVIDER_RETRY_MAX_ATTEMPTS`` (3) attempts in all, waiting
exponentially from ``PROVIDER_RETRY_INITIAL_SECONDS`` (1 s, doubling, at most
``PROVIDER_RETRY_MAX_SECONDS`` = 30 s) plus random jitter. HTTP 429 waits as the provider's
``Retry-After`` says, but never longer than ``PROVIDER_MAX_RETRY_AFTER_SECONDS``: a longer
wait is not attempted and the caller gets ``RATE_LIMITED`` with that ``retryAfter``. When
attempts run out the caller gets ``PROVIDER_ERROR`` (retryable).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

import openai
import tenacity
from django.conf import settings

from memory_project.errors import ProviderError, RateLimited

logger = logging.getLogger(__name__)
T = TypeVar("T")
_sleep = time.sleep  # replaced in tests to record the waits


class ProviderTransientError(Exception):
    """A provider call failed in a way that may succeed on retry."""


class ProviderRateLimitedError(Exception):
    """The provider answered 429; ``retry_after`` is its ``Retry-After`` in seconds."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (``None`` when absent or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to the exponential wait


def raise_provider_error(exc: Exception, *, backend: str, label: str,
                         unreadable: str) -> NoReturn:
    """Raise what the retry policy understands for an ``openai`` client failure ``exc``
    (``label`` names the provider in messages, e.g. "embedding provider"; ``unreadable`` is
    the message for a malformed answer).

    Raises:
        ProviderRateLimitedError: HTTP 429 (with its ``Retry-After``).
        ProviderTransientError: a connection error, a timeout, HTTP 408 or 5xx.
        ProviderError: any other HTTP status (a redirect included) or an unreadable answer
            (not retryable).
    """
    if isinstance(exc, openai.RateLimitError):
        raise ProviderRateLimitedError(
            "HTTP 429", parse_retry_after(exc.response.headers.get("Retry-After"))) from exc
    if isinstance(exc, openai.APIStatusError):
        logger.warning("%s answered HTTP %s", label, exc.status_code)
        if exc.status_code == 408 or exc.status_code >= 500:
            raise ProviderTransientError(f"HTTP {exc.status_code}") from exc
        raise ProviderError(f"The {label} refused the call: HTTP {exc.status_code}.",
                            retryable=False, details={"backend": backend}) from exc
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        logger.warning("%s unreachable: %s", label, exc)
        raise ProviderTransientError("unreachable") from exc
    logger.warning("%s sent a malformed answer: %s", label, exc)
    raise ProviderError(unreadable, retryable=False, details={"backend": backend}) from exc


def _wait(state: tenacity.RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, ProviderRateLimitedError) and exc.retry_after is not None:
        return exc.retry_after
    # wait_exponential + wait_random rather than wait_exponential_jitter, whose keywords
    # changed in tenacity 9.2 (a vector backend's client still pins tenacity < 9.2).
    backoff = tenacity.wait_exponential(
        multiplier=settings.PROVIDER_RETRY_INITIAL_SECONDS,
        max=settings.PROVIDER_RETRY_MAX_SECONDS,
        exp_base=2,
    ) + tenacity.wait_random(0, settings.PROVIDER_RETRY_INITIAL_SECONDS)
    return min(float(backoff(state)), settings.PROVIDER_RETRY_MAX_SECONDS)


class _RetryAfterTooLong(tenacity.stop.stop_base):
    """Stop when the provider asks for a longer wait than ``PROVIDER_MAX_RETRY_AFTER_SECONDS``."""

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome else None
        return (isinstance(exc, ProviderRateLimitedError) and exc.retry_after is not None
                and exc.retry_after > settings.PROVIDER_MAX_RETRY_AFTER_SECONDS)


def call_with_retries(func: Callable[[], T], *, operation: str = "embedding",
                      backend: str = "embedding", attempts: int | None = None) -> T:
    """Call ``func`` under the provider retry policy (module docstring); ``backend`` names
    the service in errors (``"embedding"``, ``"llm"``); ``attempts`` overrides
    ``PROVIDER_RETRY_MAX_ATTEMPTS``.

    Raises:
        ProviderError: transient failures on every attempt (``details.attempts``).
        RateLimited: the provider kept answering 429, or asked for a longer wait than
            allowed (``details.retryAfter``).
    """
    retrying = tenacity.Retrying(
        stop=tenacity.stop_any(
            tenacity.stop_after_attempt(attempts or settings.PROVIDER_RETRY_MAX_ATTEMPTS),
            _RetryAfterTooLong()),
        wait=_wait,
        sleep=lambda seconds: _sleep(seconds),
        retry=tenacity.retry_if_exception_type(
            (ProviderTransientError, ProviderRateLimitedError)),
        before_sleep=lambda s: logger.warning(
            "provider call failed (attempt %d), retrying: %s", s.attempt_number,
            s.outcome.exception() if s.outcome else None),
        reraise=True,
    )
    try:
        return retrying(func)
    except ProviderRateLimitedError as exc:
        wait = exc.retry_after or settings.PROVIDER_RETRY_INITIAL_SECONDS
        raise RateLimited(f"The {backend} provider is rate limiting requests.",
                          operation=operation,
                          details={"backend": backend, "retryAfter": wait}) from exc
    except ProviderTransientError as exc:
        raise ProviderError(
            f"The {backend} provider failed.", operation=operation,
            details={"backend": backend,
                     "attempts": attempts or settings.PROVIDER_RETRY_MAX_ATTEMPTS}) from exc


