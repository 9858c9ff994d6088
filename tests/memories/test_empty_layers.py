"""A search skips the lists of layers holding no memory of the caller's scope
(``partition.populated_layers``) and answers exactly as if it had searched them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from memories.models import Memory
from memories.retrieval import search
from memories.retrieval.partition import layer_queryset, populated_layers, resolve_identifiers
from memories.services.deletion import memory_archive, memory_delete, memory_restore
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers
from tests.retrieval_helpers import searched

pytestmark = pytest.mark.django_db

AGENT = {"agentId": "a1", "userId": "u1", "sessionId": "s1"}


@pytest.fixture
def lists_run() -> Iterator[list[str]]:
    """Records ``"semantic"`` / ``"keyword"`` for every list a search computes."""
    calls: list[str] = []
    semantic, keyword = search.semantic_candidates, search._keyword

    def semantic_recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append("semantic")
        return semantic(*args, **kwargs)

    def keyword_recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append("keyword")
        return keyword(*args, **kwargs)

    search.semantic_candidates = semantic_recorded  # type: ignore[assignment]
    search._keyword = keyword_recorded  # type: ignore[assignment]
    try:
        yield calls
    finally:
        search.semantic_candidates = semantic  # type: ignore[assignment]
        search._keyword = keyword  # type: ignore[assignment]


def _populated(tenant: Any, identifiers: dict[str, str]) -> set[Layer]:
    with tenant_scope(tenant.ctx):
        resolved = resolve_identifiers(tenant.ctx, LayerIdentifiers.from_mapping(identifiers))
        layers = [Layer.AGENT, Layer.USER, Layer.SESSION, Layer.COMPANY]
        expected = {layer for layer in layers if layer_queryset(layer, resolved).exists()}
        found = populated_layers(tenant.ctx.tenant_id, layers, resolved)
        assert found == expected  # the postings agree with the memories themselves
        return found


def test_only_layers_holding_memories_are_ranked(tenant_a, lists_run) -> None:
    tenant_a.add("User experiences nausea after dairy", layer="user",
                 identifiers={"userId": "u1"})
    tenant_a.add("Another user likes dairy", layer="user", identifiers={"userId": "u2"})
    data = searched(tenant_a, "feeling unwell", identifiers=AGENT, threshold=0.0)
    assert data["searchedLayers"] == ["agent", "user", "session", "company"]
    assert [r["memory"]["content"] for r in data["results"]] == [
        "User experiences nausea after dairy"]
    assert sorted(lists_run) == ["keyword", "semantic"]  # the user layer's two lists only


def test_a_layer_is_ranked_once_it_holds_a_memory(tenant_a, lists_run) -> None:
    tenant_a.add("User experiences nausea after dairy", layer="user",
                 identifiers={"userId": "u1"})
    tenant_a.add("The company canteen serves dairy-free meals", layer="company",
                 identifiers={})
    data = searched(tenant_a, "dairy", identifiers=AGENT, threshold=0.0, mode="keyword")
    assert {r["layer"] for r in data["results"]} == {"user", "company"}
    assert lists_run == ["keyword", "keyword"]


def test_populated_layers_counts_the_callers_scope_only(tenant_a, tenant_b) -> None:
    tenant_b.add("Globex ships on Fridays", layer="company", identifiers={})
    tenant_b.add("Globex agent note", layer="agent", identifiers={"agentId": "a1",
                                                                  "userId": "u1"})
    tenant_a.add("An agent note of another user", layer="agent",
                 identifiers={"agentId": "a1", "userId": "u2"})
    tenant_a.add("Session note", layer="session", identifiers={"userId": "u1",
                                                               "sessionId": "s1"})
    assert _populated(tenant_a, AGENT) == {Layer.SESSION}
    assert _populated(tenant_b, AGENT) == {Layer.AGENT, Layer.COMPANY}


def test_a_layer_holding_only_memories_search_skips_is_empty(tenant_a) -> None:
    """Deleted, archived and pruned memories do not populate a layer (search never returns
    them); restored, they do again."""
    gone = [tenant_a.add(text, layer="session", identifiers={"userId": "u1", "sessionId": "s1"})
            for text in ("Deleted note", "Archived note", "Pruned note")]
    assert _populated(tenant_a, AGENT) == {Layer.SESSION}
    with tenant_scope(tenant_a.ctx):
        memory_delete(tenant_a.ctx, memory_id=gone[0].pk)
        memory_archive(tenant_a.ctx, memory_id=gone[1].pk)
        Memory.objects.filter(pk=gone[2].pk).update(pruned_at=timezone.now())
    assert _populated(tenant_a, AGENT) == set()
    with tenant_scope(tenant_a.ctx):
        memory_restore(tenant_a.ctx, memory_id=gone[1].pk)
    assert _populated(tenant_a, AGENT) == {Layer.SESSION}
