"""An OpenAI-compatible HTTP embedding provider, and the retry policy of provider calls.

``EMBEDDING_PROVIDER=openai`` sends ``POST {EMBEDDING_API_URL}/embeddings`` with
``{"model": EMBEDDING_API_MODEL, "input": [texts]}`` and reads ``data[i].embedding``
(the shape of the OpenAI embeddings API, which many self-hosted servers also speak). The
vectors must have the column's 384 dimensions; they are L2-normalised here.

Retries (seed 001 "Retry Strategy", tenacity): transient failures (connection errors,
timeouts, HTTP 408/5xx) are retried up to ``PROVIDER_RETRY_MAX_ATTEMPTS`` (3) attempts in
all, waiting exponentially from ``PROVIDER_RETRY_INITIAL_SECONDS`` (1 s, doubling, at most
``PROVIDER_RETRY_MAX_SECONDS`` = 30 s) plus random jitter. HTTP 429 waits as the
provider's ``Retry-After`` says, but never longer than ``PROVIDER_MAX_RETRY_AFTER_SECONDS``:
a longer wait is not attempted and the caller gets ``RATE_LIMITED`` with that
``retryAfter``. When attempts run out the caller gets ``PROVIDER_ERROR`` (retryable).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import tenacity
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

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


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to the exponential wait


def _wait(state: tenacity.RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, ProviderRateLimitedError) and exc.retry_after is not None:
        return exc.retry_after
    backoff = tenacity.wait_exponential_jitter(
        multiplier=settings.PROVIDER_RETRY_INITIAL_SECONDS,
        max=settings.PROVIDER_RETRY_MAX_SECONDS,
        exp_base=2,
        jitter=settings.PROVIDER_RETRY_INITIAL_SECONDS,
    )
    return float(backoff(state))


def _retry_after_too_long(state: tenacity.RetryCallState) -> bool:
    exc = state.outcome.exception() if state.outcome else None
    return (isinstance(exc, ProviderRateLimitedError) and exc.retry_after is not None
            and exc.retry_after > settings.PROVIDER_MAX_RETRY_AFTER_SECONDS)


def call_with_retries(func: Callable[[], T], *, operation: str = "embedding") -> T:
    """Call ``func`` under the provider retry policy (module docstring).

    Raises:
        ProviderError: transient failures on every attempt (``details.attempts``).
        RateLimited: the provider kept answering 429, or asked for a longer wait than
            allowed (``details.retryAfter``).
    """
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(settings.PROVIDER_RETRY_MAX_ATTEMPTS)
        | _retry_after_too_long,
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
        raise RateLimited("The embedding provider is rate limiting requests.",
                          operation=operation,
                          details={"backend": "embedding", "retryAfter": wait}) from exc
    except ProviderTransientError as exc:
        raise ProviderError(
            f"The embedding provider failed: {exc}", operation=operation,
            details={"backend": "embedding",
                     "attempts": settings.PROVIDER_RETRY_MAX_ATTEMPTS}) from exc


class OpenAICompatibleEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint (one attempt per
    :meth:`encode_once`; :meth:`encode` applies the retry policy)."""

    dimensions = 384

    def __init__(self, base_url: str, *, model: str, api_key: str = "",
                 timeout: float = 10.0) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model_name = model
        self.api_key = api_key
        self.timeout = timeout

    def encode_once(self, texts: Sequence[str]) -> np.ndarray:
        """One HTTP call.

        Raises:
            ProviderTransientError: connection error, timeout, HTTP 408 or 5xx.
            ProviderRateLimitedError: HTTP 429.
            ProviderError: any other HTTP error or a malformed answer (not retryable).
        """
        body = json.dumps({"model": self.model_name, "input": list(texts)}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload: Any = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 429:
                raise ProviderRateLimitedError(
                    "HTTP 429", _parse_retry_after(exc.headers.get("Retry-After"))) from exc
            if exc.code == 408 or exc.code >= 500:
                raise ProviderTransientError(f"HTTP {exc.code}") from exc
            raise ProviderError(f"The embedding provider refused the call: HTTP {exc.code}.",
                                retryable=False, details={"backend": "embedding"}) from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise ProviderTransientError(str(getattr(exc, "reason", exc))) from exc
        except ValueError as exc:
            raise ProviderError("The embedding provider sent malformed JSON.",
                                retryable=False) from exc
        try:
            rows = sorted(payload["data"], key=lambda row: row.get("index", 0))
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError("The embedding provider's answer has no data[].embedding.",
                                retryable=False) from exc
        norms = np.linalg.norm(vectors, axis=1, keepdims=True) if vectors.ndim == 2 else None
        if norms is None or not np.all(norms > 0):
            return vectors  # the caller's shape/finite checks reject it
        return vectors / norms

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`encode_once` under the retry policy (see :func:`call_with_retries`)."""
        return call_with_retries(lambda: self.encode_once(texts))


def configured_embedder() -> OpenAICompatibleEmbedder | None:
    """The HTTP embedder when ``EMBEDDING_PROVIDER=openai``; ``None`` for the local model."""
    if settings.EMBEDDING_PROVIDER != "openai":
        return None
    if not settings.EMBEDDING_API_URL:
        raise ImproperlyConfigured("EMBEDDING_PROVIDER=openai needs EMBEDDING_API_URL.")
    return OpenAICompatibleEmbedder(
        settings.EMBEDDING_API_URL, model=settings.EMBEDDING_API_MODEL,
        api_key=settings.EMBEDDING_API_KEY, timeout=settings.EMBEDDING_API_TIMEOUT_SECONDS)
