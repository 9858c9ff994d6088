"""Vertex AI Vector Search at its REST boundary: streaming upserts in batches of 1,000, the
tenant restrict on every query, restricts for filters, the distance threshold, errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.vectors.cases import Case, emulated, records, run
from tests.vectors.conftest import _environ
from tests.vectors.emulators.vertex_ai import VertexAiEmulator
from tests.vectors.fixture_server import fixture
from vectors.base import SearchQuery, Unhealthy
from vectors.errors import BackendUnavailable, RateLimited

UPSERT = r"/v1/projects/memory-test/locations/us-central1/indexes/memories:upsertDatapoints"
FIND = (r"/v1/projects/memory-test/locations/us-central1/indexEndpoints/memories-endpoint"
        r":findNeighbors")


@pytest.fixture
def vertex() -> Iterator[Case]:
    server = VertexAiEmulator().start()
    try:
        yield emulated("vertex_ai", server, _environ("vertex_ai", server))
    finally:
        server.stop()


def test_upserts_stream_in_batches_of_1000_with_the_tenant_restrict(vertex: Case) -> None:
    tenant = vertex.tenants[0]
    vertex.store(tenant, records(2300, "bulk"))
    batches = vertex.server.bodies(UPSERT)
    assert [len(b["datapoints"]) for b in batches] == [1000, 1000, 300]
    point = batches[0]["datapoints"][0]
    assert point["datapointId"].startswith(f"{tenant}:")
    assert {"namespace": "tenant_id", "allowList": [tenant]} in point["restricts"]
    assert {"namespace": "kind", "allowList": ["fact"]} in point["restricts"]
    assert point["numericRestricts"] == [{"namespace": "rank", "valueInt": "0"}]


def test_queries_carry_the_tenant_and_filters_as_restricts(vertex: Case) -> None:
    tenant = vertex.tenants[0]
    items = records(9, "f")
    vertex.store(tenant, items)
    hits = run(vertex.backend.search, tenant, SearchQuery(
        vector=items[4].vector, limit=5, filter={"kind": ["fact", "episode"], "rank": 4}))
    assert [h.id for h in hits] == [items[4].id]
    query = vertex.server.bodies(FIND)[-1]["queries"][0]
    assert query["neighborCount"] == 5
    assert {"namespace": "tenant_id", "allowList": [tenant]} in query["datapoint"]["restricts"]
    assert {"namespace": "kind", "allowList": ["fact", "episode"]} in (
        query["datapoint"]["restricts"])
    assert query["datapoint"]["numericRestricts"] == [
        {"namespace": "rank", "valueInt": "4", "op": 3}]  # 3 = EQUAL


def test_a_numeric_any_of_filter_is_applied_after_a_wider_search(vertex: Case) -> None:
    tenant = vertex.tenants[0]
    items = records(9, "wide")
    vertex.store(tenant, items)
    hits = run(vertex.backend.search, tenant,
               SearchQuery(vector=items[0].vector, limit=2, filter={"rank": [3, 6]}))
    assert {h.metadata["rank"] for h in hits} <= {3, 6} and hits
    assert vertex.server.bodies(FIND)[-1]["queries"][0]["neighborCount"] == 8


def test_another_tenant_cannot_read_or_delete_by_id(vertex: Case) -> None:
    tenant_a, tenant_b = vertex.tenants
    items = records(2, "ids")
    vertex.store(tenant_a, items)
    assert run(vertex.backend.get, tenant_b, [items[0].id]) == []
    run(vertex.backend.delete, tenant_b, [items[0].id])
    assert len(run(vertex.backend.get, tenant_a, [i.id for i in items])) == 2


def test_health_needs_the_index_deployed(vertex: Case) -> None:
    assert run(vertex.backend.health_check).status == "healthy"
    other = emulated("vertex_ai", vertex.server,
                     {**_environ("vertex_ai", vertex.server),
                      "VERTEX_AI_DEPLOYED_INDEX_ID": "not_there"})
    status = run(other.backend.health_check)
    assert isinstance(status, Unhealthy) and "not deployed" in status.details


def test_quota_and_outage_errors_are_mapped(vertex: Case) -> None:
    vertex.server.fail_next(1, 429, fixture("vertex_ai", "resource_exhausted_response"))
    with pytest.raises(RateLimited):
        run(vertex.backend.get, vertex.tenants[0], ["x"])
    vertex.server.fail_next(1, 503, fixture("vertex_ai", "unavailable_response"))
    with pytest.raises(BackendUnavailable):
        run(vertex.backend.get, vertex.tenants[0], ["x"])
    vertex.server.stop()
    with pytest.raises(BackendUnavailable):
        run(vertex.backend.get, vertex.tenants[0], ["x"])
