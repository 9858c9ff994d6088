"""Weaviate at its REST and gRPC boundary: the tenant key property and its filter on every
call, the collection's schema, hybrid search with alpha, errors."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from tests.vectors.cases import Case, emulated, records, run
from tests.vectors.conftest import _environ
from tests.vectors.emulators.weaviate import WeaviateEmulator
from vectors.adapters.weaviate import object_uuid
from vectors.base import SearchQuery, Unhealthy
from vectors.errors import BackendUnavailable, RateLimited


@pytest.fixture
def weaviate() -> Iterator[Case]:
    server = WeaviateEmulator().start()
    try:
        yield emulated("weaviate", server, {**_environ("weaviate", server),
                                            "WEAVIATE_ALPHA": "0.3"})
    finally:
        server.stop()


def _tenant_terms(filters: object) -> list[str]:
    found = []
    stack = [filters]
    while stack:
        node = stack.pop()
        stack.extend(node.filters)  # type: ignore[attr-defined]
        if node.HasField("target") and node.target.property == "tenant_id":  # type: ignore[attr-defined]
            found.append(node.value_text)  # type: ignore[attr-defined]
    return found


def test_the_collection_has_the_tenant_key_property(weaviate: Case) -> None:
    weaviate.store(weaviate.tenants[0], records(1, "schema"))
    schema = weaviate.server.schema["Memory"]
    properties = {p["name"]: p for p in schema["properties"]}
    assert properties["tenant_id"]["tokenization"] == "field"
    assert properties["tenant_id"]["indexFilterable"] is True
    assert properties["text"]["tokenization"] == "word"
    assert schema["vectorConfig"]["default"]["vectorizer"] == {"none": {}}


def test_every_call_names_the_tenant(weaviate: Case) -> None:
    tenant_a, tenant_b = weaviate.tenants
    items = records(3, "calls")
    weaviate.store(tenant_a, items)
    batch = [m for name, m in weaviate.server.grpc_calls if name == "BatchObjects"][-1]
    assert {o.uuid for o in batch.objects} == {object_uuid(tenant_a, i.id) for i in items}
    run(weaviate.backend.search, tenant_b, SearchQuery(vector=items[0].vector,
                                                       filter={"kind": "fact"}))
    run(weaviate.backend.get, tenant_b, [items[0].id])
    run(weaviate.backend.delete, tenant_b, [items[0].id])
    for name, message in weaviate.server.grpc_calls[-3:]:
        assert name in {"Search", "BatchDelete"}
        assert _tenant_terms(message.filters) == [tenant_b]
    assert len(weaviate.server.objects) == 3  # tenant B deleted nothing of A's


def test_hybrid_sends_alpha_and_the_query_text(weaviate: Case) -> None:
    tenant = weaviate.tenants[0]
    weaviate.store(tenant, records(3, "h"))
    vector = records(1, "q")[0].vector
    run(weaviate.backend.search, tenant, SearchQuery(vector=vector, text="cats", hybrid=True))
    run(weaviate.backend.search, tenant, SearchQuery(vector=vector, text="cats", hybrid=True,
                                                     alpha=0.8))
    sent = [m.hybrid_search for name, m in weaviate.server.grpc_calls if name == "Search"]
    alphas = [h.alpha_param if h.use_alpha_param else h.alpha for h in sent[-2:]]
    assert alphas == pytest.approx([0.3, 0.8])  # the configured default, then the query's
    assert sent[-1].query == "cats" and list(sent[-1].properties) == ["text"]


def test_a_similarity_floor_becomes_a_distance_limit(weaviate: Case) -> None:
    tenant = weaviate.tenants[0]
    weaviate.store(tenant, records(2, "d"))
    run(weaviate.backend.search, tenant, SearchQuery(vector=records(1, "q")[0].vector,
                                                     min_score=0.75))
    search = [m for name, m in weaviate.server.grpc_calls if name == "Search"][-1]
    assert search.near_vector.distance == pytest.approx(0.25)


def test_grpc_errors_are_mapped(weaviate: Case) -> None:
    tenant = weaviate.tenants[0]
    weaviate.store(tenant, records(1, "e"))
    weaviate.server.grpc_faults.append(grpc.StatusCode.RESOURCE_EXHAUSTED)
    with pytest.raises(RateLimited):
        run(weaviate.backend.get, tenant, ["x"])
    # the client retries an unavailable server for ~30 s; the operation deadline (5 s here:
    # a loaded CI machine exceeded 2 s) fails it sooner, so the memory system can fall back
    weaviate.server.grpc_faults.extend([grpc.StatusCode.UNAVAILABLE] * 10)
    with pytest.raises(BackendUnavailable) as error:
        run(weaviate.backend.get, tenant, ["x"])
    assert error.value.details["timeoutSeconds"] == 5


def test_an_unreachable_server_is_unhealthy() -> None:
    server = WeaviateEmulator().start()
    case = emulated("weaviate", server, _environ("weaviate", server))
    server.stop()
    status = run(case.backend.health_check)
    assert isinstance(status, Unhealthy)
    with pytest.raises(BackendUnavailable):
        run(case.backend.search, case.tenants[0], SearchQuery(vector=records(1, "q")[0].vector))
