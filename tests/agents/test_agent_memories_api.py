"""Seed 003's agent memory endpoints: every scenario of "Memory CRUD API endpoints", the cap of
50 on read, bad input, and the tenant API contract."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

from jobs.models import QueuedJob
from memories.models import Memory, State
from tenants.context import tenant_scope
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body

pytestmark = pytest.mark.django_db
URL = "/api/agents/{agent}/memories"


class TestAgentMemoryContract(TenantApiContract):
    operations = ("agent_memory.list", "agent_memory.add", "agent_memory.delete",
                  "agent_memory.clear", "agent_memory.extract")


def add(tenant: Any, content: str, *, agent: str = "reviewer-bot", project: str = "p1",
        **extra: Any) -> Any:
    return tenant.client.post(URL.format(agent=agent), {"projectId": project,
                                                        "content": content, **extra},
                              format="json")


def listing(tenant: Any, *, agent: str = "reviewer-bot", project: str = "p1") -> list[Any]:
    response = tenant.client.get(URL.format(agent=agent), {"projectId": project})
    assert response.status_code == 200, response.content[:300]
    return list(body(response)["memories"])


def test_it_creates_a_manual_memory_and_returns_it_with_201(tenant_a: Any) -> None:
    response = add(tenant_a, "The CI runs `make test` on two cores.")
    assert response.status_code == 201, response.content
    item = body(response)
    assert set(item) == {"id", "agentName", "projectId", "content", "source", "createdAt"}
    assert (item["agentName"], item["projectId"], item["source"]) == (
        "reviewer-bot", "p1", "manual")
    assert item["content"] == "The CI runs `make test` on two cores."
    assert uuid.UUID(item["id"]).version == 7
    assert datetime.fromisoformat(item["createdAt"].replace("Z", "+00:00")).tzinfo
    with tenant_scope(tenant_a.ctx):
        stored = Memory.objects.get(pk=item["id"])
    assert (stored.layer, stored.agent_id, stored.project_id, stored.user_id) == (
        "agent", "reviewer-bot", "p1", "_shared")


def test_it_lists_the_50_most_recent_newest_first_of_55(tenant_a: Any) -> None:
    for i in range(55):
        assert add(tenant_a, f"Learning number {i} about the build").status_code == 201
    add(tenant_a, "Another project's learning", project="p2")
    add(tenant_a, "Another agent's learning", agent="other-bot")
    items = listing(tenant_a)
    assert [m["content"] for m in items] == [
        f"Learning number {i} about the build" for i in range(54, 4, -1)]
    created = [m["createdAt"] for m in items]
    assert created == sorted(created, reverse=True)
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.filter(agent_id="reviewer-bot", project_id="p1").count() == 55


def test_it_deletes_one_memory_with_204_and_only_that_agents(tenant_a: Any) -> None:
    mine = body(add(tenant_a, "Use ruff before committing"))["id"]
    theirs = body(add(tenant_a, "Other agent's rule", agent="other-bot"))["id"]
    assert tenant_a.client.delete(f"{URL.format(agent='reviewer-bot')}/{mine}"
                                  ).status_code == 204
    assert listing(tenant_a) == []
    # Naming another agent's memory under this agent changes nothing, like a missing id.
    assert tenant_a.client.delete(f"{URL.format(agent='reviewer-bot')}/{theirs}"
                                  ).status_code == 204
    assert [m["id"] for m in listing(tenant_a, agent="other-bot")] == [theirs]
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=mine).state == State.DELETED


def test_a_memory_id_that_reads_like_a_route_is_a_memory_id(tenant_a: Any) -> None:
    """``…/memories/memories`` names memory "memories" of the agent (none: deleting it changes
    nothing, as for any missing id), not the memories of an agent called "…/memories"."""
    add(tenant_a, "Use ruff before committing")
    url = URL.format(agent="reviewer-bot")
    response = tenant_a.client.delete(f"{url}/memories")
    assert response.status_code == 204, response.content
    assert [m["content"] for m in listing(tenant_a)] == ["Use ruff before committing"]


def test_it_deletes_every_memory_of_the_agent_and_project_with_204(tenant_a: Any) -> None:
    for i in range(52):
        add(tenant_a, f"Fact {i} about deployments")
    keep = body(add(tenant_a, "A fact of another project", project="p2"))["id"]
    response = tenant_a.client.delete(URL.format(agent="reviewer-bot") + "?projectId=p1")
    assert response.status_code == 204 and not response.content
    assert listing(tenant_a) == []
    assert [m["id"] for m in listing(tenant_a, project="p2")] == [keep]
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.filter(project_id="p1", state=State.DELETED).count() == 52


def test_an_agent_memory_is_a_memory_of_the_one_store(tenant_a: Any) -> None:
    memory_id = body(add(tenant_a, "Deploys go through the staging cluster first"))["id"]
    response = tenant_a.client.post("/api/v1/memories/search", {
        "query": "staging cluster deploys", "layers": ["agent"], "threshold": 0,
        "identifiers": {"agentId": "reviewer-bot", "userId": "_shared"}}, format="json")
    assert response.status_code == 200, response.content
    assert memory_id in [r["memory"]["id"] for r in body(response)["results"]]
    history = tenant_a.client.get(f"/api/v1/memories/{memory_id}/history")
    assert len(body(history)["history"]) == 1


def test_per_user_agent_memories_stay_apart(tenant_a: Any) -> None:
    add(tenant_a, "Maria prefers short answers", userId="maria")
    assert listing(tenant_a) == []
    response = tenant_a.client.get(URL.format(agent="reviewer-bot"),
                                   {"projectId": "p1", "userId": "maria"})
    assert [m["content"] for m in body(response)["memories"]] == ["Maria prefers short answers"]


@pytest.mark.parametrize("user", ["", "   "])
def test_an_empty_user_id_is_refused_and_clears_nothing(tenant_a: Any, user: str) -> None:
    """``userId=`` is a client's mistake, not "no user": read as absent, a clear with it
    deleted the agent's shared memories of the project."""
    add(tenant_a, "A shared fact about deployments")
    url = URL.format(agent="reviewer-bot")
    for method in (tenant_a.client.get, tenant_a.client.delete):
        assert_error(method(f"{url}?projectId=p1&userId={user}"), 400, "INVALID_INPUT")
    assert_error(add(tenant_a, "Another fact", userId=user), 400, "INVALID_INPUT")
    assert [m["content"] for m in listing(tenant_a)] == ["A shared fact about deployments"]


@pytest.mark.parametrize("name", ["a/b", "has space", "x" * 300, "-leading", "ä-bot"])
def test_a_bad_agent_name_is_a_clear_400(tenant_a: Any, name: str) -> None:
    from urllib.parse import quote
    url = f"/api/agents/{quote(name, safe='/')}/memories"
    assert_error(tenant_a.client.get(url, {"projectId": "p1"}), 400, "INVALID_INPUT")
    assert_error(tenant_a.client.post(url, {"projectId": "p1", "content": "x y z"},
                                      format="json"), 400, "INVALID_INPUT")


def test_a_missing_project_id_is_a_clear_400_and_stores_nothing(tenant_a: Any) -> None:
    url = URL.format(agent="reviewer-bot")
    assert_error(tenant_a.client.get(url), 400, "MISSING_IDENTIFIER")
    assert_error(tenant_a.client.delete(url), 400, "MISSING_IDENTIFIER")
    assert_error(tenant_a.client.post(url, {"content": "no project"}, format="json"), 400,
                 "INVALID_INPUT")
    assert_error(tenant_a.client.post(url, {"projectId": "p1"}, format="json"), 400)
    assert_error(tenant_a.client.post(url, {"projectId": 5, "content": "x"}, format="json"),
                 400, "INVALID_INPUT")
    assert_error(tenant_a.client.post(url, {"projectId": "p1", "content": "x",
                                            "source": "extraction"}, format="json"), 400)
    with tenant_scope(tenant_a.ctx):
        assert not Memory.objects.exists()


def test_a_key_pinned_to_an_agent_may_not_name_another(tenant_a: Any) -> None:
    from tests.helpers import new_key
    _, client = new_key(tenant_a, roles=["writer"], allowed_layers=["agent"],
                        pinned_identifiers={"agentId": "reviewer-bot"})
    ok = client.post(URL.format(agent="reviewer-bot"), {"projectId": "p1", "content":
                                                        "Pinned keys work"}, format="json")
    assert ok.status_code == 201, ok.content
    assert_error(client.get(URL.format(agent="other-bot"), {"projectId": "p1"}), 403,
                 "UNAUTHORIZED")


def test_extract_queues_a_job_and_the_job_stores_new_learnings(tenant_a: Any) -> None:
    from agents.tasks import extract_learnings
    add(tenant_a, "Always run migrations with the owner role.")
    transcript = (
        "Ran the test suite.\n\n"
        "Learning: always run migrations with the owner role.\n"
        "The fix was slow, because the embedded PostgreSQL starts from var/pg on first use.\n"
        "Note: the console tests need Chromium installed by make test.\n"
        "What does the linter say?\n")
    response = tenant_a.client.post("/api/agents/reviewer-bot/extract",
                                    {"projectId": "p1", "transcript": transcript},
                                    format="json")
    assert response.status_code == 202, response.content
    with tenant_scope(tenant_a.ctx):
        job = QueuedJob.objects.get(pk=body(response)["jobId"])
    assert job.task == "agents.extract_learnings"
    outcome = extract_learnings(*job.args, **job.kwargs)
    assert outcome == {"stored": 2, "known": 1, "refused": 0, "fallback": True}
    items = listing(tenant_a)
    assert {m["content"]: m["source"] for m in items} == {
        "Always run migrations with the owner role.": "manual",
        "The fix was slow, because the embedded PostgreSQL starts from var/pg on first use.":
            "extraction",
        "the console tests need Chromium installed by make test.": "extraction",
    }
    # The same transcript again: everything is known, nothing new is stored.
    again = extract_learnings(*job.args, **job.kwargs)
    assert again == {"stored": 0, "known": 3, "refused": 0, "fallback": True}


def test_extract_refuses_a_bad_transcript_clearly(tenant_a: Any) -> None:
    url = "/api/agents/reviewer-bot/extract"
    for transcript in ("", "   ", "bin\x00ary", "x" * 200_001):
        assert_error(tenant_a.client.post(url, {"projectId": "p1", "transcript": transcript},
                                          format="json"), 400, "INVALID_INPUT")
    assert_error(tenant_a.client.post(url, {"projectId": "p1", "transcript": ["a"]},
                                      format="json"), 400, "INVALID_INPUT")
    with tenant_scope(tenant_a.ctx):
        assert not QueuedJob.objects.filter(task="agents.extract_learnings").exists()


def test_a_transcript_without_learnings_stores_nothing(tenant_a: Any) -> None:
    from agents.tasks import extract_learnings
    tenant_a.client.post("/api/agents/reviewer-bot/extract", {
        "projectId": "p1", "transcript": "Opened the file.\nEdited two lines.\nDone."},
        format="json")
    with tenant_scope(tenant_a.ctx):
        job = QueuedJob.objects.get(task="agents.extract_learnings")
    assert extract_learnings(*job.args, **job.kwargs)["stored"] == 0
    assert listing(tenant_a) == []
