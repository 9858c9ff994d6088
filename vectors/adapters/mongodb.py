"""MongoDB Atlas Vector Search (seed 001 "MongoDB Atlas Vector Search Backend") with the
official driver ``pymongo`` (its asyncio client).

- Documents: ``{_id: "<tenant>:<id>", tenant_id, record_id, embedding, text, metadata}``;
  the ``_id`` carries the tenant, so a read or delete by id never reaches another tenant.
- Index check at start: before its first operation (and in every health check) the adapter
  reads the Atlas Vector Search index ``index`` (``$listSearchIndexes``) and refuses to run
  unless it is queryable, indexes ``embedding`` with the configured dimensions and has
  ``tenant_id`` as a filter field. Its other filter fields (``metadata.<key>``) say which
  metadata filters Atlas can apply.
- Search: one ``$vectorSearch`` stage (``numCandidates`` = ``candidates_factor`` × limit)
  whose ``filter`` always holds ``tenant_id`` plus the metadata terms on indexed filter
  fields; the others are applied to a wider result list afterwards. Atlas scores cosine as
  ``(1 + cos) / 2``; the adapter returns the cosine similarity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pymongo import AsyncMongoClient, ReplaceOne
from pymongo import errors as mongo_errors

from memory_project.errors import MemoryServiceError
from vectors.adapters.common import POST_FILTER_FACTOR as POST_FILTER_FACTOR  # importable here too
from vectors.adapters.common import PostFilter, VendorBackend, adapter_capabilities, factory
from vectors.base import Capabilities, DistanceMetric, SearchHit, SearchQuery, VectorRecord
from vectors.config import MongodbSettings
from vectors.errors import (
    BackendRequestFailed,
    BackendUnavailable,
    RateLimited,
    translated_errors,
)

BATCH = 1000
_SIMILARITY = {DistanceMetric.COSINE: "cosine", DistanceMetric.L2: "euclidean",
               DistanceMetric.INNER_PRODUCT: "dotProduct"}


class MongodbBackend(VendorBackend[MongodbSettings]):
    """The MongoDB Atlas adapter (see the module docstring)."""

    name = "mongodb"

    def __init__(self, settings: MongodbSettings) -> None:
        super().__init__(settings)
        self.client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            settings.uri, serverSelectionTimeoutMS=int(settings.timeout_seconds * 1000),
            connectTimeoutMS=int(settings.timeout_seconds * 1000),
            socketTimeoutMS=int(settings.timeout_seconds * 1000))
        self.collection = self.client[settings.database][settings.collection]
        self._filter_fields: frozenset[str] | None = None

    async def _probe(self) -> None:
        async with translated_errors(self.name, _translate):
            await self.client.admin.command("ping")
        self._filter_fields = None
        await self._checked()

    async def capabilities(self) -> Capabilities:
        return adapter_capabilities(8192, BATCH, hybrid=False)

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        await self._checked()
        async with translated_errors(self.name, _translate):
            for start in range(0, len(records), BATCH):
                operations = [ReplaceOne({"_id": self._id(tenant_id, r.id)},
                                         self._document(tenant_id, r), upsert=True)
                              for r in records[start:start + BATCH]]
                await self.collection.bulk_write(operations, ordered=False)
        return len(records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        if query.hybrid:
            raise BackendRequestFailed("This adapter runs $vectorSearch only.",
                                       details={"backend": self.name})
        indexed = await self._checked()
        pushed: dict[str, Any] = {"tenant_id": str(tenant_id)}
        rest: dict[str, Any] = {}
        for key, value in (query.filter or {}).items():
            if f"metadata.{key}" in indexed:
                pushed[f"metadata.{key}"] = (
                    {"$in": list(value)} if isinstance(value, list | tuple) else value)
            else:
                rest[key] = value
        after = PostFilter(rest, query.limit, query.min_score)
        limit = after.candidates
        pipeline = [
            {"$vectorSearch": {
                "index": self.settings.index, "path": "embedding",
                "queryVector": [float(x) for x in query.vector],
                "numCandidates": limit * self.settings.candidates_factor, "limit": limit,
                "filter": pushed}},
            {"$project": {"_id": 0, "record_id": 1, "metadata": 1,
                          "score": {"$meta": "vectorSearchScore"}}},
        ]
        async with translated_errors(self.name, _translate):
            cursor = await self.collection.aggregate(pipeline)
            documents = await cursor.to_list()
        hits = [SearchHit(id=d["record_id"], score=self._similarity(float(d["score"])),
                          metadata=d.get("metadata", {})) for d in documents]
        return after.apply(hits)

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        async with translated_errors(self.name, _translate):
            await self.collection.delete_many(
                {"_id": {"$in": [self._id(tenant_id, i) for i in ids]},
                 "tenant_id": str(tenant_id)})
        return len(ids)

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        async with translated_errors(self.name, _translate):
            cursor = self.collection.find(
                {"_id": {"$in": [self._id(tenant_id, i) for i in ids]},
                 "tenant_id": str(tenant_id)})
            documents = await cursor.to_list()
        return [VectorRecord(id=d["record_id"], vector=tuple(d["embedding"]),
                             metadata=d.get("metadata", {}), text=d.get("text", ""))
                for d in documents]

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 500
                   ) -> tuple[list[str], str | None]:
        query: dict[str, Any] = {"tenant_id": str(tenant_id)}
        if cursor:
            query["_id"] = {"$gt": self._id(tenant_id, cursor)}
        async with translated_errors(self.name, _translate):
            found = self.collection.find(query, {"record_id": 1}).sort("_id", 1).limit(limit)
            documents = await found.to_list()
        ids = [d["record_id"] for d in documents]
        return ids, (ids[-1] if len(ids) == limit else None)

    async def close(self) -> None:
        await self.client.close()

    # --- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _id(tenant_id: str, record_id: str) -> str:
        return f"{tenant_id}:{record_id}"

    def _document(self, tenant_id: str, record: VectorRecord) -> dict[str, Any]:
        embedding = self.dense(record)
        return {"_id": self._id(tenant_id, record.id), "tenant_id": str(tenant_id),
                "record_id": record.id, "embedding": embedding,
                "text": record.text, "metadata": dict(record.metadata)}

    def _similarity(self, score: float) -> float:
        """The trait's score from Atlas's normalised ``vectorSearchScore``."""
        if self.settings.metric == DistanceMetric.L2:
            return -(1.0 / score - 1.0) if score > 0 else float("-inf")  # score = 1/(1+d)
        return 2.0 * score - 1.0  # cosine and dotProduct: score = (1 + x) / 2

    async def _checked(self) -> frozenset[str]:
        """The index's filter fields, after checking the index once (see the docstring).

        Raises:
            BackendRequestFailed: no such index, not queryable, or not fit for this service.
        """
        if self._filter_fields is not None:
            return self._filter_fields
        async with translated_errors(self.name, _translate):
            cursor = await self.collection.list_search_indexes(self.settings.index)
            indexes = await cursor.to_list()
        problem = _index_problem(indexes, self.settings)
        if problem:
            raise BackendRequestFailed(f"Atlas Vector Search index {self.settings.index!r}: "
                                       f"{problem}.", details={"backend": self.name})
        fields = indexes[0].get("latestDefinition", {}).get("fields", [])
        self._filter_fields = frozenset(f["path"] for f in fields if f.get("type") == "filter")
        return self._filter_fields


def _index_problem(indexes: Sequence[Mapping[str, Any]], settings: MongodbSettings) -> str:
    """What makes the listed index unusable, or ``""``."""
    if not indexes:
        return "missing"
    index = indexes[0]
    if index.get("type") != "vectorSearch":
        return f"is of type {index.get('type')!r}, not vectorSearch"
    if not index.get("queryable"):
        return f"not queryable (status {index.get('status')})"
    fields = index.get("latestDefinition", {}).get("fields", [])
    vectors = [f for f in fields if f.get("type") == "vector" and f.get("path") == "embedding"]
    if not vectors:
        return "does not index the path 'embedding'"
    if vectors[0].get("numDimensions") != settings.dimensions:
        return f"has {vectors[0].get('numDimensions')} dimensions, not {settings.dimensions}"
    if vectors[0].get("similarity") != _SIMILARITY[settings.metric]:
        return f"uses {vectors[0].get('similarity')}, not {_SIMILARITY[settings.metric]}"
    if not any(f.get("type") == "filter" and f.get("path") == "tenant_id" for f in fields):
        return "has no filter field 'tenant_id'"
    return ""


def _translate(exc: Exception, details: dict[str, Any]) -> MemoryServiceError | None:
    """The driver's exceptions as the service's backend errors."""
    if isinstance(exc, mongo_errors.OperationFailure):
        details["mongoCode"] = exc.code
        if exc.code in (16500, 429):  # Atlas: request rate too large
            return RateLimited("MongoDB Atlas is rate limiting.", details=details)
        return BackendRequestFailed("MongoDB refused the operation.", details=details)
    if isinstance(exc, mongo_errors.PyMongoError):
        return BackendUnavailable("MongoDB cannot be reached.", details=details)
    return None


#: The registry's factory.
build = factory(MongodbBackend, MongodbSettings)
