"""The Python client (``clients/python``) against the live test server: every operation, sync
and async, the error envelope as typed exceptions, and retries that honour ``Retry-After``
(these against an ``httpx.MockTransport`` that answers 429/503 as the service does)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import httpx
import pytest
from memory_client import (
    AsyncMemoryClient,
    InvalidRequest,
    MemoryClient,
    NotFound,
    PolicyViolation,
    RateLimited,
    ServiceUnavailable,
    ServiceUnreachable,
    Unauthorized,
)

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])
USER = {"userId": "maria"}


@pytest.fixture(autouse=True)
def _owner_flushes(owner_flushes: None) -> None:
    """Transactional tests: the owner role empties the tables afterwards."""


@pytest.fixture
def unused_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_operation_round_trips_with_the_sync_client(live_server: Any,
                                                          tenant_a: Any) -> None:
    with MemoryClient(live_server.url, tenant_a.key) as client:
        added = client.add("Maria moved to Lisbon in May 2023", layer="user",
                           identifiers=USER, metadata={"tags": ["move"]})["memory"]
        assert client.get(added["id"])["memory"]["content"] == "Maria moved to Lisbon in May 2023"
        updated = client.update(added["id"], content="Maria moved to Porto in May 2023")
        assert updated["memory"]["version"] == 2
        found = client.search("Where does Maria live?", identifiers=USER, threshold=0)
        assert [r["memory"]["id"] for r in found["results"]] == [added["id"]]
        recalled = client.recall("Maria's city", identifiers=USER)
        assert recalled["results"][0]["memory"]["id"] == added["id"]
        assert [m["id"] for m in client.list(layer="user", identifiers=USER)["memories"]] \
            == [added["id"]]
        assert client.delete(added["id"]) == {"success": True}
        with pytest.raises(NotFound) as missing:
            client.get(added["id"])
        assert missing.value.code == "MEMORY_NOT_FOUND" and missing.value.status == 404


def test_agent_memories_round_trip(live_server: Any, tenant_a: Any) -> None:
    with MemoryClient(live_server.url, tenant_a.key) as client:
        item = client.agent_memory_add("coder", project_id="p1", content="Use make lint")
        assert item["source"] == "manual"
        assert client.agent_memories("coder", project_id="p1")["memories"] == [item]
        assert client.agent_memory_delete("coder", item["id"]) is None
        client.agent_memory_add("coder", project_id="p1", content="Run the quick lane first")
        assert client.agent_memories_clear("coder", project_id="p1") is None
        assert client.agent_memories("coder", project_id="p1")["memories"] == []
        ingested = client.ingest_conversation(
            [{"role": "user", "name": "Maria", "content": "I live in Porto."}],
            identifiers=USER)
        assert ingested["status"] == "queued" and ingested["messages"] == 1
        queued = client.agent_extract("coder", project_id="p1",
                                      transcript="Learning: always run make lint first.")
        assert queued["status"] == "queued" and queued["jobId"]


def test_the_async_client_does_the_same(live_server: Any, tenant_a: Any) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with AsyncMemoryClient(live_server.url, tenant_a.key) as client:
            added = (await client.add("Jon plays the violin", layer="user",
                                      identifiers=USER))["memory"]
            found = await client.search("violin", identifiers=USER, threshold=0)
            await client.delete(added["id"])
            try:
                await client.get(added["id"])
            except NotFound as err:
                return added, found, err
            return added, found, None

    added, found, error = asyncio.run(scenario())
    assert found["results"][0]["memory"]["id"] == added["id"]
    assert isinstance(error, NotFound)


def test_errors_arrive_as_typed_exceptions(live_server: Any, tenant_a: Any) -> None:
    with MemoryClient(live_server.url, tenant_a.key) as client:
        with pytest.raises(InvalidRequest) as bad_layer:
            client.add("x", layer="galaxy", identifiers=USER)
        assert bad_layer.value.code == "INVALID_LAYER" and bad_layer.value.status == 400
        assert bad_layer.value.details["allowed"][0] == "agent"
        with pytest.raises(InvalidRequest) as too_long:
            client.add("x" * 200_000, layer="user", identifiers=USER)
        assert too_long.value.code == "CONTENT_TOO_LONG"
        with pytest.raises(InvalidRequest) as bad_agent:
            client.agent_memories("has space", project_id="p1")
        assert bad_agent.value.code == "INVALID_INPUT"
    with MemoryClient(live_server.url, "mem_wrong") as client, pytest.raises(Unauthorized):
        client.list(layer="user", identifiers=USER)


def test_a_policy_refusal_is_a_policy_violation(live_server: Any, tenant_a: Any) -> None:
    created = tenant_a.client.post("/api/v1/policies", {"name": "no-falcon",
                                                        "denied_terms": ["falcon"]}, format="json")
    assert created.status_code == 201, created.content
    with MemoryClient(live_server.url, tenant_a.key) as client, \
            pytest.raises(PolicyViolation) as refused:
        client.agent_memory_add("coder", project_id="p1", content="Project falcon ships")
    assert refused.value.status == 422


def _scripted(answers: list[tuple[int, dict[str, str]]], seen: list[httpx.Request]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, headers = answers.pop(0) if answers else (200, {})
        if status == 200:
            return httpx.Response(200, json={"memories": []})
        error = {"code": "RATE_LIMITED" if status == 429 else "SERVICE_UNAVAILABLE",
                 "message": "slow down", "operation": "memory.list", "details": {},
                 "retryable": True}
        return httpx.Response(status, json={"error": error}, headers=headers)
    return handler


def test_429_and_503_are_retried_honouring_retry_after(monkeypatch: Any) -> None:
    waits: list[float] = []
    monkeypatch.setattr("time.sleep", waits.append)
    seen: list[httpx.Request] = []
    transport = httpx.MockTransport(_scripted(
        [(429, {"Retry-After": "2"}), (503, {}), (429, {"Retry-After": "120"})], seen))
    client = MemoryClient("http://memory.test", "mem_k", transport=transport, max_wait=30)
    assert client.list(layer="user", identifiers=USER) == {"memories": []}
    assert len(seen) == 4 and waits[0] == 2.0 and waits[2] == 30.0
    assert 0 < waits[1] <= 8
    assert seen[0].headers["Authorization"] == "Bearer mem_k"


def test_retries_run_out_into_the_typed_error(monkeypatch: Any) -> None:
    monkeypatch.setattr("time.sleep", lambda _: None)
    seen: list[httpx.Request] = []
    transport = httpx.MockTransport(_scripted([(429, {"Retry-After": "1"})] * 5, seen))
    client = MemoryClient("http://memory.test", "k", transport=transport, max_retries=2)
    with pytest.raises(RateLimited) as limited:
        client.list(layer="user")
    assert len(seen) == 3 and limited.value.retry_after == 1.0
    seen.clear()
    client = MemoryClient("http://memory.test", "k", max_retries=0, transport=httpx.MockTransport(
        _scripted([(503, {})], seen)))
    with pytest.raises(ServiceUnavailable):
        client.list(layer="user")


def test_the_async_client_retries_too(monkeypatch: Any) -> None:
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
    monkeypatch.setattr("asyncio.sleep", fake_sleep)
    seen: list[httpx.Request] = []
    transport = httpx.MockTransport(_scripted([(429, {"Retry-After": "3"})], seen))

    async def call() -> Any:
        async with AsyncMemoryClient("http://memory.test", "k", transport=transport) as client:
            return await client.list(layer="user")
    assert asyncio.run(call()) == {"memories": []}
    assert waits == [3.0] and len(seen) == 2


def test_an_unreachable_service_is_named(unused_port: int) -> None:
    client = MemoryClient(f"http://127.0.0.1:{unused_port}", "k", max_retries=1, max_wait=0)
    with pytest.raises(ServiceUnreachable) as down:
        client.list(layer="user")
    assert str(unused_port) in down.value.message


def test_a_non_json_error_body_still_raises_typed() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(502, text="<html>bad gateway"))
    client = MemoryClient("http://memory.test", "k", transport=transport, max_retries=0)
    with pytest.raises(ServiceUnavailable) as bad:
        client.get("x")
    assert bad.value.status == 502 and json.dumps(bad.value.details) == "{}"
