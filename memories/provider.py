"""The memory provider adapter of seed 000/001 ("Memory Provider Adapter Trait") and the
PostgreSQL + pgvector provider that implements it.

Every method takes the caller's :class:`TenantContext` explicitly and runs inside its tenant
scope, so a provider call is bounded by row-level security like an API request.
"""

from __future__ import annotations

import builtins
import time
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from django.core.cache import cache
from django.db import connection

from memories.embedding.embedders import embed_texts, get_embedder
from memories.models import EMBEDDING_DIMENSIONS, Memory
from memories.retrieval.filters import MetadataFilter
from memories.retrieval.search import SearchRequest, SearchResult, memory_search
from memories.selectors import memory as selectors
from memories.services import deletion, references
from memories.services import memory as services
from memories.services.memory import AddResult, MemoryInput, UpdateResult
from tenants.context import TenantContext
from tenants.entry import run_in_scope
from tenants.layers import LayerIdentifiers


class MemoryProvider(ABC):
    """What every memory backend implements (seed 001 ``MemoryProviderAdapter``).

    ``bulk_add`` and ``bulk_delete`` are optional: the defaults loop over ``add``/``delete``
    and ``capabilities()["bulkOperations"]`` says whether a provider has real ones.
    """

    name: str
    version: str

    @abstractmethod
    def initialize(self, config: dict[str, Any] | None = None) -> None:
        """Connect and prepare; idempotent."""

    @abstractmethod
    def shutdown(self) -> None:
        """Release resources."""

    @abstractmethod
    def health_check(self) -> dict[str, Any]:
        """``{"status": "healthy"|"degraded"|"unhealthy", "latencyMs": float, "components"}``."""

    @abstractmethod
    def add(self, ctx: TenantContext, item: MemoryInput) -> AddResult:
        """Store one memory (seed 001 "Add Memory")."""

    @abstractmethod
    def search(self, ctx: TenantContext, request: SearchRequest) -> SearchResult:
        """Search the layers (seed 001 "Search Memory")."""

    @abstractmethod
    def get(self, ctx: TenantContext, memory_id: Any) -> Memory | None:
        """One memory or ``None`` — also for another tenant's id."""

    @abstractmethod
    def update(self, ctx: TenantContext, memory_id: Any, *, content: str | None = None,
               metadata: dict[str, Any] | None = None) -> UpdateResult:
        """Update content (re-embeds) and/or metadata (shallow merge)."""

    @abstractmethod
    def delete(self, ctx: TenantContext, memory_id: Any) -> bool:
        """Delete; idempotent, always ``True``."""

    @abstractmethod
    def list(self, ctx: TenantContext, *, layer: str, identifiers: LayerIdentifiers,
             cursor: str | None = None, limit: int = 50,
             metadata_filter: MetadataFilter | None = None) -> selectors.MemoryPage:
        """One page of a layer's memories."""

    @abstractmethod
    def generate_embedding(self, ctx: TenantContext, content: str) -> builtins.list[float]:
        """The embedding of ``content`` (cached per tenant)."""

    def bulk_add(self, ctx: TenantContext, items: builtins.list[MemoryInput]
                 ) -> builtins.list[AddResult]:
        """Optional: many adds; the default adds one by one."""
        return [self.add(ctx, item) for item in items]

    def bulk_delete(self, ctx: TenantContext, memory_ids: builtins.list[Any]) -> dict[str, Any]:
        """Optional: many deletes; the default deletes one by one."""
        for memory_id in memory_ids:
            self.delete(ctx, memory_id)
        return {"deleted": len(memory_ids), "failed": []}

    def capabilities(self) -> dict[str, Any]:
        """Seed 001 "Provider Capabilities"."""
        return {"vectorSearch": False, "embeddingDimensions": 0, "distanceMetrics": [],
                "bulkOperations": False}


class PostgresMemoryProvider(MemoryProvider):
    """PostgreSQL 16 + pgvector (HNSW, cosine) with full-text search; the service's own."""

    name = "postgres-pgvector"
    version = "1.0.0"

    def initialize(self, config: dict[str, Any] | None = None) -> None:
        connection.ensure_connection()

    def shutdown(self) -> None:
        connection.close()

    def health_check(self) -> dict[str, Any]:
        start = time.perf_counter()
        components: dict[str, dict[str, str]] = {}
        for name, probe in (("database", _probe_database), ("redis", _probe_redis)):
            try:
                probe()
                components[name] = {"status": "healthy"}
            except Exception as exc:
                components[name] = {"status": "unhealthy", "message": str(exc)[:200]}
        failed = [n for n, c in components.items() if c["status"] != "healthy"]
        status = "healthy" if not failed else (
            "unhealthy" if "database" in failed else "degraded")
        return {"status": status, "latencyMs": (time.perf_counter() - start) * 1000,
                "components": components}

    def add(self, ctx: TenantContext, item: MemoryInput) -> AddResult:
        return run_in_scope(ctx, services.memory_add, ctx, item=item)

    def bulk_add(self, ctx: TenantContext, items: builtins.list[MemoryInput]
                 ) -> builtins.list[AddResult]:
        return run_in_scope(ctx, services.memory_bulk_add, ctx, items=items)

    def search(self, ctx: TenantContext, request: SearchRequest) -> SearchResult:
        def search() -> SearchResult:
            found = memory_search(ctx, request)
            references.memory_references_record(
                ctx, memory_ids=[c.memory.pk for c in found.results]
            )
            return found

        return run_in_scope(ctx, search)

    def get(self, ctx: TenantContext, memory_id: Any) -> Memory | None:
        def get() -> Memory | None:
            memory = selectors.memory_get(ctx, memory_id=memory_id)
            if memory is not None:
                references.memory_references_record(ctx, memory_ids=[memory.pk])
            return memory

        return run_in_scope(ctx, get)

    def update(self, ctx: TenantContext, memory_id: Any, *, content: str | None = None,
               metadata: dict[str, Any] | None = None) -> UpdateResult:
        return run_in_scope(ctx, services.memory_update, ctx, memory_id=memory_id,
                            content=content, metadata=metadata)

    def delete(self, ctx: TenantContext, memory_id: Any) -> bool:
        return run_in_scope(ctx, deletion.memory_delete, ctx, memory_id=memory_id)

    def bulk_delete(self, ctx: TenantContext, memory_ids: builtins.list[Any]) -> dict[str, Any]:
        return run_in_scope(ctx, deletion.memory_bulk_delete, ctx, memory_ids=memory_ids)

    def list(self, ctx: TenantContext, *, layer: str, identifiers: LayerIdentifiers,
             cursor: str | None = None, limit: int = 50,
             metadata_filter: MetadataFilter | None = None) -> selectors.MemoryPage:
        return run_in_scope(ctx, selectors.memory_list, ctx, layer=layer,
                            identifiers=identifiers, cursor=cursor, limit=limit,
                            metadata_filter=metadata_filter)

    def generate_embedding(self, ctx: TenantContext, content: str) -> builtins.list[float]:
        (vector, _), = embed_texts(ctx.tenant_id, [content])
        return np.asarray(vector, dtype=float).tolist()

    def capabilities(self) -> dict[str, Any]:
        return {
            "vectorSearch": True,
            "keywordSearch": True,
            "hybridSearch": True,
            "embeddingDimensions": EMBEDDING_DIMENSIONS,
            "embeddingModel": get_embedder().model_name,
            "distanceMetrics": ["cosine"],
            "bulkOperations": True,
        }


def _probe_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _probe_redis() -> None:
    cache.set("provider-probe", "1", timeout=5)


_provider = PostgresMemoryProvider()


def get_provider() -> MemoryProvider:
    """The configured provider (PostgreSQL + pgvector)."""
    return _provider
