"""pgvector as a vector backend (seed 001 "pgvector Backend"): the ``embedding`` column of
the memories table, the default backend.

The memories table is both the system of record and the vector store, so:

- tenant isolation is row-level security plus the tenant-scoped manager, as for every
  memory read: the adapter runs in the caller's tenant scope and refuses another tenant id;
- ``upsert`` sets the vectors of existing memories (it creates none; metadata stay the row's
  own); ``delete`` removes nothing: a memory's vector goes when the memory is deleted;
- ``get``/``search``/``scan`` see memories that are not deleted; metadata are the row's
  ``metadata`` plus its layer, kind, scope, identifiers and task (filters on those keys use the
  columns, other keys the ``metadata`` JSON);
- search with the cosine metric is today's semantic search (``memories.retrieval.semantic.nearest``:
  HNSW with ``hnsw.ef_search``, exact scans for small scopes); L2 and inner product order by
  ``<->`` / ``<#>``. Index type and metric are chosen by ``PGVECTOR_INDEX_TYPE`` and
  ``PGVECTOR_DISTANCE``.

Django's ORM is synchronous: each operation runs in the calling thread
(``sync_to_async(thread_sensitive=True)``), i.e. in the caller's transaction and scope.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import Q, QuerySet
from pgvector.django import L2Distance, MaxInnerProduct

from memories.models import Memory, State
from memories.retrieval.semantic import nearest
from tenants.context import require_context
from vectors.base import (
    Capabilities,
    DistanceMetric,
    Filter,
    HealthStatus,
    Healthy,
    MetadataValue,
    SearchHit,
    SearchQuery,
    VectorBackend,
    VectorRecord,
    unhealthy,
)
from vectors.config import BackendSettings, PgvectorSettings
from vectors.errors import BackendRequestFailed

#: Metadata keys served by the memory's own columns.
COLUMNS = ("layer", "kind", "scope", "agent_id", "user_id", "session_id", "project_id",
           "team_id", "org_id", "company_id", "task_id")
#: pgvector's limit for indexed vectors (HNSW and IVFFlat, ``vector`` type).
MAX_INDEXED_DIMENSIONS = 2000


def row_metadata(memory: Memory) -> dict[str, MetadataValue]:
    """A memory's metadata as the vector backends see it: its scalar ``metadata`` entries,
    then its layer, kind, scope, and the identifiers and task that are set."""
    meta: dict[str, MetadataValue] = {
        k: v for k, v in (memory.metadata or {}).items()
        if isinstance(v, str | int | float | bool)}
    for column in COLUMNS:
        value = getattr(memory, column)
        if value is not None:
            meta[column] = value
    return meta


def filter_q(filter_: Filter | None) -> Q:
    """The ``Q`` of a metadata conjunction: columns for :data:`COLUMNS`, JSON otherwise."""
    q = Q()
    for key, value in (filter_ or {}).items():
        field = key if key in COLUMNS else f"metadata__{key}"
        if isinstance(value, list | tuple):
            q &= Q(**{f"{field}__in": list(value)})
        else:
            q &= Q(**{field: value})
    return q


class PgvectorBackend(VectorBackend):
    """The pgvector adapter (see the module docstring)."""

    name = "pgvector"
    runs_in_caller_thread = True

    def __init__(self, settings: PgvectorSettings) -> None:
        self.settings = settings

    async def health_check(self, tenant_id: str | None = None) -> HealthStatus:
        return await sync_to_async(self._health)()

    async def capabilities(self) -> Capabilities:
        return Capabilities(
            max_vector_dimensions=MAX_INDEXED_DIMENSIONS, supports_metadata_filter=True,
            supports_hybrid_search=False, supports_batch_upsert=True,
            distance_metrics=tuple(DistanceMetric), max_batch_size=1000,
            shares_system_of_record=True)

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        return await sync_to_async(self._upsert)(tenant_id, records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        return await sync_to_async(self._search)(tenant_id, query)

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        self._scope(tenant_id)
        return 0

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        return await sync_to_async(self._get)(tenant_id, ids)

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 500
                   ) -> tuple[list[str], str | None]:
        return await sync_to_async(self._scan)(tenant_id, cursor, limit)

    # --- synchronous work, in the caller's thread ------------------------------------------

    def _scope(self, tenant_id: str) -> QuerySet[Memory]:
        ctx = require_context()
        if str(ctx.tenant_id) != str(tenant_id):
            raise BackendRequestFailed(
                "pgvector works in the caller's tenant scope; another tenant was named.",
                details={"backend": self.name})
        return Memory.objects.exclude(state=State.DELETED)

    def _health(self) -> HealthStatus:
        start = time.perf_counter()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                if cursor.fetchone() is None:
                    raise RuntimeError("the vector extension is not installed")
                cursor.execute("SELECT '[1,0]'::vector <=> '[0,1]'::vector")
                cursor.fetchone()
        except Exception as exc:
            return unhealthy(exc, start)
        return Healthy(latency_ms=(time.perf_counter() - start) * 1000)

    def _upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        base = self._scope(tenant_id)
        stored = 0
        for record in records:
            if len(record.vector) != self.settings.dimensions:
                raise BackendRequestFailed(
                    f"Vectors have {self.settings.dimensions} dimensions here.",
                    details={"backend": self.name, "got": len(record.vector)})
            stored += base.filter(pk=record.id).update(embedding=np.asarray(record.vector))
        return stored

    def _search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        if query.hybrid:
            raise BackendRequestFailed("pgvector does not fuse keyword search itself.",
                                       details={"backend": self.name})
        base = self._scope(tenant_id).filter(filter_q(query.filter))
        vector = np.asarray(query.vector, dtype=np.float32)
        metric = self.settings.metric
        hits: list[SearchHit] = []
        for memory, score in self._ranked(base, vector, query.limit, metric):
            if query.min_score is None or score >= query.min_score:
                hits.append(SearchHit(id=str(memory.pk), score=score,
                                      metadata=row_metadata(memory)))
        return hits

    def _ranked(self, base: QuerySet[Memory], vector: np.ndarray, limit: int,
                metric: DistanceMetric) -> list[tuple[Memory, float]]:
        if metric == DistanceMetric.COSINE:
            return [(m, 1.0 - float(cast(Any, m).distance)) for m in nearest(base, vector, limit)]
        self._set_probes()
        if metric == DistanceMetric.L2:
            rows = base.annotate(distance=L2Distance("embedding", vector)).order_by("distance")
            return [(m, -float(cast(Any, m).distance)) for m in rows[:limit]]
        rows = base.annotate(distance=MaxInnerProduct("embedding", vector)).order_by("distance")
        return [(m, -float(cast(Any, m).distance)) for m in rows[:limit]]  # <#> is −(inner product)

    def _set_probes(self) -> None:
        if self.settings.index_type == "ivfflat" and connection.in_atomic_block:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('ivfflat.probes', %s, true)",
                               [str(self.settings.ivfflat_probes)])

    def _get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        rows = self._scope(tenant_id).filter(pk__in=list(ids))
        return [VectorRecord(id=str(m.pk), vector=tuple(float(x) for x in m.embedding),
                             metadata=row_metadata(m), text=m.content) for m in rows]

    def _scan(self, tenant_id: str, cursor: str | None, limit: int
              ) -> tuple[list[str], str | None]:
        rows = self._scope(tenant_id).order_by("pk")
        if cursor:
            rows = rows.filter(pk__gt=cursor)
        ids = [str(pk) for pk in rows.values_list("pk", flat=True)[:limit]]
        return ids, (ids[-1] if len(ids) == limit else None)


def build(settings: BackendSettings) -> Any:
    """The registry's factory (registered by ``memories.apps``)."""
    assert isinstance(settings, PgvectorSettings)
    return PgvectorBackend(settings)
