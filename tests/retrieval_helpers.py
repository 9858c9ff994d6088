"""Helpers shared by the retrieval test modules (search, recall, provider, LoCoMo)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.embedding import embedders as embeddings
from memories.models import Memory
from memories.retrieval.fusion import RRF_K
from tenants.context import tenant_scope
from tests.helpers import body

SEARCH_URL = "/api/v1/memories/search"
RECALL_URL = "/api/v1/memories/recall"
SETTINGS_URL = "/api/v1/settings"
USER = {"userId": "u1"}


def search(tenant: Any, query: str, **payload: Any) -> Any:
    """``POST /memories/search`` as ``tenant``; the raw response."""
    payload.setdefault("identifiers", USER)
    return tenant.client.post(SEARCH_URL, {"query": query, **payload}, format="json")


def searched(tenant: Any, query: str, **payload: Any) -> dict[str, Any]:
    """The 200 body of a search."""
    response = search(tenant, query, **payload)
    assert response.status_code == 200, response.content[:500]
    return body(response)


def recall(tenant: Any, topic: str, **payload: Any) -> Any:
    """``POST /memories/recall`` as ``tenant``; the raw response."""
    payload.setdefault("identifiers", USER)
    return tenant.client.post(RECALL_URL, {"topic": topic, **payload}, format="json")


def recalled(tenant: Any, topic: str, **payload: Any) -> list[dict[str, Any]]:
    """The results of a 200 recall."""
    response = recall(tenant, topic, **payload)
    assert response.status_code == 200, response.content[:500]
    return body(response)["results"]


def patch_settings(tenant: Any, patch: Any) -> Any:
    return tenant.client.patch(SETTINGS_URL, patch, format="json")


def ids(results: Sequence[dict[str, Any]]) -> list[str]:
    return [r["memory"]["id"] for r in results]


def contents(results: Sequence[dict[str, Any]]) -> list[str]:
    return [r["memory"]["content"] for r in results]


def set_fields(tenant: Any, memory: Memory, **fields: Any) -> None:
    """Set columns directly (timestamps, counters) in the tenant's scope."""
    with tenant_scope(tenant.ctx):
        assert Memory.objects.filter(pk=memory.pk).update(**fields) == 1


def days_ago(days: float) -> Any:
    return timezone.now() - timedelta(days=days)


def reload(tenant: Any, memory: Memory) -> Memory:
    with tenant_scope(tenant.ctx):
        return Memory.objects.get(pk=memory.pk)


class MemoryUpdates(CaptureQueriesContext):
    """Captures queries; ``.count`` is the number of ``UPDATE`` statements on memories."""

    def __init__(self) -> None:
        super().__init__(connection)

    @property
    def count(self) -> int:
        return sum(
            1 for q in self.captured_queries
            if q["sql"].lstrip().upper().startswith('UPDATE "MEMORIES_MEMORY"')
        )


class CountingEmbedder:
    """Wraps the real embedder and counts the texts it is asked to encode."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.encode(texts)

    @property
    def texts(self) -> list[str]:
        """Every text sent to the model, in order."""
        return [t for call in self.calls for t in call]


def cosine(a: str, b: str) -> float:
    """Cosine similarity of two texts with the real model (vectors are normalised)."""
    vectors = embeddings.get_embedder().encode([a, b])
    return float(np.dot(vectors[0], vectors[1]))


def rrf(semantic_rank: int | None, keyword_rank: int | None, limit: int) -> float:
    """Seed 002 RRF with k = 60; a missing rank is ``limit + 1``."""
    missing = limit + 1
    return 1 / (RRF_K + (semantic_rank or missing)) + 1 / (RRF_K + (keyword_rank or missing))


def scoped_memories(tenant: Any) -> dict[str, Any]:
    """Facts, a rule and episodes about blood pressure in the scopes global/health/general."""
    return {
        "fact-global": tenant.add("Fact: blood pressure is normal", scope="global"),
        "fact-health": tenant.add("Fact: blood pressure medication daily", scope="health"),
        "fact-general": tenant.add("Fact: blood pressure article bookmarked", scope="general"),
        "rule-health": tenant.add("Rule: check blood pressure weekly", kind="rule",
                                  scope="health"),
        "episode-health": tenant.add("Episode: measured blood pressure today",
                                     kind="episode", scope="health"),
        "episode-global": tenant.add("Episode: talked about blood pressure",
                                     kind="episode", scope="global"),
    }


def add_unit_vectors(tenant: Any, rows: int, seed: int = 7) -> np.ndarray:
    """``rows`` user-layer memories of ``tenant`` (``note 0`` …) whose embeddings are random
    unit vectors (distinct distances: no ties to order differently); returns a unit query."""
    from memories.services.memory import MemoryInput, memory_bulk_add
    from tenants.layers import LayerIdentifiers

    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows + 1, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with tenant_scope(tenant.ctx):
        memory_bulk_add(tenant.ctx, items=[
            MemoryInput(content=f"note {i}", layer="user",
                        identifiers=LayerIdentifiers.from_mapping(USER))
            for i in range(rows)])
        for i in range(rows):
            Memory.objects.filter(content=f"note {i}").update(embedding=vectors[i])
    return vectors[rows]
