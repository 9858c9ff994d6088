"""Tenant isolation of the graph (seed 001 "Multi-tenant Graph Isolation", "Tenant Query
Isolation"): the query layer refuses statements without the tenant predicate and audits them;
tenant B reaches none of tenant A's entities, paths or snapshots."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from graph import schema, selectors, snapshots
from graph.tenant_sql import GraphQueryRefused, check_statement, tenant_execute
from memory_project.errors import MemoryServiceError
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.graph.graph_helpers import graph_env, remember

pytestmark = pytest.mark.django_db
__all__ = ["graph_env"]
TENANT = "01a21600-0000-7000-8000-000000000001"


@pytest.mark.parametrize("sql", [
    "SELECT * FROM entities",
    "SELECT * FROM entities e WHERE e.canonical = $name",
    "SELECT * FROM entities e WHERE e.tenant_id = $tenant_id UNION SELECT * FROM entities",
    "SELECT * FROM entities WHERE tenant_id = $tenant_id; DROP TABLE entities",
    "SELECT * FROM entities WHERE tenant_id = '01a21600-0000-7000-8000-000000000001'",
    "SELECT * FROM entities WHERE tenant_id = $tenant_id -- OR 1 = 1",
    "INSERT INTO entities VALUES ($other, $id)",
    "DELETE FROM memory_edges m WHERE m.source_id = $id",
])
def test_the_query_layer_refuses_statements_without_the_tenant_filter(sql: str) -> None:
    assert check_statement(sql, {"tenant_id": TENANT}) is not None


def test_it_accepts_filtered_statements_and_needs_a_real_tenant() -> None:
    ok = "SELECT e.id FROM entities e JOIN memory_edges m ON m.target_id = e.id AND " \
         "m.tenant_id = $tenant_id WHERE e.tenant_id = $tenant_id"
    assert check_statement(ok, {"tenant_id": TENANT}) is None
    assert check_statement(ok, {"tenant_id": "' OR 1=1"}) is not None
    assert check_statement(ok, {}) is not None


def test_a_refused_statement_is_audited_and_never_runs(tenant_a: Any) -> None:
    conn = duckdb.connect()
    schema.migrate(conn)
    with tenant_scope(tenant_a.ctx), pytest.raises(GraphQueryRefused):
        tenant_execute(conn, "DELETE FROM entities", {"tenant_id": tenant_a.ctx.tenant_id})
    with tenant_scope(tenant_a.ctx):
        entry = AuditEntry.objects.get(action="graph_query_refused")
    assert "DELETE FROM entities" in entry.details["statement"]


def test_another_tenant_reaches_none_of_its_entities_paths_or_snapshots(
        tenant_a: Any, tenant_b: Any, graph_env: Any) -> None:
    first, second = remember(tenant_a, "Maria works at Google.", "Google hired Pedro.")
    remember(tenant_b, "Nobody here.")
    with tenant_scope(tenant_a.ctx):
        maria = selectors.entity_named(tenant_a.ctx, "Maria", field="q")
    with tenant_scope(tenant_b.ctx):
        assert selectors.entity_search(tenant_b.ctx, query="maria") == []
        for call in (lambda: selectors.entity_get(tenant_b.ctx, entity_id=maria.id),
                     lambda: selectors.neighbours(tenant_b.ctx, node_id=maria.id),
                     lambda: selectors.memory_entities(tenant_b.ctx, memory_id=first.pk),
                     lambda: selectors.path_between(tenant_b.ctx, source=first.pk,
                                                    target=second.pk),
                     lambda: selectors.path_between_names(tenant_b.ctx, source="Maria",
                                                          target="Pedro")):
            with pytest.raises(MemoryServiceError) as denied:
                call()
            assert denied.value.status == 404
    loaded = snapshots.snapshot_load(tenant_b.ctx.tenant_id)
    assert loaded is not None
    prefix = snapshots.tenant_prefix(tenant_b.ctx.tenant_id)
    assert all(ref.key.startswith(prefix) for ref in loaded.manifest.partitions.values())
    payloads = b"".join(loaded.load_all().values())
    assert b"Maria" not in payloads and b"Google" not in payloads
