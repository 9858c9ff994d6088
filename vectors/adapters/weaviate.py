"""Weaviate (seed 001 "Weaviate Backend") with the official ``weaviate-client`` v4 (async):
REST for the schema and readiness, gRPC for writes and queries.

- Schema: one collection ``collection`` (created on first use) with self-provided vectors
  (HNSW, the configured distance) and the properties ``tenant_id`` and ``record_id``
  (field-tokenised, filterable), ``text`` (word-tokenised: BM25) and ``metadata_json``
  (the metadata as stored); each metadata key is also a filterable property ``meta_<key>``.
- Tenant isolation: the tenant key property ``tenant_id`` on every object and a
  ``tenant_id`` filter on every query, read and delete; object UUIDs derive from tenant and
  id, so two tenants' records never share an object.
- Hybrid search (``hybrid=True``): Weaviate's hybrid query, BM25 on ``text`` fused with the
  vector search by relative score with ``alpha`` (the query's, default ``WEAVIATE_ALPHA``).
- ``min_score`` on a vector search becomes Weaviate's ``distance`` limit (1 − similarity).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import grpc
import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization, VectorDistances
from weaviate.classes.init import AdditionalConfig, Auth, Timeout
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort
from weaviate.collections.classes.data import DataObject
from weaviate.exceptions import (
    UnexpectedStatusCodeError,
    WeaviateBaseError,
    WeaviateConnectionError,
    WeaviateTimeoutError,
)

from memory_project.errors import MemoryServiceError
from vectors.adapters.common import VendorBackend, adapter_capabilities, causes, factory
from vectors.base import Capabilities, DistanceMetric, SearchHit, SearchQuery, VectorRecord
from vectors.base import Filter as MetadataFilter
from vectors.config import WeaviateSettings
from vectors.errors import (
    BackendRequestFailed,
    BackendUnavailable,
    RateLimited,
    translated_errors,
)

BATCH = 1000
_DISTANCES = {DistanceMetric.COSINE: VectorDistances.COSINE,
              DistanceMetric.L2: VectorDistances.L2_SQUARED,
              DistanceMetric.INNER_PRODUCT: VectorDistances.DOT}
_RETURNED = ["record_id", "metadata_json", "text"]


def object_uuid(tenant_id: str, record_id: str) -> str:
    """The Weaviate object id of a tenant's record."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memory:{tenant_id}:{record_id}"))


def weaviate_filter(tenant_id: str, filter_: MetadataFilter | None) -> Any:
    """The tenant filter and-ed with the metadata terms (``meta_<key>`` properties)."""
    condition = Filter.by_property("tenant_id").equal(str(tenant_id))
    for key, value in (filter_ or {}).items():
        prop = Filter.by_property(f"meta_{key}")
        scalar: Any = value  # not a list or tuple in the else branch
        term = (prop.contains_any(list(value)) if isinstance(value, list | tuple)
                else prop.equal(scalar))
        condition = condition & term
    return condition


class WeaviateBackend(VendorBackend[WeaviateSettings]):
    """The Weaviate adapter (see the module docstring)."""

    name = "weaviate"

    def __init__(self, settings: WeaviateSettings) -> None:
        super().__init__(settings)
        url = urlsplit(settings.url)
        secure = url.scheme == "https"
        timeout = int(settings.timeout_seconds)
        self.client = weaviate.use_async_with_custom(
            http_host=url.hostname or "localhost", http_port=url.port or (443 if secure else 80),
            http_secure=secure, grpc_host=settings.grpc_host or url.hostname or "localhost",
            grpc_port=settings.grpc_port, grpc_secure=secure,
            auth_credentials=Auth.api_key(settings.api_key) if settings.api_key else None,
            additional_config=AdditionalConfig(
                timeout=Timeout(init=timeout, query=timeout, insert=timeout)))
        self._ready = False

    async def _probe(self) -> None:
        await self._collection()
        if not await self.client.is_ready():
            raise BackendUnavailable("Weaviate is not ready.", details={"backend": self.name})

    async def capabilities(self) -> Capabilities:
        return adapter_capabilities(65535, BATCH, hybrid=True)

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        collection = await self._collection()
        async with translated_errors(self.name, _translate):
            for start in range(0, len(records), BATCH):
                objects = [self._object(tenant_id, r) for r in records[start:start + BATCH]]
                result = await collection.data.insert_many(objects)
                if result.errors:
                    first = next(iter(result.errors.values()))
                    raise BackendRequestFailed(
                        f"Weaviate refused {len(result.errors)} objects.",
                        details={"backend": self.name, "error": str(first.message)[:300]})
        return len(records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        collection = await self._collection()
        filters = weaviate_filter(tenant_id, query.filter)
        async with translated_errors(self.name, _translate):
            if query.hybrid and query.text:
                alpha = query.alpha if query.alpha is not None else self.settings.alpha
                result = await collection.query.hybrid(
                    query=query.text, vector=[float(x) for x in query.vector], alpha=alpha,
                    fusion_type=HybridFusion.RELATIVE_SCORE, query_properties=["text"],
                    limit=query.limit, filters=filters, return_properties=_RETURNED,
                    return_metadata=MetadataQuery(score=True))
                return [self._hit(o, float(o.metadata.score or 0.0)) for o in result.objects]
            limit = None
            if query.min_score is not None and self.settings.metric == DistanceMetric.COSINE:
                limit = 1.0 - query.min_score
            result = await collection.query.near_vector(
                near_vector=[float(x) for x in query.vector], limit=query.limit,
                distance=limit, filters=filters, return_properties=_RETURNED,
                return_metadata=MetadataQuery(distance=True))
        return [self._hit(o, self._score(float(o.metadata.distance or 0.0)))
                for o in result.objects]

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        collection = await self._collection()
        async with translated_errors(self.name, _translate):
            for start in range(0, len(ids), BATCH):
                uuids = [object_uuid(tenant_id, i) for i in ids[start:start + BATCH]]
                await collection.data.delete_many(
                    where=Filter.by_id().contains_any(uuids)
                    & Filter.by_property("tenant_id").equal(str(tenant_id)))
        return len(ids)

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        collection = await self._collection()
        found: list[VectorRecord] = []
        async with translated_errors(self.name, _translate):
            for start in range(0, len(ids), BATCH):
                uuids = [object_uuid(tenant_id, i) for i in ids[start:start + BATCH]]
                result = await collection.query.fetch_objects(
                    filters=Filter.by_id().contains_any(uuids)
                    & Filter.by_property("tenant_id").equal(str(tenant_id)),
                    limit=len(uuids), include_vector=True, return_properties=_RETURNED)
                for item in result.objects:
                    vector = item.vector.get("default") if isinstance(item.vector, dict) else None
                    props = item.properties
                    found.append(VectorRecord(
                        id=str(props["record_id"]), vector=tuple(vector or ()),
                        metadata=json.loads(str(props.get("metadata_json") or "{}")),
                        text=str(props.get("text") or "")))
        return found

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 500
                   ) -> tuple[list[str], str | None]:
        """Pages by offset, sorted by record id: Weaviate's ``after`` cursor cannot be
        combined with the tenant filter. Offsets reach ``QUERY_MAXIMUM_RESULTS`` (10,000 by
        default) objects per tenant; raise it on the server to copy larger tenants."""
        collection = await self._collection()
        offset = int(cursor or 0)
        async with translated_errors(self.name, _translate):
            result = await collection.query.fetch_objects(
                filters=Filter.by_property("tenant_id").equal(str(tenant_id)),
                offset=offset, limit=limit, sort=Sort.by_property("record_id"),
                return_properties=["record_id"])
        ids = [str(o.properties["record_id"]) for o in result.objects]
        return ids, (str(offset + limit) if len(ids) == limit else None)

    async def close(self) -> None:
        await self.client.close()

    # --- helpers ---------------------------------------------------------------------------

    def _score(self, distance: float) -> float:
        if self.settings.metric == DistanceMetric.COSINE:
            return 1.0 - distance
        return -distance  # l2-squared: smaller is nearer; dot: Weaviate's distance is −dot

    @staticmethod
    def _hit(item: Any, score: float) -> SearchHit:
        props = item.properties
        return SearchHit(id=str(props["record_id"]), score=score,
                         metadata=json.loads(str(props.get("metadata_json") or "{}")))

    def _object(self, tenant_id: str, record: VectorRecord) -> DataObject[Any, Any]:
        vector = self.dense(record)
        properties: dict[str, Any] = {
            "tenant_id": str(tenant_id), "record_id": record.id, "text": record.text,
            "metadata_json": json.dumps(dict(record.metadata))}
        properties.update({f"meta_{k}": v for k, v in record.metadata.items()})
        return DataObject(properties=properties, uuid=object_uuid(tenant_id, record.id),
                          vector=vector)

    async def _collection(self) -> Any:
        """The collection, after connecting and creating it when missing."""
        async with translated_errors(self.name, _translate):
            if not self.client.is_connected():
                await self.client.connect()
            collection = self.client.collections.use(self.settings.collection)
            if not self._ready:
                if not await self.client.collections.exists(self.settings.collection):
                    await self._create()
                self._ready = True
        return collection

    async def _create(self) -> None:
        keyword: dict[str, Any] = {"data_type": DataType.TEXT, "tokenization": Tokenization.FIELD,
                   "index_filterable": True, "index_searchable": False}
        try:
            await self.client.collections.create(
                self.settings.collection,
                vector_config=Configure.Vectors.self_provided(
                    vector_index_config=Configure.VectorIndex.hnsw(
                        distance_metric=_DISTANCES[self.settings.metric])),
                properties=[
                    Property(name="tenant_id", **keyword),
                    Property(name="record_id", **keyword),
                    Property(name="text", data_type=DataType.TEXT,
                             tokenization=Tokenization.WORD),
                    Property(name="metadata_json", data_type=DataType.TEXT,
                             index_filterable=False, index_searchable=False),
                ])
        except UnexpectedStatusCodeError:
            if not await self.client.collections.exists(self.settings.collection):
                raise  # not a creation race lost to another process


def _translate(exc: Exception, details: dict[str, Any]) -> MemoryServiceError | None:
    """The client's exceptions as the service's backend errors."""
    if not isinstance(exc, WeaviateBaseError):
        return None
    status = getattr(exc, "status_code", 0) or 0
    code = _grpc_code(exc)
    if status == 429 or code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return RateLimited("Weaviate is rate limiting.", details=details)
    if (isinstance(exc, WeaviateConnectionError | WeaviateTimeoutError) or status >= 500
            or code in _UNAVAILABLE):
        return BackendUnavailable("Weaviate cannot be reached or failed.", details=details)
    return BackendRequestFailed("Weaviate refused the request.", details=details)


_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


def _grpc_code(exc: BaseException) -> grpc.StatusCode | None:
    """The gRPC status behind a client exception (the client keeps only the message)."""
    for seen in causes(exc):
        code = getattr(seen, "code", None)
        if callable(code):
            try:
                return code()  # type: ignore[no-any-return]
            except Exception:
                return None
    return None


#: The registry's factory.
build = factory(WeaviateBackend, WeaviateSettings)
