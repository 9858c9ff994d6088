"""Cross-tenant cases of the agent routes (seed 003, ``/api/agents/...``) and conversation
ingestion (``/api/v1/conversations``), registered into ``tests.tenants.test_cross_tenant``'s
table: A naming B's agent, project or agent memory gets what it gets for ones that exist
nowhere."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

AGENTS = "/api/agents"


def _without(key: str, response: Any) -> Any:
    """An answer without the fresh id ``key`` of what it created or queued (the only field
    two such answers differ in besides the timestamps ``normalised`` drops)."""
    data = response.json()
    data.pop(key, None)
    return JsonResponse(data, status=response.status_code)


def register(case: Any, post: Any) -> None:
    """Add the agent-memory, extraction and conversation cases to the cross-tenant table."""
    @case("agent-memories", "get")
    def list_agent_memories_of_another_tenants_agent(a: Any, t: dict[str, str]) -> Any:
        return a.client.get(
            f"{AGENTS}/{t['agent']}/memories?projectId={t['project']}&userId=u1")

    @case("agent-memories", "post")
    def add_agent_memory_in_another_tenants_project(a: Any, t: dict[str, str]) -> Any:
        return _without("id", post(a.client, f"{AGENTS}/{t['agent']}/memories",
                                   {"projectId": t["project"], "content": "x", "userId": "u1"}))

    @case("agent-memories", "delete")
    def clear_another_tenants_agent_memories(a: Any, t: dict[str, str]) -> Any:
        return a.client.delete(
            f"{AGENTS}/{t['agent']}/memories?projectId={t['project']}&userId=u1")

    @case("agent-memory", "delete")
    def delete_another_tenants_agent_memory(a: Any, t: dict[str, str]) -> Any:
        return a.client.delete(f"{AGENTS}/{t['agent']}/memories/{t['agent_memory']}")

    @case("agent-extract", "post")
    def extract_into_another_tenants_agent(a: Any, t: dict[str, str]) -> Any:
        return _without("jobId", post(a.client, f"{AGENTS}/{t['agent']}/extract", {
            "projectId": t["project"], "transcript": "Learning: always x y z."}))

    @case("conversation-list", "post")
    def ingest_into_another_tenants_project(a: Any, t: dict[str, str]) -> Any:
        return _without("jobId", post(a.client, "/api/v1/conversations", {
            "layer": "project", "identifiers": {"projectId": t["project"]},
            "messages": [{"role": "user", "name": "Ana", "content": "I live in Lisbon."}]}))
