"""Qdrant (seed 001 "Qdrant Backend") with ``qdrant-client``: a server, or the embedded
local mode the tests and the benchmark run for real.

- Tenant isolation: one collection per tenant, ``<collection_prefix><tenant_id>``, created
  on the tenant's first upsert; a search never names another collection.
- Points: id = the record id when it is a UUID (memory ids are), else its UUIDv5; payload
  ``{"id", "metadata", "text"}``; vectors ``dense`` (the embedding) and ``bm25`` (sparse
  BM25 term weights, ``vectors.sparse``, with Qdrant's IDF modifier).
- Hybrid search (``hybrid=True`` with ``text``): Qdrant's Query API fuses a dense and a
  sparse prefetch with reciprocal rank fusion (k = 60), weighted ``alpha`` / ``1 − alpha``.
- Filters: ``metadata.<key>`` match conditions, applied by Qdrant during the search.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any, cast

import httpx
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memory_project.errors import MemoryServiceError
from vectors import sparse
from vectors.adapters.common import VendorBackend, adapter_capabilities, factory
from vectors.base import Capabilities, DistanceMetric, Filter, SearchHit, SearchQuery, VectorRecord
from vectors.config import QdrantSettings
from vectors.errors import (
    BackendRequestFailed,
    BackendUnavailable,
    RateLimited,
    translated_errors,
)

DENSE = "dense"
SPARSE = "bm25"
RRF_K = 60
#: Candidates each prefetch of a hybrid search hands to the fusion, per result.
PREFETCH_FACTOR = 4
UPSERT_BATCH = 256
_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_DISTANCES = {
    DistanceMetric.COSINE: models.Distance.COSINE,
    DistanceMetric.L2: models.Distance.EUCLID,
    DistanceMetric.INNER_PRODUCT: models.Distance.DOT,
}


def point_id(record_id: str) -> str:
    """The Qdrant point id of ``record_id``: itself when a UUID, else its UUIDv5."""
    try:
        return str(uuid.UUID(record_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, record_id))


def qdrant_filter(filter_: Filter | None) -> models.Filter | None:
    """The Qdrant filter of a metadata conjunction (``None`` when empty)."""
    if not filter_:
        return None
    must: list[Any] = []
    for key, value in filter_.items():
        path = f"metadata.{key}"
        values: list[Any] = list(value) if isinstance(value, list | tuple) else [value]
        if all(isinstance(v, float) and not isinstance(v, bool) for v in values):
            must.append(models.Filter(should=[
                models.FieldCondition(key=path, range=models.Range(gte=v, lte=v))
                for v in values]))
        elif len(values) == 1:
            must.append(models.FieldCondition(key=path, match=models.MatchValue(value=values[0])))
        else:
            must.append(models.FieldCondition(key=path, match=models.MatchAny(any=values)))
    return models.Filter(must=must)


class QdrantBackend(VendorBackend[QdrantSettings]):
    """The Qdrant adapter (see the module docstring)."""

    name = "qdrant"

    def __init__(self, settings: QdrantSettings) -> None:
        super().__init__(settings)
        if settings.url:
            self.client = AsyncQdrantClient(url=settings.url, api_key=settings.api_key or None,
                                            timeout=int(settings.timeout_seconds))
        elif settings.path == ":memory:":
            self.client = AsyncQdrantClient(location=":memory:")
        else:
            self.client = AsyncQdrantClient(path=settings.path)
        self._collections: set[str] = set()

    def collection(self, tenant_id: str) -> str:
        """The tenant's collection name.

        Raises:
            BackendRequestFailed: a tenant id that cannot be part of a collection name.
        """
        if not _TENANT.match(str(tenant_id)):
            raise BackendRequestFailed("Tenant ids are letters, digits, '-' and '_'.",
                                       details={"backend": self.name})
        return f"{self.settings.collection_prefix}{tenant_id}"

    async def _probe(self) -> None:
        await self.client.get_collections()

    async def capabilities(self) -> Capabilities:
        return adapter_capabilities(65536, UPSERT_BATCH, hybrid=True)

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        name = self.collection(tenant_id)
        async with translated_errors(self.name, _translate):
            await self._ensure(name)
            for start in range(0, len(records), UPSERT_BATCH):
                points = [self._point(r) for r in records[start:start + UPSERT_BATCH]]
                await self.client.upsert(name, points=points, wait=True)
        return len(records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        name = self.collection(tenant_id)
        async with translated_errors(self.name, _translate):
            if not await self._exists(name):
                return []
            condition = qdrant_filter(query.filter)
            if query.hybrid and query.text:
                indices, values = sparse.query_vector(query.text)
                wide = max(query.limit * PREFETCH_FACTOR, 50)
                alpha = 0.5 if query.alpha is None else query.alpha
                result = await self.client.query_points(
                    name,
                    prefetch=[
                        models.Prefetch(query=list(query.vector), using=DENSE, limit=wide,
                                        filter=condition),
                        models.Prefetch(query=models.SparseVector(indices=indices,
                                                                  values=values),
                                        using=SPARSE, limit=wide, filter=condition),
                    ],
                    query=models.RrfQuery(rrf=models.Rrf(
                        k=RRF_K, weights=[alpha, 1.0 - alpha])),
                    limit=query.limit, with_payload=True)
                return [self._hit(p, fused=True) for p in result.points]
            threshold = query.min_score
            if threshold is not None and self.settings.metric == DistanceMetric.L2:
                threshold = -threshold  # Qdrant's threshold is a distance for Euclid
            result = await self.client.query_points(
                name, query=list(query.vector), using=DENSE, limit=query.limit,
                query_filter=condition, score_threshold=threshold, with_payload=True)
        return [self._hit(p) for p in result.points]

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        name = self.collection(tenant_id)
        async with translated_errors(self.name, _translate):
            if not await self._exists(name):
                return 0
            await self.client.delete(
                name, points_selector=models.PointIdsList(points=[point_id(i) for i in ids]),
                wait=True)
        return len(ids)

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        name = self.collection(tenant_id)
        async with translated_errors(self.name, _translate):
            if not await self._exists(name):
                return []
            points = await self.client.retrieve(name, ids=[point_id(i) for i in ids],
                                                with_payload=True, with_vectors=[DENSE])
        return [self._record(p) for p in points]

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 500
                   ) -> tuple[list[str], str | None]:
        name = self.collection(tenant_id)
        async with translated_errors(self.name, _translate):
            if not await self._exists(name):
                return [], None
            points, offset = await self.client.scroll(
                name, limit=limit, offset=cursor, with_payload=["id"], with_vectors=False)
        return [str((p.payload or {}).get("id", p.id)) for p in points], (
            None if offset is None else str(offset))

    async def close(self) -> None:
        await self.client.close()

    async def drop_tenant(self, tenant_id: str) -> None:
        """Delete the tenant's collection (tenant erasure, tests)."""
        name = self.collection(tenant_id)
        async with translated_errors(self.name, _translate):
            await self.client.delete_collection(name)
        self._collections.discard(name)

    # --- helpers ---------------------------------------------------------------------------

    async def _exists(self, name: str) -> bool:
        if name in self._collections:
            return True
        if await self.client.collection_exists(name):
            self._collections.add(name)
            return True
        return False

    async def _ensure(self, name: str) -> None:
        if await self._exists(name):
            return
        try:
            await self.client.create_collection(
                name,
                vectors_config={DENSE: models.VectorParams(
                    size=self.settings.dimensions,
                    distance=_DISTANCES[self.settings.metric])},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(
                    modifier=models.Modifier.IDF)},
            )
        except (UnexpectedResponse, ValueError):
            if not await self.client.collection_exists(name):  # not a lost creation race
                raise
        self._collections.add(name)

    def _point(self, record: VectorRecord) -> models.PointStruct:
        vector: dict[str, Any] = {DENSE: self.dense(record)}
        indices, values = sparse.document_vector(record.text)
        if indices:
            vector[SPARSE] = models.SparseVector(indices=indices, values=values)
        return models.PointStruct(
            id=point_id(record.id), vector=vector,
            payload={"id": record.id, "metadata": dict(record.metadata), "text": record.text})

    def _hit(self, point: models.ScoredPoint, *, fused: bool = False) -> SearchHit:
        payload = point.payload or {}
        score = float(point.score)
        if not fused and self.settings.metric == DistanceMetric.L2:
            score = -score
        return SearchHit(id=str(payload.get("id", point.id)), score=score,
                         metadata=payload.get("metadata", {}))

    @staticmethod
    def _record(point: models.Record) -> VectorRecord:
        payload = point.payload or {}
        vectors = point.vector if isinstance(point.vector, dict) else {DENSE: point.vector}
        return VectorRecord(id=str(payload.get("id", point.id)),
                            vector=tuple(float(x) for x in cast(list[float], vectors[DENSE])),
                            metadata=payload.get("metadata", {}), text=payload.get("text", ""))


def _translate(exc: Exception, details: dict[str, Any]) -> MemoryServiceError | None:
    """Qdrant's and httpx's exceptions as the service's backend errors."""
    if isinstance(exc, UnexpectedResponse):
        if exc.status_code == 429:
            return RateLimited("Qdrant is rate limiting.", details=details)
        if (exc.status_code or 0) >= 500:
            return BackendUnavailable("Qdrant failed.", details=details)
        return BackendRequestFailed("Qdrant refused the request.", details=details)
    if isinstance(exc, ResponseHandlingException | httpx.HTTPError | OSError):
        return BackendUnavailable("Qdrant cannot be reached.", details=details)
    return None


#: The registry's factory.
build = factory(QdrantBackend, QdrantSettings)
