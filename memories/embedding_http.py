"""An OpenAI-compatible HTTP embedding provider, and the retry policy of provider calls.

``EMBEDDING_PROVIDER=openai`` sends ``POST {EMBEDDING_API_URL}/embeddings`` with
``{"model": EMBEDDING_API_MODEL, "input": [texts]}`` through the ``openai`` client and reads
``data[i].embedding`` (the shape of the OpenAI embeddings API, which many self-hosted servers
also speak). The vectors must have the column's 384 dimensions; they are L2-normalised here.

Retries (seed 001 "Retry Strategy", tenacity): transient failures (connection errors,
timeouts, HTTP 408/5xx) are retried up to ``PROVIDER_RETRY_MAX_ATTEMPTS`` (3) attempts in
all, waiting exponentially from ``PROVIDER_RETRY_INITIAL_SECONDS`` (1 s, doubling, at most
``PROVIDER_RETRY_MAX_SECONDS`` = 30 s) plus random jitter. HTTP 429 waits as the
provider's ``Retry-After`` says, but never longer than ``PROVIDER_MAX_RETRY_AFTER_SECONDS``:
a longer wait is not attempted and the caller gets ``RATE_LIMITED`` with that
``retryAfter``. When attempts run out the caller gets ``PROVIDER_ERROR`` (retryable).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar
from urllib.parse import urlsplit

import httpx2
import numpy as np
import openai
import tenacity
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from openai import OpenAI

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
            "The embedding provider failed.", operation=operation,
            details={"backend": "embedding",
                     "attempts": settings.PROVIDER_RETRY_MAX_ATTEMPTS}) from exc


class OpenAICompatibleEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint through the ``openai``
    client (one attempt per :meth:`encode_once`; :meth:`encode` applies the retry policy).

    The client follows no redirect (the API key goes to the configured host only), and only
    ``http``/``https`` URLs are accepted (:func:`configured_embedder`). What failed is logged;
    clients are told only that the provider failed, never its address or the error text.
    """

    dimensions = 384

    def __init__(self, base_url: str, *, model: str, api_key: str = "",
                 timeout: float = 10.0) -> None:
        self.model_name = model
        self.timeout = timeout
        self._client = OpenAI(
            base_url=base_url.rstrip("/"), api_key=api_key or "not-needed", max_retries=0,
            timeout=timeout, http_client=httpx2.Client(follow_redirects=False, timeout=timeout))

    def encode_once(self, texts: Sequence[str]) -> np.ndarray:
        """One HTTP call.

        Raises:
            ProviderTransientError: connection error, timeout, HTTP 408 or 5xx.
            ProviderRateLimitedError: HTTP 429.
            ProviderError: any other HTTP status (a redirect included) or a malformed answer
                (not retryable).
        """
        try:
            answer = self._client.embeddings.create(model=self.model_name, input=list(texts),
                                                    encoding_format="float")
            rows = sorted(answer.data, key=lambda row: row.index)
            vectors = np.asarray([row.embedding for row in rows], dtype=np.float32)
        except openai.RateLimitError as exc:
            raise ProviderRateLimitedError(
                "HTTP 429", _parse_retry_after(exc.response.headers.get("Retry-After"))) from exc
        except openai.APIStatusError as exc:
            logger.warning("embedding provider answered HTTP %s", exc.status_code)
            if exc.status_code == 408 or exc.status_code >= 500:
                raise ProviderTransientError(f"HTTP {exc.status_code}") from exc
            raise ProviderError(
                f"The embedding provider refused the call: HTTP {exc.status_code}.",
                retryable=False, details={"backend": "embedding"}) from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            logger.warning("embedding provider unreachable: %s", exc)
            raise ProviderTransientError("unreachable") from exc
        except (openai.OpenAIError, KeyError, TypeError, ValueError, AttributeError) as exc:
            logger.warning("embedding provider sent a malformed answer: %s", exc)
            raise ProviderError("The embedding provider's answer has no data[].embedding.",
                                retryable=False, details={"backend": "embedding"}) from exc
        norms = np.linalg.norm(vectors, axis=1, keepdims=True) if vectors.ndim == 2 else None
        if norms is None or not np.all(norms > 0):
            return vectors  # the caller's shape/finite checks reject it
        return vectors / norms

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`encode_once` under the retry policy (see :func:`call_with_retries`)."""
        return call_with_retries(lambda: self.encode_once(texts))


def configured_embedder() -> OpenAICompatibleEmbedder | None:
    """The HTTP embedder when ``EMBEDDING_PROVIDER=openai``; ``None`` for the local model.

    Raises:
        ImproperlyConfigured: no ``EMBEDDING_API_URL``, or one that is not ``http(s)://host``.
    """
    if settings.EMBEDDING_PROVIDER != "openai":
        return None
    url = urlsplit(settings.EMBEDDING_API_URL or "")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ImproperlyConfigured("EMBEDDING_PROVIDER=openai needs EMBEDDING_API_URL, an "
                                   "http:// or https:// URL.")
    return OpenAICompatibleEmbedder(
        settings.EMBEDDING_API_URL, model=settings.EMBEDDING_API_MODEL,
        api_key=settings.EMBEDDING_API_KEY, timeout=settings.EMBEDDING_API_TIMEOUT_SECONDS)
