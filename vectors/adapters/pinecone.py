"""Pinecone (seed 001 "Pinecone Backend") with the official ``pinecone`` SDK (async client).

- Start: the index ``index`` is described (its data-plane host) and created serverless in
  ``cloud``/``region`` when missing and ``create_index`` is on; ``host`` skips the lookup.
- Tenant isolation: the tenant id is the namespace of every request.
- Upsert: ``{"id", "values", "metadata"}`` per vector in batches of 1,000 (Pinecone's
  documented limit per request), metadata filterable by Pinecone's filter language
  (``$eq`` / ``$in``).
- Rate limits (HTTP 429): the SDK's own retries are off; this adapter retries with
  exponential backoff (``backoff_seconds`` doubling up to ``backoff_max_seconds``,
  ``max_retries`` times, tenacity) and counts each 429 in
  ``vector_backend_rate_limit_total{backend="pinecone"}``; when retries run out the call
  fails with ``RATE_LIMITED``.
- Hybrid: only a ``dotproduct`` index fuses dense and sparse vectors (Pinecone's convex
  combination ``alpha · dense + (1 − alpha) · sparse``), so it is offered with the
  inner-product metric; with cosine the memory system fuses instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pinecone import (
    ApiError,
    AsyncPinecone,
    NotFoundError,
    PineconeConnectionError,
    PineconeTimeoutError,
    RateLimitError,
    RetryConfig,
    ServerlessSpec,
)
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from memory_project.errors import MemoryServiceError
from vectors import metrics, sparse
from vectors.adapters.common import VendorBackend, adapter_capabilities, factory
from vectors.base import Capabilities, DistanceMetric, Filter, SearchHit, SearchQuery, VectorRecord
from vectors.config import PineconeSettings
from vectors.errors import (
    BackendRequestFailed,
    BackendUnavailable,
    RateLimited,
    translated_errors,
)

BATCH = 1000
MAX_DIMENSIONS = 20000
_METRICS = {DistanceMetric.COSINE: "cosine", DistanceMetric.L2: "euclidean",
            DistanceMetric.INNER_PRODUCT: "dotproduct"}


def pinecone_filter(filter_: Filter | None) -> dict[str, Any] | None:
    """Pinecone's metadata filter of a conjunction: ``{"k": {"$eq": v}}``/``{"$in": [...]}``."""
    if not filter_:
        return None
    terms = [{key: {"$in": list(value)} if isinstance(value, list | tuple) else {"$eq": value}}
             for key, value in filter_.items()]
    return terms[0] if len(terms) == 1 else {"$and": terms}


class PineconeBackend(VendorBackend[PineconeSettings]):
    """The Pinecone adapter (see the module docstring)."""

    name = "pinecone"

    def __init__(self, settings: PineconeSettings) -> None:
        super().__init__(settings)
        self.client = AsyncPinecone(
            api_key=settings.api_key, host=settings.control_plane_host or None,
            timeout=settings.timeout_seconds, retry_config=RetryConfig(max_retries=0))
        self._index: Any = None

    async def _probe(self) -> None:
        index = await self._data_plane()
        await self._call(index.describe_index_stats)

    async def capabilities(self) -> Capabilities:
        return adapter_capabilities(
            MAX_DIMENSIONS, BATCH, hybrid=self.settings.metric == DistanceMetric.INNER_PRODUCT)

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        index = await self._data_plane()
        for start in range(0, len(records), BATCH):
            vectors = [self._vector(r) for r in records[start:start + BATCH]]
            await self._call(index.upsert, vectors=vectors, namespace=str(tenant_id),
                             show_progress=False)
        return len(records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        index = await self._data_plane()
        vector: list[float] = [float(x) for x in query.vector]
        sparse_vector = None
        if query.hybrid and query.text:
            if self.settings.metric != DistanceMetric.INNER_PRODUCT:
                raise BackendRequestFailed("Pinecone fuses sparse vectors only in a "
                                           "dotproduct index.", details={"backend": self.name})
            indices, values = sparse.query_vector(query.text)
            alpha = 0.5 if query.alpha is None else query.alpha
            vector = [alpha * x for x in vector]
            sparse_vector = {"indices": indices, "values": [(1 - alpha) * v for v in values]}
        response = await self._call(
            index.query, vector=vector, top_k=query.limit, namespace=str(tenant_id),
            filter=pinecone_filter(query.filter), include_metadata=True,
            sparse_vector=sparse_vector)
        hits = []
        for match in response.matches:
            score = float(match.score)
            if self.settings.metric == DistanceMetric.L2:
                score = -score  # Pinecone returns the Euclidean distance for "euclidean"
            if query.min_score is None or score >= query.min_score:
                metadata = dict(match.metadata or {})
                metadata.pop("_text", None)
                hits.append(SearchHit(id=match.id, score=score, metadata=metadata))
        return hits

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        index = await self._data_plane()
        for start in range(0, len(ids), BATCH):
            await self._call(index.delete, ids=list(ids[start:start + BATCH]),
                             namespace=str(tenant_id))
        return len(ids)

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        index = await self._data_plane()
        found: list[VectorRecord] = []
        for start in range(0, len(ids), 100):  # ids travel in the query string
            response = await self._call(index.fetch, ids=list(ids[start:start + 100]),
                                        namespace=str(tenant_id))
            for vector_id, vector in response.vectors.items():
                metadata = dict(vector.metadata or {})
                text = str(metadata.pop("_text", ""))
                found.append(VectorRecord(id=vector_id, vector=tuple(vector.values),
                                          metadata=metadata, text=text))
        return found

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
                   ) -> tuple[list[str], str | None]:
        index = await self._data_plane()
        response = await self._call(index.list_paginated, namespace=str(tenant_id),
                                    limit=min(limit, 100), pagination_token=cursor)
        page = response.pagination
        return [v.id for v in response.vectors], (page.next if page else None)

    async def close(self) -> None:
        if self._index is not None:
            await self._index.close()
        await self.client.close()

    # --- helpers ---------------------------------------------------------------------------

    def _vector(self, record: VectorRecord) -> dict[str, Any]:
        values = self.dense(record)
        metadata: dict[str, Any] = dict(record.metadata)
        if record.text:
            metadata["_text"] = record.text[:2000]  # Pinecone keeps ≤ 40 KB per vector
        vector: dict[str, Any] = {"id": record.id, "values": values, "metadata": metadata}
        if self.settings.metric == DistanceMetric.INNER_PRODUCT and record.text:
            indices, values = sparse.document_vector(record.text)
            vector["sparse_values"] = {"indices": indices, "values": values}
        return vector

    async def _data_plane(self) -> Any:
        if self._index is None:
            host = self.settings.host or await self._index_host()
            index = await self.client.index(host=host)
            _without_sdk_retries(index)
            self._index = index
        return self._index

    async def _index_host(self) -> str:
        try:
            model = await self._call(self.client.describe_index, self.settings.index)
        except BackendRequestFailed as exc:
            if not (self.settings.create_index and exc.details.get("status") == 404):
                raise
            model = await self._call(
                self.client.create_index, name=self.settings.index,
                dimension=self.settings.dimensions, metric=_METRICS[self.settings.metric],
                spec=ServerlessSpec(cloud=self.settings.cloud, region=self.settings.region),
                timeout=int(self.settings.timeout_seconds * 30))
        return str(model.host)

    async def _call(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """``func`` with rate-limit retries (see the module docstring) and errors mapped."""
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(RateLimitError),
            wait=wait_exponential(multiplier=self.settings.backoff_seconds,
                                  max=self.settings.backoff_max_seconds),
            stop=stop_after_attempt(self.settings.max_retries + 1), reraise=True)
        async with translated_errors(self.name, self._translate):
            async for attempt in retrying:
                with attempt:
                    try:
                        return await func(*args, **kwargs)
                    except RateLimitError:
                        metrics.RATE_LIMITS.labels(self.name).inc()
                        raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _translate(self, exc: Exception, details: dict[str, Any]) -> MemoryServiceError | None:
        """The SDK's exceptions as the service's backend errors (a rate limit only once the
        retries ran out)."""
        if isinstance(exc, RateLimitError):
            return RateLimited("Pinecone is rate limiting; retries ran out.",
                               details={"backend": self.name,
                                        "retryAfter": int(self.settings.backoff_max_seconds)})
        if isinstance(exc, PineconeConnectionError | PineconeTimeoutError):
            return BackendUnavailable("Pinecone cannot be reached.", details=details)
        if isinstance(exc, ApiError):
            status = int(getattr(exc, "status_code", 0) or 0)
            details = {"backend": self.name, "status": status, "error": details["error"]}
            if status >= 500:
                return BackendUnavailable("Pinecone failed.", details=details)
            if isinstance(exc, NotFoundError) or status == 404:
                return BackendRequestFailed("Pinecone: not found.", details=details)
            return BackendRequestFailed("Pinecone refused the request.", details=details)
        return None


def _without_sdk_retries(index: Any) -> None:
    """Turn off the SDK's own data-plane retries (3 by default, for 429 and 5xx), so that
    rate limits are retried and counted here and outages reach the circuit breaker at once.

    pinecone 10.2 offers ``retry_config`` only to the control-plane client; its data-plane
    ``AsyncIndex`` builds its HTTP client lazily from ``_http._config``. The operations test
    counts the requests a rate-limited call makes, so a change of this internal shows up.
    """
    http = getattr(index, "_http", None)
    config = getattr(http, "_config", None)
    if config is not None and hasattr(config, "retry_config"):
        http._config = dataclasses.replace(config, retry_config=RetryConfig(max_retries=0))  # type: ignore[union-attr]


#: The registry's factory.
build = factory(PineconeBackend, PineconeSettings)
