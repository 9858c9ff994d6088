"""MongoDB Atlas Vector Search at the driver's wire boundary: the index check at start,
``$vectorSearch`` with the tenant and metadata filters, ids bound to the tenant, errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.vectors.cases import Case, emulated, records, run
from tests.vectors.emulators.mongodb import MongoEmulator
from tests.vectors.fixture_server import fixture
from vectors.base import SearchQuery, Unhealthy
from vectors.errors import BackendRequestFailed, BackendUnavailable, RateLimited


def _case(server: MongoEmulator) -> Case:
    return emulated("mongodb", server, {"MONGODB_URI": server.uri,
                                        "MONGODB_TIMEOUT_SECONDS": "1"})


@pytest.fixture
def mongo() -> Iterator[Case]:
    server = MongoEmulator().start()
    try:
        yield _case(server)
    finally:
        server.stop()


def test_the_search_stage_filters_by_tenant_and_indexed_metadata(mongo: Case) -> None:
    tenant = mongo.tenants[0]
    items = records(9, "vs")
    mongo.store(tenant, items)
    hits = run(mongo.backend.search, tenant, SearchQuery(
        vector=items[2].vector, limit=2, filter={"kind": ["rule", "fact"], "rank": [2, 8]}))
    assert sorted(h.metadata["rank"] for h in hits) == [2, 8]
    assert hits[0].score == pytest.approx(1.0, abs=1e-6)  # cosine similarity, not (1 + cos) / 2
    stage = mongo.server.named("aggregate")[-1]["pipeline"][0]["$vectorSearch"]
    assert stage["filter"] == {"tenant_id": tenant, "metadata.kind": {"$in": ["rule", "fact"]}}
    assert stage["limit"] == 8 and stage["numCandidates"] == 8 * 15  # rank: applied after
    assert stage["index"] == "memory_vector_index" and stage["path"] == "embedding"


def test_documents_carry_the_tenant_in_their_id(mongo: Case) -> None:
    tenant_a, tenant_b = mongo.tenants
    items = records(2, "ids")
    mongo.store(tenant_a, items)
    stored = next(iter(mongo.server.collections.values()))
    assert set(stored) == {f"{tenant_a}:{i.id}" for i in items}
    assert {d["tenant_id"] for d in stored.values()} == {tenant_a}
    run(mongo.backend.delete, tenant_b, [i.id for i in items])
    assert len(stored) == 2


@pytest.mark.parametrize(("index", "problem"), [
    (None, "missing"),
    ({"type": "search"}, "not vectorSearch"),
    ({"queryable": False, "status": "BUILDING"}, "not queryable"),
    ({"dims": 768}, "768 dimensions"),
    ({"no_tenant": True}, "no filter field 'tenant_id'"),
])
def test_the_index_is_checked_before_the_first_operation(index: dict | None,
                                                         problem: str) -> None:
    definition = fixture("mongodb", "search_index")
    if index is None:
        definition = {}
    else:
        definition.update({k: v for k, v in index.items() if k in {"type", "queryable",
                                                                   "status"}})
        fields = definition["latestDefinition"]["fields"]
        if "dims" in index:
            fields[0]["numDimensions"] = index["dims"]
        if index.get("no_tenant"):
            definition["latestDefinition"]["fields"] = [f for f in fields
                                                        if f["path"] != "tenant_id"]
    server = MongoEmulator(index=definition).start()
    try:
        case = _case(server)
        with pytest.raises(BackendRequestFailed) as error:
            run(case.backend.upsert, case.tenants[0], records(1, "x"))
        assert problem in error.value.message
        assert server.named("update") == []  # nothing was written
        status = run(case.backend.health_check)
        assert isinstance(status, Unhealthy) and problem in status.details
    finally:
        server.stop()


def test_rate_limits_refusals_and_outages_are_mapped(mongo: Case) -> None:
    tenant = mongo.tenants[0]
    mongo.store(tenant, records(1, "e"))
    mongo.server.fail_next(1, fixture("mongodb", "rate_limited_error"))
    with pytest.raises(RateLimited):
        run(mongo.backend.get, tenant, ["x"])
    mongo.server.fail_next(1, {"ok": 0.0, "errmsg": "not authorized", "code": 13,
                               "codeName": "Unauthorized"})
    with pytest.raises(BackendRequestFailed):
        run(mongo.backend.get, tenant, ["x"])
    mongo.server.stop()
    with pytest.raises(BackendUnavailable):
        run(mongo.backend.get, tenant, ["x"])
    assert isinstance(run(mongo.backend.health_check), Unhealthy)
