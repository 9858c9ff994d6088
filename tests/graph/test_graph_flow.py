"""Extraction → single writer → snapshot → reader: the graph of stored memories, queried."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from graph import selectors
from graph.services import uses_model
from tenants.context import tenant_scope
from tests.graph.graph_helpers import graph_env, remember

pytestmark = pytest.mark.django_db
__all__ = ["graph_env"]


def test_it_links_memories_through_the_entities_they_mention(tenant_a: Any,
                                                             graph_env: Any) -> None:
    first, second = remember(tenant_a, "Maria works at Google in Lisbon.",
                             "maria's team at Google fixed the memory leak in Project Atlas.")
    with tenant_scope(tenant_a.ctx):
        names = {n.label for n in selectors.memory_entities(tenant_a.ctx, memory_id=first.pk)}
        assert {"Maria", "Google", "Lisbon"} <= names
        maria = selectors.entity_named(tenant_a.ctx, "MARIA", field="q")
        assert {"Maria", "maria's"} <= set(maria.aliases) or "Maria" in maria.aliases
        memories = selectors.entity_memories(tenant_a.ctx, entity_id=maria.id)
        assert {m.pk for m in memories} >= {first.pk}
        start, near = selectors.neighbours(tenant_a.ctx, node_id=maria.id, depth=2)
        assert start.label == "Maria"
        depths = [n.depth for n in near]
        assert depths == sorted(depths) and first.pk in {n.id for n in near}
        path = selectors.path_between(tenant_a.ctx, source=first.pk, target=second.pk)
        assert path is not None and path.hops == 2
        assert "Google" in path.explanation or "Maria" in path.explanation


@pytest.mark.parametrize(("extractor", "base_url", "expected"), [
    ("auto", "", False), ("auto", "http://models.internal/v1", True), ("llm", "", True),
    ("offline", "http://models.internal/v1", False)])
def test_the_extractor_is_chosen_by_settings(settings: Any, extractor: str, base_url: str,
                                             expected: bool) -> None:
    settings.GRAPH_EXTRACTOR, settings.LLM_BASE_URL = extractor, base_url
    assert uses_model() is expected


def test_the_backfill_extracts_what_the_graph_lacks_and_shows_progress(
        tenant_a: Any, graph_env: Any) -> None:
    tenant_a.add("Maria works at Google.")
    tenant_a.add("Pedro lives in Lisbon.")
    out, err = io.StringIO(), io.StringIO()
    call_command("graph_backfill", "--tenant", tenant_a.tenant.slug, stdout=out, stderr=err)
    assert "memories extracted: 2 of 2 pending" in out.getvalue()
    assert "2/2" in err.getvalue()
    again = io.StringIO()
    call_command("graph_backfill", "--tenant", tenant_a.tenant.slug, stdout=again,
                 stderr=io.StringIO())
    assert "0 of 0 pending" in again.getvalue()
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["lisbon"])
