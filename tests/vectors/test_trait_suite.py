"""The vector backend trait's shared suite, run against every backend (``case`` fixture):
real pgvector and Qdrant, the others against their vendors' documented APIs."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vectors.cases import Case, near, records, run, unit_vector
from vectors.base import Capabilities, DistanceMetric, Healthy, SearchQuery

pytestmark = pytest.mark.django_db


def _cosine(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def test_it_reports_health_and_capabilities(case: Case) -> None:
    status = run(case.backend.health_check, case.tenants[0])
    assert isinstance(status, Healthy), status
    assert status.latency_ms >= 0
    caps = run(case.backend.capabilities)
    assert isinstance(caps, Capabilities)
    assert caps.max_vector_dimensions >= 384
    assert DistanceMetric.COSINE in caps.distance_metrics
    assert caps.supports_batch_upsert and caps.supports_metadata_filter


def test_it_stores_and_gets_records_with_metadata(case: Case) -> None:
    tenant = case.tenants[0]
    items = records(6, "get")
    case.store(tenant, items)
    with case.scope(tenant):
        found = {r.id: r for r in run(case.backend.get, tenant, [i.id for i in items[:4]])}
    assert set(found) == {i.id for i in items[:4]}
    for item in items[:4]:
        got = found[item.id]
        assert _cosine(got.vector, item.vector) == pytest.approx(1.0, abs=1e-5)
        assert {k: got.metadata.get(k) for k in item.metadata} == dict(item.metadata)
        assert got.text == item.text


def test_it_finds_the_nearest_first(case: Case) -> None:
    tenant = case.tenants[0]
    items = records(12, "nn")
    case.store(tenant, items)
    target = items[7]
    with case.scope(tenant):
        hits = run(case.backend.search, tenant,
                   SearchQuery(vector=near(target.vector, "q", 0.3), limit=5))
    assert 1 <= len(hits) <= 5
    assert hits[0].id == target.id
    assert hits[0].score > hits[-1].score
    assert hits[0].metadata["rank"] == 7
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_it_keeps_tenants_apart(case: Case) -> None:
    tenant_a, tenant_b = case.tenants
    items = records(5, "iso")
    case.store(tenant_a, items)
    with case.scope(tenant_b):
        assert run(case.backend.search, tenant_b,
                   SearchQuery(vector=items[0].vector, limit=5)) == []
        assert run(case.backend.get, tenant_b, [i.id for i in items]) == []
        run(case.backend.delete, tenant_b, [i.id for i in items])
    with case.scope(tenant_a):
        assert len(run(case.backend.get, tenant_a, [i.id for i in items])) == 5
        hits = run(case.backend.search, tenant_a, SearchQuery(vector=items[0].vector, limit=5))
    assert hits[0].id == items[0].id


def test_it_filters_by_metadata(case: Case) -> None:
    tenant = case.tenants[0]
    items = records(9, "filter", topic="pets")
    case.store(tenant, items)
    query = items[0].vector
    with case.scope(tenant):
        rules = run(case.backend.search, tenant,
                    SearchQuery(vector=query, limit=9, filter={"kind": "rule"}))
        either = run(case.backend.search, tenant,
                     SearchQuery(vector=query, limit=9,
                                 filter={"kind": ["fact", "rule"], "topic": "pets"}))
        none = run(case.backend.search, tenant,
                   SearchQuery(vector=query, limit=9, filter={"topic": "cars"}))
    assert sorted(h.metadata["rank"] for h in rules) == [2, 5, 8]
    assert sorted(h.metadata["rank"] for h in either) == [0, 2, 3, 5, 6, 8]
    assert none == []


def test_it_forgets_deleted_records(case: Case) -> None:
    tenant = case.tenants[0]
    items = records(4, "del")
    case.store(tenant, items)
    case.remove(tenant, [items[1].id])
    with case.scope(tenant):
        left = {r.id for r in run(case.backend.get, tenant, [i.id for i in items])}
        hits = run(case.backend.search, tenant, SearchQuery(vector=items[1].vector, limit=4))
    assert left == {items[0].id, items[2].id, items[3].id}
    assert items[1].id not in {h.id for h in hits}


def test_an_upsert_replaces_the_vector(case: Case) -> None:
    tenant = case.tenants[0]
    items = records(4, "replace")
    case.store(tenant, items)
    moved = type(items[2])(id=items[2].id, vector=unit_vector("elsewhere"),
                           metadata=items[2].metadata, text=items[2].text)
    case.store(tenant, [moved])
    with case.scope(tenant):
        hits = run(case.backend.search, tenant,
                   SearchQuery(vector=unit_vector("elsewhere"), limit=1))
        got = run(case.backend.get, tenant, [items[2].id])
    assert hits[0].id == items[2].id
    assert _cosine(got[0].vector, unit_vector("elsewhere")) == pytest.approx(1.0, abs=1e-5)


def test_it_drops_hits_below_min_score(case: Case) -> None:
    tenant = case.tenants[0]
    items = records(6, "threshold")
    case.store(tenant, items)
    with case.scope(tenant):
        hits = run(case.backend.search, tenant,
                   SearchQuery(vector=items[3].vector, limit=6, min_score=0.9))
    assert [h.id for h in hits] == [items[3].id]  # random 384-d vectors are ~orthogonal


def test_scan_lists_every_id_once(case: Case) -> None:
    caps = run(case.backend.capabilities)
    if not caps.supports_scan:
        pytest.skip(f"{case.name} cannot list its vectors")
    tenant = case.tenants[0]
    items = records(7, "scan")
    case.store(tenant, items)
    seen: list[str] = []
    cursor = None
    with case.scope(tenant):
        for _ in range(10):
            ids, cursor = run(case.backend.scan, tenant, cursor=cursor, limit=3)
            seen.extend(ids)
            if cursor is None:
                break
    assert sorted(seen) == sorted(i.id for i in items)


def test_hybrid_search_uses_keywords_when_supported(case: Case) -> None:
    caps = run(case.backend.capabilities)
    if not caps.supports_hybrid_search:
        with case.scope(case.tenants[0]), pytest.raises(Exception) as error:
            run(case.backend.search, case.tenants[0],
                SearchQuery(vector=unit_vector("x"), text="cats", hybrid=True))
        assert getattr(error.value, "code", "") == "PROVIDER_ERROR"
        return
    tenant = case.tenants[0]
    items = records(8, "hybrid")
    opposite = tuple(-x for x in items[0].vector)  # the last by vector similarity
    special = type(items[0])(id=items[5].id, vector=opposite, metadata=items[5].metadata,
                             text="the zebra crossing")
    case.store(tenant, [*items[:5], special, *items[6:]])
    with case.scope(tenant):
        by_vector = run(case.backend.search, tenant,
                        SearchQuery(vector=items[0].vector, limit=3))
        hybrid = run(case.backend.search, tenant, SearchQuery(
            vector=items[0].vector, text="zebra", hybrid=True, alpha=0.4, limit=3))
    assert items[5].id not in {h.id for h in by_vector}
    assert hybrid[0].id == items[5].id  # the only keyword match, fused in by the backend


def test_qdrant_weighs_the_two_rankings_by_alpha() -> None:
    from tests.vectors.cases import emulated

    case = emulated("qdrant", None, {"QDRANT_PATH": ":memory:"})
    tenant = case.tenants[0]
    items = records(8, "alpha")
    special = type(items[0])(id=items[5].id, vector=items[5].vector,
                             metadata=items[5].metadata, text="the zebra crossing")
    case.store(tenant, [*items[:5], special, *items[6:]])
    keyword_led = run(case.backend.search, tenant, SearchQuery(
        vector=items[0].vector, text="zebra", hybrid=True, alpha=0.1, limit=3))
    vector_only = run(case.backend.search, tenant, SearchQuery(
        vector=items[0].vector, text="zebra", hybrid=True, alpha=1.0, limit=3))
    assert keyword_led[0].id == items[5].id
    assert vector_only[0].id == items[0].id
