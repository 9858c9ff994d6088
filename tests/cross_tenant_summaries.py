"""Cross-tenant cases of the summary and context routes (``/api/v1/summaries``,
``/api/v1/context``), registered into ``tests.tenants.test_cross_tenant``'s table.

The cases that name B's tokens first write B's summaries (every scope B's memories are in), so
that A's answers are compared with a database that holds B's summaries: A naming B's project,
team, agent or user must get what it gets for identifiers that exist nowhere (``{"summary":
null}``, an empty list, a context without B's summaries or memories)."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

from memories.models import Memory
from summaries.generation import summary_generate
from summaries.scopes import scopes_of_memories
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.layers import IDENTIFIER_FIELDS
from tenants.models import Tenant

S = "/api/v1/summaries"
C = "/api/v1/context"


def summarise_b(t: dict[str, str]) -> None:
    """Write the summaries of every scope of B's memories. Only when ``t`` are B's tokens:
    the missing ones name no tenant, and A's answers must not change either way."""
    tenant = Tenant.objects.filter(slug=t["company"]).first()
    if tenant is None:
        return
    ctx = tenant_services.system_context(tenant, "test")
    with tenant_scope(ctx):
        rows = Memory.objects.values("layer", *IDENTIFIER_FIELDS.values())
        for scope in sorted(scopes_of_memories(rows), key=lambda s: (s.layer, s.key)):
            summary_generate(ctx, scope=scope, trigger="manual")


def _without(key: str, response: Any) -> Any:
    """A JSON answer without ``key`` (a fresh timestamp two such answers differ in)."""
    data = response.json()
    data.pop(key, None)
    return JsonResponse(data, status=response.status_code)


def _markdown(response: Any) -> Any:
    """A Markdown answer as JSON the harness can compare (an error is JSON already)."""
    if not response["Content-Type"].startswith("text/markdown"):
        return response
    return JsonResponse({"markdown": response.content.decode(),
                         "contentType": response["Content-Type"],
                         "tokenCount": response["X-Token-Count"],
                         "budget": response["X-Token-Budget"]}, status=response.status_code)


def register(case: Any, post: Any) -> None:
    """Add the summary and context cases to the cross-tenant table."""
    @case("summary-list", "get")
    def list_summaries_through_anothers_project(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return a.client.get(S, {"projectId": t["project"], "userId": "u1"})

    @case("summary-list", "get")
    def list_summaries_of_anothers_team_and_agent(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return a.client.get(S, {"teamId": t["team"], "agentId": t["agent"], "userId": "u1",
                                "depth": "sentence,detailed"})

    @case("summary-layer", "get")
    def get_anothers_team_summary(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return a.client.get(f"{S}/team", {"teamId": t["team"], "depth": "sentence"})

    @case("summary-layer", "get")
    def get_anothers_org_summary(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return a.client.get(f"{S}/org", {"orgId": t["org"]})

    @case("summary-layer", "get")
    def get_anothers_agent_summary(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return a.client.get(f"{S}/agent", {"agentId": t["agent"], "userId": "u1",
                                           "depth": "detailed"})

    @case("summary-layer", "get")
    def get_a_user_summary_only_the_other_tenant_has(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return a.client.get(f"{S}/user", {"userId": "u1", "depth": "sentence"})

    @case("summary-layer", "get")
    def get_company_summary_by_anothers_company_id(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return a.client.get(f"{S}/company", {"companyId": t["company"]})

    @case("summary-regenerate", "post")
    def regenerate_anothers_team(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return _without("pendingSince", post(a.client, f"{S}/regenerate", {
            "layer": "team", "identifiers": {"teamId": t["team"]}}))

    @case("summary-regenerate", "post")
    def regenerate_anothers_project(a: Any, t: dict[str, str]) -> Any:
        return _without("pendingSince", post(a.client, f"{S}/regenerate", {
            "layer": "project", "identifiers": {"projectId": t["project"]}}))

    @case("context-assemble", "post")
    def context_through_anothers_project(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return post(a.client, C, {"identifiers": {"projectId": t["project"], "userId": "u1"},
                                  "query": "Globex launches project Falcon"})

    @case("context-assemble", "post")
    def context_of_own_user_and_anothers_team(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return post(a.client, C, {"identifiers": {"userId": "u2", "teamId": t["team"]},
                                  "query": "Falcon note", "budget": 500})

    @case("context-assemble", "post")
    def context_as_markdown_through_anothers_agent(a: Any, t: dict[str, str]) -> Any:
        summarise_b(t)
        return _markdown(a.client.post(
            f"{C}?format=markdown", {"identifiers": {"agentId": t["agent"], "userId": "u2"}},
            format="json"))


def check_own_summaries(b: Any, tokens: dict[str, str], post: Any) -> None:
    """B reaches its own summaries and memories on the routes of the cases above."""
    summarise_b(tokens)
    c = b.client
    listed = c.get(S, {"projectId": tokens["project"], "userId": "u1"}).json()["summaries"]
    assert {"user", "team", "org", "company"} <= {s["layer"] for s in listed}
    team = c.get(f"{S}/team", {"teamId": tokens["team"], "depth": "sentence"}).json()
    assert "Globex" in team["summary"]["content"]
    agent = c.get(f"{S}/agent", {"agentId": tokens["agent"], "userId": "u1"}).json()
    assert agent["summary"]["layer"] == "agent"
    context = post(c, C, {"identifiers": {"projectId": tokens["project"], "userId": "u1"},
                          "query": "Globex launches project Falcon"}).json()
    said = [item["content"] for item in context["summaries"] + context["memories"]]
    assert context["summaries"] and any("Globex" in text for text in said)
    regenerated = post(c, f"{S}/regenerate", {"layer": "team",
                                              "identifiers": {"teamId": tokens["team"]}})
    assert regenerated.status_code == 202, regenerated.content
