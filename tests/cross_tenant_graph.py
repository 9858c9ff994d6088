"""Cross-tenant cases of the knowledge graph routes (``/api/v1/graph/``), registered into
``tests.tenants.test_cross_tenant``'s table. The cases that name B's tokens first extract B's
memories into B's graph and back it up, so that A's answers are compared with a graph that
holds B's entities; the module's tests run with a graph of their own (``graph_env``)."""

from __future__ import annotations

from typing import Any

from graph import maintenance
from graph.services import graph_extract
from memories.models import Memory
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.models import Tenant

G = "/api/v1/graph"


def extract_graph_of_b(t: dict[str, str]) -> None:
    """B's memories through graph extraction, and a backup of B's graph. Only when ``t`` are
    B's tokens: the missing ones name no tenant, and A's answers must not change either way."""
    tenant = Tenant.objects.filter(slug=t["company"]).first()
    if tenant is None:
        return
    ctx = tenant_services.system_context(tenant, "test")
    with tenant_scope(ctx):
        graph_extract(ctx, memory_ids=list(Memory.objects.values_list("pk", flat=True)))
        maintenance.graph_backup(ctx)


def register(case: Any, post: Any) -> None:
    """Add the graph cases to the cross-tenant table."""
    @case("graph-entities", "get")
    def search_anothers_entities(a: Any, t: dict[str, str]) -> Any:
        extract_graph_of_b(t)
        return a.client.get(f"{G}/entities", {"q": "Falcon"})

    @case("graph-entity", "get")
    def get_entity_by_anothers_memory_id(a: Any, t: dict[str, str]) -> Any:
        return a.client.get(f"{G}/entities/{t['memory']}")

    @case("graph-entity-memories", "get")
    def list_memories_of_an_entity_by_anothers_id(a: Any, t: dict[str, str]) -> Any:
        return a.client.get(f"{G}/entities/{t['memory']}/memories")

    @case("graph-memory-entities", "get")
    def list_entities_of_anothers_memory(a: Any, t: dict[str, str]) -> Any:
        extract_graph_of_b(t)
        return a.client.get(f"{G}/memories/{t['memory']}/entities")

    @case("graph-node-neighbours", "get")
    def walk_from_anothers_memory(a: Any, t: dict[str, str]) -> Any:
        extract_graph_of_b(t)
        return a.client.get(f"{G}/nodes/{t['memory']}/neighbours", {"depth": 3})

    @case("graph-path", "get")
    def path_between_anothers_memories(a: Any, t: dict[str, str]) -> Any:
        extract_graph_of_b(t)
        return a.client.get(f"{G}/path", {"from": t["memory"], "to": t["agent_memory"]})

    @case("graph-path", "get")
    def path_between_anothers_entity_names(a: Any, t: dict[str, str]) -> Any:
        extract_graph_of_b(t)
        return a.client.get(f"{G}/path", {"fromName": "Globex", "toName": "Falcon"})

    @case("graph-restore", "post")
    def restore_when_only_another_tenant_has_a_backup(a: Any, t: dict[str, str]) -> Any:
        extract_graph_of_b(t)
        return post(a.client, f"{G}/restore", {"at": "2100-01-01T00:00:00Z"})


def check_own_graph(b: Any, tokens: dict[str, str], post: Any) -> None:
    """B reaches its own graph on the routes of the cases above."""
    extract_graph_of_b(tokens)
    c = b.client
    mentioned = c.get(f"{G}/memories/{tokens['memory']}/entities").json()["results"]
    assert "Globex" in {e["name"] for e in mentioned}
    assert c.get(f"{G}/entities", {"q": "Globex"}).json()["results"]
    assert c.get(f"{G}/nodes/{tokens['memory']}/neighbours").json()["results"]
    path = c.get(f"{G}/path", {"from": tokens["memory"], "to": tokens["agent_memory"]})
    assert path.json()["found"] is True
    restored = post(c, f"{G}/restore", {"at": "2100-01-01T00:00:00Z"})
    assert restored.status_code == 200, restored.content
