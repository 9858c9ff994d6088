"""``memory-mcp`` driven by the ``mcp`` SDK's own client over both transports (stdio and
streamable HTTP) against the live test server: typed tool schemas, every tool, the
resources, wrong types, another tenant's ids and requests without a key."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

pytestmark = [pytest.mark.slow,
              pytest.mark.django_db(transaction=True, databases=["default", "owner"])]
SCRIPT = str(Path(sys.executable).with_name("memory-mcp"))
USER = {"userId": "maria"}
TOOLS = {"memory_add", "memory_search", "memory_recall", "memory_get", "memory_update",
         "memory_delete", "memory_list", "memory_context", "memory_summaries", "agent_memories",
         "agent_memory_add", "agent_extract", "conversation_ingest"}


@pytest.fixture(autouse=True)
def _owner_flushes(owner_flushes: None) -> None:
    """Transactional tests: the owner role empties the tables afterwards."""


def stdio(live_server: Any, key: str) -> Client:
    env = {**os.environ, "MEMORY_API_KEY": key}
    return Client(StdioServerParameters(command=SCRIPT, args=["--url", live_server.url],
                                        env=env))


@pytest.fixture
def http_server(live_server: Any) -> Iterator[str]:
    """``memory-mcp --transport http`` on a free port; its MCP endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([SCRIPT, "--transport", "http", "--port", str(port), "--url",
                                live_server.url], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def http(url: str, key: str | None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)))


async def scenario(client: Client) -> dict[str, Any]:
    """Every tool once, in the order an agent would use them."""
    seen: dict[str, Any] = {}
    async with client:
        listed = await client.list_tools()
        seen["tools"] = {t.name: t.input_schema for t in listed.tools}
        added = await client.call_tool("memory_add", {
            "content": "Maria moved to Lisbon in May 2023", "layer": "user",
            "identifiers": USER, "tags": ["move"], "occurred_at": "2023-05-14"})
        memory = added.structured_content["memory"]
        seen["added"] = memory
        seen["search"] = (await client.call_tool("memory_search", {
            "query": "Maria Lisbon", "identifiers": USER, "mode": "keyword"})).structured_content
        seen["recall"] = (await client.call_tool("memory_recall", {
            "query": "Where does Maria live?", "identifiers": USER})).structured_content
        seen["filtered"] = [(await client.call_tool("memory_search", {
            "query": "Maria Lisbon", "identifiers": USER, "mode": "keyword", **f})
                             ).structured_content for f in (
            {"tags": ["move"], "before": "2023-06-01"}, {"since": "2024-01-01"},
            {"tags": ["other"]})]
        seen["recall_since"] = (await client.call_tool("memory_recall", {
            "query": "Where does Maria live?", "identifiers": USER, "since": "2024-01-01"})
                                ).structured_content
        seen["bad_since"] = await client.call_tool("memory_search", {
            "query": "Maria", "identifiers": USER, "since": "yesterday"})
        seen["context"] = (await client.call_tool("memory_context", {
            "query": "Where does Maria live?", "identifiers": USER, "budget": 200})
                           ).content[0].text
        seen["empty_context"] = (await client.call_tool("memory_context", {
            "identifiers": {"userId": "nobody"}})).content[0].text
        seen["small_budget"] = await client.call_tool("memory_context", {
            "identifiers": USER, "budget": 10})
        seen["summaries"] = (await client.call_tool("memory_summaries", {
            "identifiers": USER})).structured_content
        seen["updated"] = (await client.call_tool("memory_update", {
            "memory_id": memory["id"], "content": "Maria moved to Porto in 2024",
            "occurred_at": "2024-03-02"})).structured_content
        seen["get"] = (await client.call_tool("memory_get", {"memory_id": memory["id"]})
                       ).structured_content
        seen["list"] = (await client.call_tool("memory_list", {
            "layer": "user", "identifiers": USER})).structured_content
        resource = await client.read_resource(f"memory://memories/{memory['id']}")
        seen["resource"] = json.loads(resource.contents[0].text)
        await client.call_tool("agent_memory_add", {"agent": "coder", "project_id": "p1",
                                                    "content": "Run make lint first"})
        seen["agent"] = (await client.call_tool("agent_memories", {
            "agent": "coder", "project_id": "p1"})).structured_content
        agent_resource = await client.read_resource("memory://agents/coder/projects/p1")
        seen["agent_resource"] = json.loads(agent_resource.contents[0].text)
        seen["extract"] = (await client.call_tool("agent_extract", {
            "agent": "coder", "project_id": "p1",
            "transcript": "Learning: the docs build needs make docs."})).structured_content
        seen["ingest"] = (await client.call_tool("conversation_ingest", {
            "identifiers": USER, "messages": [
                {"role": "user", "name": "Maria", "content": "I adopted a cat named Pixel."}]})
                          ).structured_content
        seen["wrong_type"] = await client.call_tool("memory_search", {"query": 5, "limit": "x"})
        seen["bad_layer"] = await client.call_tool("memory_add", {"content": "x",
                                                                  "layer": "galaxy"})
        seen["no_user"] = await client.call_tool("memory_add", {"content": "x",
                                                                "layer": "user"})
        seen["deleted"] = (await client.call_tool("memory_delete", {"memory_id": memory["id"]})
                           ).structured_content
        seen["missing"] = await client.call_tool("memory_get", {"memory_id": memory["id"]})
    return seen


def check(seen: dict[str, Any]) -> None:
    assert set(seen["tools"]) == TOOLS
    search_schema = seen["tools"]["memory_search"]
    assert search_schema["required"] == ["query"]
    assert search_schema["properties"]["mode"]["enum"] == ["hybrid", "semantic", "keyword"]
    assert "description" in search_schema["properties"]["identifiers"]
    memory_id = seen["added"]["id"]
    assert seen["added"]["occurredAt"] == "2023-05-14T00:00:00Z"
    assert [r["memory"]["id"] for r in seen["search"]["results"]] == [memory_id]
    assert seen["recall"]["results"][0]["memory"]["id"] == memory_id
    assert [[r["memory"]["id"] for r in f["results"]] for f in seen["filtered"]] == [
        [memory_id], [], []]
    assert seen["recall_since"]["results"] == []
    assert seen["bad_since"].is_error and "occurredAt" in seen["bad_since"].content[0].text
    assert seen["context"] == ("## Relevant memories\n"
                               "- [14 May 2023] Maria moved to Lisbon in May 2023\n")
    assert seen["empty_context"] == "Nothing is stored for these identifiers yet."
    assert seen["small_budget"].is_error and "budget" in seen["small_budget"].content[0].text
    assert set(seen["summaries"]) >= {"summaries", "totalTokens"}
    assert seen["tools"]["memory_context"]["properties"]["budget"]["minimum"] == 50
    assert seen["updated"]["memory"]["version"] == 2
    assert seen["updated"]["memory"]["occurredAt"] == "2024-03-02T00:00:00Z"
    assert seen["get"]["memory"]["content"] == "Maria moved to Porto in 2024"
    assert [m["id"] for m in seen["list"]["memories"]] == [memory_id]
    assert seen["resource"]["memory"]["id"] == memory_id
    assert [m["content"] for m in seen["agent"]["memories"]] == ["Run make lint first"]
    assert seen["agent_resource"] == seen["agent"]
    assert seen["extract"]["status"] == "queued"
    assert seen["ingest"]["status"] == "queued" and seen["ingest"]["messages"] == 1
    assert seen["wrong_type"].is_error
    assert seen["bad_layer"].is_error and "layer" in seen["bad_layer"].content[0].text
    assert seen["no_user"].is_error
    assert "MISSING_IDENTIFIER: Layer 'user' requires userId" in seen["no_user"].content[0].text
    assert seen["deleted"] == {"success": True}
    assert seen["missing"].is_error
    assert "MEMORY_NOT_FOUND" in seen["missing"].content[0].text


def test_every_tool_over_stdio(live_server: Any, tenant_a: Any) -> None:
    check(asyncio.run(scenario(stdio(live_server, tenant_a.key))))


def test_every_tool_over_streamable_http(http_server: str, tenant_a: Any) -> None:
    check(asyncio.run(scenario(http(http_server, tenant_a.key))))


def test_another_tenants_memory_answers_like_a_missing_one(http_server: str, tenant_a: Any,
                                                           tenant_b: Any) -> None:
    foreign = tenant_b.add("Globex secret plan", identifiers=USER)

    async def probe() -> tuple[Any, Any]:
        async with http(http_server, tenant_a.key) as client:
            as_foreign = await client.call_tool("memory_get", {"memory_id": str(foreign.pk)})
            as_missing = await client.call_tool(
                "memory_get", {"memory_id": "01a20000-0000-7000-8000-000000000000"})
            return as_foreign, as_missing

    as_foreign, as_missing = asyncio.run(probe())
    assert as_foreign.is_error and as_missing.is_error
    assert as_foreign.content[0].text == as_missing.content[0].text
    assert "Globex" not in as_foreign.content[0].text


def test_an_http_request_without_a_key_is_refused(http_server: str, tenant_a: Any,
                                                  monkeypatch: Any) -> None:
    async def call() -> Any:
        async with http(http_server, None) as client:
            return await client.call_tool("memory_list", {"layer": "user",
                                                          "identifiers": USER})

    result = asyncio.run(call())
    assert result.is_error and "no API key" in result.content[0].text
