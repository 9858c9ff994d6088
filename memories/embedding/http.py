"""An OpenAI-compatible HTTP embedding provider.

``EMBEDDING_PROVIDER=openai`` sends ``POST {EMBEDDING_API_URL}/embeddings`` with
``{"model": EMBEDDING_API_MODEL, "input": [texts]}`` through the ``openai`` client and reads
``data[i].embedding`` (the shape of the OpenAI embeddings API, which many self-hosted servers
also speak). The vectors must have the column's 384 dimensions; they are L2-normalised here.
Calls go through the provider retry policy of ``memory_project.retries``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

import httpx2
import numpy as np
import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from openai import OpenAI

from memory_project.retries import call_with_retries, raise_provider_error

logger = logging.getLogger(__name__)


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
        except (openai.OpenAIError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise_provider_error(exc, backend="embedding", label="embedding provider",
                                 unreadable="The embedding provider's answer has no "
                                            "data[].embedding.")
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
