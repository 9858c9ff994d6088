"""Databricks Vector Search at its REST boundary: a Unity Catalog schema per tenant, writes to
the Delta table with a sync of the index after each, filters pushed down or applied after,
hybrid queries, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.vectors.cases import Case, emulated, records, run
from tests.vectors.conftest import _environ
from tests.vectors.emulators.databricks import DatabricksEmulator
from tests.vectors.fixture_server import fixture
from vectors.base import SearchQuery, Unhealthy
from vectors.errors import BackendUnavailable, RateLimited

QUERY = r"/api/2.0/vector-search/indexes/[^/]+/query"


@pytest.fixture
def databricks() -> Iterator[Case]:
    server = DatabricksEmulator().start()
    try:
        yield emulated("databricks", server, {**_environ("databricks", server),
                                              "DATABRICKS_TIMEOUT_SECONDS": "2"})
    finally:
        server.stop()


def test_each_tenant_gets_its_own_unity_catalog_schema_table_and_index(
        databricks: Case) -> None:
    tenant_a, tenant_b = databricks.tenants
    databricks.store(tenant_a, records(2, "a"))
    databricks.store(tenant_b, records(2, "b"))
    schema_a = f"memory_{tenant_a.replace('-', '_')}"
    assert f"main.{schema_a}" in databricks.server.schemas
    assert f"main.{schema_a}.memory_vectors" in databricks.server.tables
    assert f"main.{schema_a}.memory_vectors_index" in databricks.server.indexes
    assert len(databricks.server.indexes) == 2
    assert any(f"ON SCHEMA `main`.`{schema_a}` TO `memory-readers`" in g
               for g in databricks.server.grants)
    created = databricks.server.bodies(r"/api/2.0/vector-search/indexes")[0]
    assert created["index_type"] == "DELTA_SYNC"
    assert created["delta_sync_index_spec"]["pipeline_type"] == "TRIGGERED"
    assert created["delta_sync_index_spec"]["embedding_vector_columns"] == [
        {"name": "embedding", "embedding_dimension": 384}]


def test_writes_go_to_the_delta_table_and_the_index_follows_on_sync(databricks: Case) -> None:
    tenant = databricks.tenants[0]
    items = records(450, "sync")
    databricks.store(tenant, items)
    merges = [s for s in databricks.server.statements if s.startswith("MERGE INTO")]
    assert len(merges) == 3  # batches of 200
    assert all(":rows" in m and "sync-" not in m for m in merges)  # data only as a parameter
    paths = [r.path for r in databricks.server.requests]
    assert paths[-1].endswith("/sync")
    # a write the pipeline has not synced yet is in the table but not searchable
    table = next(iter(databricks.server.tables.values()))
    table["late"] = {**table[items[0].id], "id": "late"}
    hits = run(databricks.backend.search, tenant, SearchQuery(vector=items[0].vector, limit=2))
    assert "late" not in {h.id for h in hits}


def test_filters_on_memory_columns_are_pushed_down_others_applied_after(
        databricks: Case) -> None:
    tenant = databricks.tenants[0]
    items = records(9, "f")
    databricks.store(tenant, items)
    hits = run(databricks.backend.search, tenant, SearchQuery(
        vector=items[0].vector, limit=2, filter={"kind": "rule", "rank": [5, 8]}))
    assert sorted(h.metadata["rank"] for h in hits) == [5, 8]
    query = databricks.server.bodies(QUERY)[-1]
    assert json.loads(query["filters_json"]) == {"kind": "rule"}
    assert query["num_results"] == 8


def test_health_follows_the_endpoint_state(databricks: Case) -> None:
    assert run(databricks.backend.health_check).status == "healthy"
    databricks.server.fail_next(1, 404, fixture("databricks", "not_found_response"))
    assert isinstance(run(databricks.backend.health_check), Unhealthy)


def test_rate_limits_and_outages_are_mapped(databricks: Case) -> None:
    tenant = databricks.tenants[0]
    databricks.store(tenant, records(1, "e"))
    databricks.server.fail_next(50, 429, fixture("databricks", "rate_limited_response"),
                                headers={"Retry-After": "1"})
    with pytest.raises(RateLimited):
        run(databricks.backend.search, tenant, SearchQuery(vector=records(1, "q")[0].vector))
    databricks.server.stop()
    with pytest.raises(BackendUnavailable):
        run(databricks.backend.search, tenant, SearchQuery(vector=records(1, "q")[0].vector))
