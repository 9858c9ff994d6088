"""The provider adapter of seed 001 ("Memory Provider Adapter Trait", "Provider
Capabilities") and PostgresMemoryProvider, directly and through GET /api/v1/capabilities."""

from __future__ import annotations

import inspect
import uuid
from typing import Any

import numpy as np
import pytest

from memories.embedding import embedders as embeddings
from memories.provider import MemoryProvider, PostgresMemoryProvider, get_provider
from memories.retrieval.filters import MetadataFilter
from memories.retrieval.search import Mode, SearchRequest
from memories.services.memory import MemoryInput
from tenants.layers import LayerIdentifiers
from tests.helpers import assert_error, body
from tests.retrieval_helpers import reload

# What the bundled MiniLM model understands is part of what these tests check.
pytestmark = [pytest.mark.django_db, pytest.mark.real_embedder]

REQUIRED = {"initialize", "shutdown", "health_check", "add", "search", "get", "update",
            "delete", "list", "generate_embedding"}
OPTIONAL = {"bulk_add", "bulk_delete"}
USER = LayerIdentifiers(userId="u1")


def item(content: str, **fields: Any) -> MemoryInput:
    return MemoryInput(content=content, layer="user", identifiers=USER, **fields)


@pytest.fixture
def provider() -> PostgresMemoryProvider:
    p = PostgresMemoryProvider()
    p.initialize({})
    yield p


def test_the_trait_requires_the_seed_methods_and_offers_the_optional_ones() -> None:
    assert MemoryProvider.__abstractmethods__ == frozenset(REQUIRED)
    for name in OPTIONAL | {"capabilities"}:
        assert callable(getattr(MemoryProvider, name))
    for name in REQUIRED | OPTIONAL | {"capabilities"}:
        method = getattr(PostgresMemoryProvider, name)
        assert method is not getattr(MemoryProvider, name), name
        assert not getattr(method, "__isabstractmethod__", False), name
    assert not inspect.isabstract(PostgresMemoryProvider)
    assert isinstance(get_provider(), PostgresMemoryProvider)


def test_a_provider_missing_a_required_method_cannot_be_built() -> None:
    class Incomplete(MemoryProvider):
        name, version = "incomplete", "0"

        def initialize(self, config: Any = None) -> None: ...

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]


def test_capabilities_of_the_postgres_provider(provider) -> None:
    caps = provider.capabilities()
    assert caps["vectorSearch"] is True
    assert caps["embeddingDimensions"] == 384
    assert caps["distanceMetrics"] == ["cosine"]
    assert caps["bulkOperations"] is True
    assert caps["embeddingModel"] == "all-MiniLM-L6-v2"


class Minimal(MemoryProvider):
    """Every required method, no bulk methods, no capabilities of its own."""

    name, version = "minimal", "0.1"

    def __init__(self) -> None:
        self.store: dict[str, str] = {}

    def initialize(self, config: Any = None) -> None: ...
    def shutdown(self) -> None: ...
    def health_check(self) -> dict[str, Any]:
        return {"status": "healthy", "latencyMs": 0.0}

    def add(self, ctx: Any, item: MemoryInput) -> Any:
        key = str(len(self.store))
        self.store[key] = item.content
        return key

    def search(self, ctx: Any, request: Any) -> Any:
        return []

    def get(self, ctx: Any, memory_id: Any) -> Any:
        return self.store.get(memory_id)

    def update(self, ctx: Any, memory_id: Any, *, content: Any = None,
               metadata: Any = None) -> Any:
        return None

    def delete(self, ctx: Any, memory_id: Any) -> bool:
        self.store.pop(memory_id, None)
        return True

    def list(self, ctx: Any, **kwargs: Any) -> Any:
        return list(self.store.values())

    def generate_embedding(self, ctx: Any, content: str) -> list[float]:
        return [0.0]


def test_a_provider_without_bulk_methods_reports_no_bulk_operations() -> None:
    minimal = Minimal()
    assert minimal.capabilities() == {"vectorSearch": False, "embeddingDimensions": 0,
                                      "distanceMetrics": [], "bulkOperations": False}
    # the base's bulk fallbacks loop over add and delete
    assert minimal.bulk_add(None, [item("a"), item("b")]) == ["0", "1"]
    assert minimal.store == {"0": "a", "1": "b"}
    assert minimal.bulk_delete(None, ["0", "1"]) == {"deleted": 2, "failed": []}
    assert minimal.store == {}


def test_health_check_reports_healthy_components(provider) -> None:
    health = provider.health_check()
    assert health["status"] == "healthy"
    assert health["components"] == {"database": {"status": "healthy"},
                                    "redis": {"status": "healthy"}}
    assert isinstance(health["latencyMs"], float) and health["latencyMs"] >= 0


def test_add_get_update_delete_roundtrip(provider, tenant_a) -> None:
    added = provider.add(tenant_a.ctx, item("User prefers dark mode", metadata={"tags": ["ui"]}))
    assert added.embedding_generated is True
    memory_id = added.memory.pk
    got = provider.get(tenant_a.ctx, memory_id)
    assert got is not None and got.content == "User prefers dark mode"
    assert reload(tenant_a, got).reference_count == 1  # get bumps
    updated = provider.update(tenant_a.ctx, memory_id, metadata={"team": "core"})
    assert updated.embedding_regenerated is False
    assert updated.memory.metadata == {"tags": ["ui"], "team": "core"}
    updated = provider.update(tenant_a.ctx, memory_id, content="User prefers light mode")
    assert updated.embedding_regenerated is True
    assert provider.get(tenant_a.ctx, memory_id).content == "User prefers light mode"
    assert provider.delete(tenant_a.ctx, memory_id) is True
    assert provider.get(tenant_a.ctx, memory_id) is None
    assert provider.delete(tenant_a.ctx, memory_id) is True  # idempotent
    assert provider.get(tenant_a.ctx, uuid.uuid4()) is None
    assert provider.get(tenant_a.ctx, "not-a-uuid") is None


def test_get_of_another_tenants_id_is_none(provider, tenant_a, tenant_b) -> None:
    theirs = provider.add(tenant_b.ctx, item("Globex secret")).memory
    assert provider.get(tenant_a.ctx, theirs.pk) is None
    assert provider.delete(tenant_a.ctx, theirs.pk) is True
    assert provider.get(tenant_b.ctx, theirs.pk).content == "Globex secret"
    found = provider.search(tenant_a.ctx, SearchRequest(query="Globex secret", identifiers=USER,
                                                        threshold=0.0))
    assert found.results == []


def test_search_list_and_bulk(provider, tenant_a) -> None:
    results = provider.bulk_add(tenant_a.ctx, [
        item("Bird sighting: heron", metadata={"tags": ["birds"]}),
        item("Bird sighting: kingfisher", metadata={"tags": ["birds"]}),
        item("Quarterly tax filing"),
    ])
    assert [r.embedding_generated for r in results] == [True, True, True]
    found = provider.search(tenant_a.ctx, SearchRequest(
        query="bird sighting", identifiers=USER, mode=Mode.KEYWORD))
    assert {c.memory.content for c in found.results} == {
        "Bird sighting: heron", "Bird sighting: kingfisher"}
    assert [c.layer.value for c in found.results] == ["user", "user"]
    assert reload(tenant_a, found.results[0].memory).reference_count == 1
    page = provider.list(tenant_a.ctx, layer="user", identifiers=USER, limit=2)
    assert len(page.memories) == 2 and page.total_count == 3 and page.next_cursor
    tagged = provider.list(tenant_a.ctx, layer="user", identifiers=USER,
                           metadata_filter=MetadataFilter(tags=("birds",)))
    assert tagged.total_count == 2
    outcome = provider.bulk_delete(tenant_a.ctx, [r.memory.pk for r in results[:2]] + ["bad"])
    assert outcome == {"deleted": 2, "failed": ["bad"]}
    assert provider.list(tenant_a.ctx, layer="user", identifiers=USER).total_count == 1


def test_generate_embedding_is_the_model_vector(provider, tenant_a) -> None:
    vector = provider.generate_embedding(tenant_a.ctx, "User prefers dark mode")
    assert isinstance(vector, list) and len(vector) == 384
    assert all(isinstance(x, float) for x in vector)
    expected = embeddings.get_embedder().encode(["User prefers dark mode"])[0]
    assert np.allclose(vector, expected, atol=1e-5)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)


def test_the_capabilities_endpoint(tenant_a, anon) -> None:
    response = tenant_a.client.get("/api/v1/capabilities")
    assert response.status_code == 200
    data = body(response)
    assert data == {"provider": "postgres-pgvector", "version": "1.0.0",
                    **get_provider().capabilities()}
    assert data["vectorSearch"] is True and data["embeddingDimensions"] == 384
    assert data["distanceMetrics"] == ["cosine"] and data["bulkOperations"] is True
    assert_error(anon.get("/api/v1/capabilities"), 401, "MISSING_TENANT_CONTEXT")
    anon.credentials(HTTP_AUTHORIZATION="Bearer not-a-real-key")
    assert_error(anon.get("/api/v1/capabilities"), 401)
