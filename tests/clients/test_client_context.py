"""The Python client's context and summaries (``POST /api/v1/context``, ``GET
/api/v1/summaries``) against the live test server: JSON and Markdown, sync and async, another
tenant's memories absent, bad input as typed exceptions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from memory_client import AsyncMemoryClient, InvalidRequest, MemoryClient

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])
USER = {"userId": "maria"}


@pytest.fixture(autouse=True)
def _owner_flushes(owner_flushes: None) -> None:
    """Transactional tests: the owner role empties the tables afterwards."""


def test_the_context_as_json_and_as_markdown(live_server: Any, tenant_a: Any,
                                             tenant_b: Any) -> None:
    tenant_b.add("Maria's Globex badge code is 7731", identifiers=USER)
    with MemoryClient(live_server.url, tenant_a.key) as client:
        dated = client.add("Maria moved to Lisbon last week", layer="user", identifiers=USER,
                           occurredAt="2023-05-14")["memory"]
        plain = client.add("Maria drinks green tea", layer="user", identifiers=USER)["memory"]
        data = client.context("Where does Maria live?", identifiers=USER, budget=300)
        text = client.context("Where does Maria live?", identifiers=USER, budget=300,
                              markdown=True)
        summaries = client.summaries(identifiers=USER)
    assert {m["id"] for m in data["memories"]} == {dated["id"], plain["id"]}
    assert 0 < data["tokenCount"] <= 300
    assert isinstance(text, str) and text.startswith("## Relevant memories\n")
    assert "- [14 May 2023] Maria moved to Lisbon last week" in text.splitlines()
    assert "- Maria drinks green tea" in text.splitlines()
    assert "Globex" not in text and "Globex" not in str(data)
    assert set(summaries) >= {"summaries", "totalTokens"}


def test_the_async_client_reads_the_context_too(live_server: Any, tenant_a: Any) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with AsyncMemoryClient(live_server.url, tenant_a.key) as client:
            await client.add("Jon plays the violin", layer="user", identifiers=USER)
            return (await client.context("violin", identifiers=USER, markdown=True),
                    await client.context(identifiers=USER, budget=50))

    text, data = asyncio.run(scenario())
    assert text == "## Relevant memories\n- Jon plays the violin\n"
    assert data["budget"] == 50 and [m["content"] for m in data["memories"]] == [
        "Jon plays the violin"]


def test_bad_context_input_is_a_typed_error(live_server: Any, tenant_a: Any) -> None:
    with MemoryClient(live_server.url, tenant_a.key) as client:
        with pytest.raises(InvalidRequest) as small:
            client.context("x", identifiers=USER, budget=10)
        assert small.value.code == "INVALID_INPUT" and small.value.details["min"] == 50
        with pytest.raises(InvalidRequest) as markdown_error:
            client.context("x", identifiers=USER, budget=10, markdown=True)
        assert markdown_error.value.code == "INVALID_INPUT"  # errors stay JSON
        with pytest.raises(InvalidRequest):
            client.summaries(identifiers=USER, depth="huge")
