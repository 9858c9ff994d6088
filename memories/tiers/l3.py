"""L3, the configured vector backend (seed 004 "L3 vector database integration"), as the
memory system uses it.

PostgreSQL (L2) is the system of record and keeps every memory's vector. With the default
backend, pgvector, L3 *is* that column (``Capabilities.shares_system_of_record``): nothing is
copied and the semantic list is today's SQL (``memories.retrieval.semantic``). With any other
backend (Qdrant, Weaviate, ...):

- **Writes.** Storing, changing, soft-deleting, restoring, re-embedding or erasing memories
  queues one :data:`SYNC_TASK` job in the writer's transaction (the job outbox,
  ``jobs.services``). The job reads the memories' current rows and upserts the live ones'
  vectors (metadata: layer, kind, scope, identifiers, scalar metadata) or deletes the others
  from the backend, so it is idempotent and order does not matter. When the backend is
  unavailable (error, timeout, open circuit), the job puts itself back in the outbox
  (``jobs.services.job_defer``), which the drain sends again every 30 s: vectors written
  while L3 is down reach it when it returns; nothing is lost.
- **Search.** :func:`semantic_candidates` asks the backend for the layer's nearest
  neighbours (the layer and its identifier columns pushed down as a metadata filter), then
  reads those ids from the caller's scoped queryset, so row-level security, the state,
  scope, metadata filters and key restrictions still decide what is returned; cosine
  distances are recomputed in PostgreSQL so scores stay comparable with the other lists.
  When the backend is unavailable, the list is an exact scan of the caller's scope in
  PostgreSQL instead (:class:`DegradedList`) and the search is flagged degraded
  (``X-Memory-Degraded: vector_backend``), never failed (seed 004 "Vector database
  unavailable").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from django.db.models import FloatField, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from pgvector.django import CosineDistance

from jobs.services import job_defer, job_enqueue
from memories.models import UNSERVED_COLUMNS, Memory, State
from memories.retrieval.pgvector_backend import COLUMNS, row_metadata
from memories.retrieval.semantic import semantic_list
from memory_project.errors import ServiceUnavailable
from tenants.context import TenantContext, require_context
from tenants.layers import Layer
from vectors import registry
from vectors.base import Filter, SearchQuery, VectorRecord
from vectors.runner import call

logger = logging.getLogger(__name__)

SYNC_TASK = "memories.l3_sync"
#: Memories per sync job.
SYNC_BATCH = 200
#: Candidates asked of the backend per wanted result (the scoped read drops some), and the
#: most one search asks for.
OVERFETCH = 3
MAX_FETCH = 1000


class DegradedList(list[Memory]):
    """A semantic list served by PostgreSQL because the vector backend was unavailable."""

    degraded = True


def separate() -> bool:
    """Whether L3 is a backend of its own (not pgvector's column of the memories table)."""
    return registry.configured().backend != "pgvector"


def l3_queue(ctx: TenantContext, memory_ids: Sequence[Any]) -> int:
    """Queue the sync of ``memory_ids`` to L3 in the current transaction (nothing when L3 is
    pgvector). Returns the number of jobs queued."""
    if not memory_ids or not separate():
        return 0
    ids = sorted({str(i) for i in memory_ids})
    for start in range(0, len(ids), SYNC_BATCH):
        job_enqueue(ctx, task=SYNC_TASK,
                    args=[str(ctx.tenant_id), ids[start:start + SYNC_BATCH]])
    return -(-len(ids) // SYNC_BATCH)


def l3_sync(ctx: TenantContext, memory_ids: Sequence[str]) -> dict[str, int]:
    """Make L3 hold exactly the vectors of ``memory_ids`` that L2 holds live: upsert the
    memories that exist and are not deleted (vector, text, ``row_metadata``); delete the
    rest.

    Returns:
        ``{"upserted": n, "deleted": m, "deferred": d}``; ``deferred`` counts the ids put
        back in the outbox because the backend was unavailable.
    """
    if not separate():
        return {"upserted": 0, "deleted": 0, "deferred": 0}
    ids = [str(i) for i in memory_ids]
    rows = (Memory.objects.filter(pk__in=ids).exclude(state=State.DELETED)
            .only("id", "content", "embedding", "metadata", *COLUMNS))
    records = [VectorRecord(id=str(m.pk), vector=tuple(float(x) for x in m.embedding),
                            metadata=row_metadata(m), text=m.content) for m in rows]
    live = {r.id for r in records}
    gone = [i for i in ids if i not in live]
    backend = registry.backend()
    tenant = str(ctx.tenant_id)
    try:
        if records:
            call(backend.upsert, tenant, records)
        if gone:
            call(backend.delete, tenant, gone)
    except ServiceUnavailable as exc:
        logger.warning("L3 %s unavailable, %d memories wait in the outbox: %s",
                       backend.name, len(ids), exc)
        job_defer(ctx, task=SYNC_TASK, args=[str(ctx.tenant_id), ids])
        return {"upserted": 0, "deleted": 0, "deferred": len(ids)}
    return {"upserted": len(records), "deleted": len(gone), "deferred": 0}


def pushdown(layer: Layer, columns: dict[str, Any]) -> Filter:
    """The metadata filter a backend applies for one layer's scope: the layer and its
    required identifier columns (``tenants.layers.require_identifiers``)."""
    return {"layer": layer.value, **{k: v for k, v in columns.items() if v is not None}}


def semantic_candidates(base: QuerySet[Memory], vector: np.ndarray, limit: int,
                        threshold: float, *, layer_filter: Filter | None = None
                        ) -> list[Memory]:
    """A layer's semantic list through L3: at most ``limit`` memories of ``base``, nearest
    first, each with ``distance`` (cosine, from PostgreSQL) and similarity ≥ ``threshold``.

    pgvector: :func:`memories.retrieval.semantic.semantic_list`. Another backend: its
    nearest ``OVERFETCH × limit`` ids in the caller's tenant under ``layer_filter``,
    narrowed by ``base`` (asked once more, up to ``MAX_FETCH``, when the narrowing left
    fewer than ``limit`` of a full answer). Backend unavailable: an exact scan of ``base``
    (:class:`DegradedList`).
    """
    if not separate():
        return semantic_list(base, vector, limit, threshold)
    backend = registry.backend()
    fetch = min(MAX_FETCH, OVERFETCH * limit)
    query = tuple(float(x) for x in vector)
    while True:
        try:
            hits = call(backend.search, str(require_context().tenant_id), SearchQuery(
                vector=query, limit=fetch, filter=layer_filter, min_score=threshold))
        except ServiceUnavailable as exc:
            logger.warning("L3 %s unavailable, exact scan in PostgreSQL: %s", backend.name, exc)
            return DegradedList(exact_list(base, vector, limit, threshold))
        rows = _rows_in_order(base, vector, [h.id for h in hits])
        if len(rows) >= limit or len(hits) < fetch or fetch >= MAX_FETCH:
            return [m for m in rows if 1.0 - float(cast(Any, m).distance) >= threshold][:limit]
        fetch = min(MAX_FETCH, fetch * 4)


def _rows_in_order(base: QuerySet[Memory], vector: np.ndarray, ids: list[str]) -> list[Memory]:
    if not ids:
        return []
    found = {str(m.pk): m for m in base.defer(*UNSERVED_COLUMNS).filter(pk__in=ids)
             .annotate(distance=CosineDistance("embedding", vector))}
    return [found[i] for i in ids if i in found]


def exact_list(base: QuerySet[Memory], vector: np.ndarray, limit: int, threshold: float
               ) -> list[Memory]:
    """The exact nearest ``limit`` memories of ``base`` by cosine similarity (≥ ``threshold``),
    scanning the scope without the HNSW index (``distance + 0`` keeps the planner off it)."""
    exact = ExpressionWrapper(CosineDistance("embedding", vector) + Value(0.0),
                              output_field=FloatField())
    rows = base.defer(*UNSERVED_COLUMNS).annotate(distance=exact).order_by("distance", "pk")
    return [m for m in rows[:limit] if 1.0 - float(cast(Any, m).distance) >= threshold]
