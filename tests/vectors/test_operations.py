"""Operations around every backend (seed 001 "Backend Health Checks", "Backend Observability",
"Backend Circuit Breaker", "Pinecone rate limit handling"), shown on the Pinecone adapter
against its documented API on a local port."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY

from memory_project.resilience import reset_breakers
from tests.vectors.cases import Case, emulated, records, run
from tests.vectors.conftest import _environ
from tests.vectors.emulators.pinecone import PineconeEmulator
from tests.vectors.fixture_server import fixture
from vectors.base import Healthy, SearchQuery, Unhealthy
from vectors.errors import BackendCircuitOpen, BackendRequestFailed, BackendUnavailable, RateLimited


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def pinecone() -> Iterator[Case]:
    server = PineconeEmulator().start()
    try:
        yield emulated("pinecone", server, _environ("pinecone", server))
    finally:
        server.stop()


def test_health_is_unhealthy_with_details_when_the_backend_is_down(pinecone: Case) -> None:
    assert isinstance(run(pinecone.backend.health_check), Healthy)
    before = _sample("vector_backend_health_check_failed_total", backend="pinecone")
    pinecone.server.stop()
    status = run(pinecone.backend.health_check)
    assert isinstance(status, Unhealthy)
    assert "Connect" in status.details or "connect" in status.details
    assert status.latency_ms >= 0
    assert _sample("vector_backend_health_check_failed_total", backend="pinecone") == before + 1


def test_every_operation_is_counted_and_timed(pinecone: Case) -> None:
    labels = {"backend": "pinecone", "operation": "upsert"}
    ok = _sample("vector_backend_operation_total", status="ok", **labels)
    timed = _sample("vector_backend_operation_duration_ms_count", **labels)
    pinecone.store(pinecone.tenants[0], records(3, "m"))
    assert _sample("vector_backend_operation_total", status="ok", **labels) == ok + 1
    assert _sample("vector_backend_operation_duration_ms_count", **labels) == timed + 1
    errors = _sample("vector_backend_errors_total", backend="pinecone",
                     error_code="BACKEND_UNAVAILABLE")
    pinecone.server.fail_next(1, 503, fixture("pinecone", "unavailable_response"))
    with pytest.raises(BackendUnavailable):
        run(pinecone.backend.get, pinecone.tenants[0], ["x"])
    assert _sample("vector_backend_errors_total", backend="pinecone",
                   error_code="BACKEND_UNAVAILABLE") == errors + 1
    assert _sample("vector_backend_operation_total", backend="pinecone", operation="get",
                   status="error") >= 1


def test_rate_limits_are_retried_with_backoff_and_counted(pinecone: Case) -> None:
    items = records(2, "rl")
    pinecone.store(pinecone.tenants[0], items)
    before = _sample("vector_backend_rate_limit_total", backend="pinecone")
    pinecone.server.fail_next(3, 429, fixture("pinecone", "rate_limited_response"))
    sent = len(pinecone.server.requests)
    hits = run(pinecone.backend.search, pinecone.tenants[0],
               SearchQuery(vector=items[0].vector, limit=1))
    assert hits[0].id == items[0].id
    assert len(pinecone.server.requests) - sent == 4  # three 429s, then the answer
    assert _sample("vector_backend_rate_limit_total", backend="pinecone") == before + 3


def test_rate_limits_beyond_the_retries_fail_as_rate_limited(pinecone: Case) -> None:
    pinecone.server.fail_next(20, 429, fixture("pinecone", "rate_limited_response"))
    with pytest.raises(RateLimited) as error:
        run(pinecone.backend.get, pinecone.tenants[0], ["x"])
    assert error.value.retryable
    # a backend that asks us to slow down is not broken: the circuit stays closed
    assert pinecone.backend.breaker.current_state == "closed"


def test_requests_carry_the_namespace_api_version_and_batches_of_1000(pinecone: Case) -> None:
    tenant = pinecone.tenants[0]
    pinecone.store(tenant, records(2300, "batch"))
    upserts = [r for r in pinecone.server.requests if r.path == "/vectors/upsert"]
    assert [len(r.body["vectors"]) for r in upserts] == [1000, 1000, 300]
    assert {r.body["namespace"] for r in upserts} == {tenant}
    assert all(r.headers["x-pinecone-api-version"] == "2026-07" for r in upserts)
    assert all(r.headers["api-key"] == "test-key" for r in upserts)
    run(pinecone.backend.search, tenant, SearchQuery(vector=records(1, "q")[0].vector,
                                                     filter={"kind": ["fact", "rule"]}))
    query = pinecone.server.bodies("/query")[-1]
    assert query["namespace"] == tenant
    assert query["filter"] == {"kind": {"$in": ["fact", "rule"]}}


def test_a_refused_request_is_a_provider_error(pinecone: Case) -> None:
    pinecone.server.fail_next(1, 400, {"error": {"code": "INVALID_ARGUMENT",
                                                 "message": "bad"}, "status": 400})
    with pytest.raises(BackendRequestFailed) as error:
        run(pinecone.backend.get, pinecone.tenants[0], ["x"])
    assert error.value.code == "PROVIDER_ERROR" and not error.value.retryable


def test_a_missing_index_is_created_at_first_use() -> None:
    server = PineconeEmulator(index_exists=False).start()
    try:
        case = emulated("pinecone", server, _environ("pinecone", server))
        case.store(case.tenants[0], records(1, "new"))
        created = server.bodies("/indexes")
        assert created[0]["name"] == "memories"
        assert created[0]["schema"]["fields"]["_values"] == {
            "type": "dense_vector", "dimension": 384, "metric": "cosine"}
    finally:
        server.stop()


@override_settings(CIRCUIT_BREAKER_FAIL_MAX=5, CIRCUIT_BREAKER_WINDOW_SECONDS=60,
                   CIRCUIT_BREAKER_RESET_SECONDS=0.5)
def test_the_circuit_opens_after_five_failures_and_half_opens_for_one_probe(
        pinecone: Case) -> None:
    reset_breakers()
    tenant = pinecone.tenants[0]
    run(pinecone.backend.get, tenant, ["warm"])  # resolve the index host first
    pinecone.server.fail_next(5, 503, fixture("pinecone", "unavailable_response"))
    for _ in range(5):
        with pytest.raises(BackendUnavailable):
            run(pinecone.backend.get, tenant, ["x"])
    sent = len(pinecone.server.requests)
    with pytest.raises(BackendCircuitOpen) as error:
        run(pinecone.backend.get, tenant, ["x"])
    assert error.value.envelope()["error"]["code"] == "BACKEND_CIRCUIT_OPEN"
    assert error.value.details["backend"] == "pinecone"
    assert len(pinecone.server.requests) == sent  # the backend was not called
    time.sleep(0.6)
    pinecone.server.fail_next(1, 503, fixture("pinecone", "unavailable_response"))
    with pytest.raises(BackendUnavailable):  # the half-open probe fails: open again
        run(pinecone.backend.get, tenant, ["x"])
    with pytest.raises(BackendCircuitOpen):
        run(pinecone.backend.get, tenant, ["x"])
    time.sleep(0.6)
    assert run(pinecone.backend.get, tenant, ["x"]) == []  # the probe succeeds: closed
    assert pinecone.backend.breaker.current_state == "closed"
