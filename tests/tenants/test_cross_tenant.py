"""Another tenant's object answers exactly like a missing one, on every API endpoint.

Each case is one request made by tenant A that names an object through ``tokens``. It runs
twice: first with tokens that exist nowhere (before tenant B has any data), then with the
tokens of B's real objects. Both answers must have the same status and, once B's ids are
replaced by the missing ones, the same JSON body; B's rows must be unchanged afterwards.
A route of the API without a case here fails ``test_it_has_a_case_for_every_route``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from uuid6 import uuid7

from memories.models import Memory
from tenants.context import tenant_scope
from tenants.models import Tenant
from tests import cross_tenant_agents as agent_cases
from tests import cross_tenant_governance as governance_cases
from tests import cross_tenant_graph as graph_cases
from tests import cross_tenant_summaries as summary_cases
from tests.cross_tenant_harness import (
    SECRET,
    Tokens,
    api_routes,
    normalised,
    populate_a,
    populate_b,
    streamed,
)
from tests.cross_tenant_harness import missing_tokens as harness_missing_tokens
from tests.graph.graph_helpers import graph_env
from tests.helpers import snapshot

# Each test has a graph of its own (writer file, object store, Redis keys): the graph cases
# extract B's memories.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("graph_env")]
__all__ = ["graph_env"]

M = "/api/v1/memories"
Case = Callable[[Any, Tokens], Any]
CASES: dict[tuple[str, str], list[Case]] = defaultdict(list)


def case(route: str, method: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[(route, method)].append(fn)
        return fn
    return register


def post(client: Any, url: str, data: Any) -> Any:
    return client.post(url, data, format="json")


# --- memories ------------------------------------------------------------------------------

@case("memory-detail", "get")
def get_memory(a, t):
    return a.client.get(f"{M}/{t['memory']}")


@case("memory-detail", "get")
def get_memory_with_embedding(a, t):
    return a.client.get(f"{M}/{t['memory']}?includeEmbedding=true")


@case("memory-detail", "patch")
def patch_memory_content(a, t):
    return a.client.patch(f"{M}/{t['memory']}", {"content": "hijacked"}, format="json")


@case("memory-detail", "patch")
def patch_memory_metadata_with_version(a, t):
    return a.client.patch(f"{M}/{t['memory']}", {"metadata": {"x": 1}, "version": 99},
                          format="json")


@case("memory-detail", "patch")
def patch_memory_with_matching_if_match(a, t):
    return a.client.patch(f"{M}/{t['memory']}", {"metadata": {"x": None}}, format="json",
                          headers={"If-Match": '"1"'})


@case("memory-detail", "delete")
def delete_memory(a, t):
    return a.client.delete(f"{M}/{t['memory']}")


@case("memory-batch-get", "post")
def batch_get_memories(a, t):
    return post(a.client, f"{M}/batch-get", {"ids": [t["memory"]], "includeVector": True})


@case("memory-bulk-delete", "post")
def bulk_delete_memories(a, t):
    return post(a.client, f"{M}/bulk-delete", {"ids": [t["memory"], t["memory"]]})


@case("memory-list", "get")
def list_user_memories(a, t):
    return a.client.get(M, {"layer": "user", "userId": "u1"})


@case("memory-list", "get")
def list_company_memories(a, t):
    return a.client.get(M, {"layer": "company"})


@case("memory-list", "get")
def list_team_layer_through_a_project(a, t):
    return a.client.get(M, {"layer": "team", "projectId": t["project"]})


@case("memory-list", "get")
def list_org_layer_through_a_team(a, t):
    return a.client.get(M, {"layer": "org", "teamId": t["team"], "limit": 5})


@case("memory-list", "post")
def add_to_team_layer_through_a_project(a, t):
    return post(a.client, M, {"content": "x", "layer": "team",
                              "identifiers": {"projectId": t["project"]}})


@case("memory-list", "post")
def add_with_another_company_id(a, t):
    return post(a.client, M, {"content": "x", "layer": "company",
                              "identifiers": {"companyId": t["company"]}})


@case("memory-bulk", "post")
def bulk_add_through_a_project(a, t):
    ok = {"content": "fine", "layer": "user", "identifiers": {"userId": "u9"}}
    bad = {"content": "x", "layer": "org", "identifiers": {"projectId": t["project"]}}
    return post(a.client, f"{M}/bulk", {"memories": [ok, bad]})


@case("memory-search", "post")
def search_for_anothers_text(a, t):
    return post(a.client, f"{M}/search", {"query": SECRET, "identifiers": {"userId": "u1"},
                                          "threshold": 0, "limit": 50})


@case("memory-search", "post")
def search_through_a_project(a, t):
    return post(a.client, f"{M}/search", {"query": SECRET, "layers": ["team", "org"],
                                          "identifiers": {"projectId": t["project"]}})


@case("memory-recall", "post")
def recall_anothers_topic(a, t):
    return post(a.client, f"{M}/recall", {"topic": SECRET, "identifiers": {"userId": "u1"}})


@case("tenant-settings", "get")
def get_settings(a, t):
    return a.client.get("/api/v1/settings")


@case("tenant-settings", "patch")
def patch_settings(a, t):
    return a.client.patch("/api/v1/settings", {"search": {"defaultThreshold": 0.55}},
                          format="json")


@case("capabilities", "get")
def get_capabilities(a, t):
    return a.client.get("/api/v1/capabilities")


# --- lifecycle: history, restore, feedback, export, erasure ---------------------------------

def own_memory_id(a: Any) -> str:
    with tenant_scope(a.ctx):
        return str(Memory.objects.order_by("id").values_list("id", flat=True).first())


@case("memory-history", "get")
def get_memory_history(a, t):
    return a.client.get(f"{M}/{t['memory']}/history")


@case("memory-restore", "post")
def restore_memory(a, t):
    return a.client.post(f"{M}/{t['memory']}/restore")


@case("memory-feedback", "post")
def feedback_for_anothers_memory(a, t):
    return post(a.client, f"{M}/feedback", {"memoryIds": [t["memory"]], "reward": -1})


@case("memory-feedback", "post")
def feedback_for_own_and_anothers_memory(a, t):
    return post(a.client, f"{M}/feedback", {"memoryIds": [own_memory_id(a), t["memory"]],
                                            "reward": 1, "query": SECRET})


@case("memory-export", "get")
def export_memories(a, t):
    return streamed(a.client.get("/api/v1/export"))


@case("memory-export", "get")
def export_memories_with_deleted(a, t):
    return streamed(a.client.get("/api/v1/export", {"includeDeleted": "true"}))


@case("memory-list", "delete")
def erase_a_user_both_tenants_have(a, t):
    return a.client.delete(f"{M}?userId=u1")


@case("memory-list", "delete")
def erase_anothers_project(a, t):
    return a.client.delete(f"{M}?projectId={t['project']}")


# --- hierarchy -----------------------------------------------------------------------------

for _kind, _plural in (("org", "orgs"), ("team", "teams"), ("project", "projects")):
    def _get(a, t, _k=_kind, _p=_plural):
        return a.client.get(f"/api/v1/{_p}/{t[_k]}")

    def _delete(a, t, _k=_kind, _p=_plural):
        return a.client.delete(f"/api/v1/{_p}/{t[_k]}")

    def _list(a, t, _p=_plural):
        return a.client.get(f"/api/v1/{_p}")

    case(f"{_kind}-detail", "get")(_get)
    case(f"{_kind}-detail", "delete")(_delete)
    case(f"{_kind}-list", "get")(_list)


@case("org-list", "post")
def create_org_with_a_taken_id(a, t):
    return post(a.client, "/api/v1/orgs", {"orgId": t["org"]})


@case("team-list", "post")
def create_team_under_a_foreign_org(a, t):
    return post(a.client, "/api/v1/teams", {"teamId": "team-new", "orgId": t["org"]})


@case("team-list", "post")
def create_team_with_a_taken_id(a, t):
    return post(a.client, "/api/v1/teams", {"teamId": t["team"], "orgId": "org-of-a"})


@case("project-list", "post")
def create_project_under_a_foreign_team(a, t):
    return post(a.client, "/api/v1/projects", {"projectId": "proj-new", "teamId": t["team"]})


@case("project-list", "post")
def create_project_with_a_taken_id(a, t):
    return post(a.client, "/api/v1/projects", {"projectId": t["project"],
                                               "teamId": "team-of-a"})


governance_cases.register(case, post)
graph_cases.register(case, post)
summary_cases.register(case, post)
agent_cases.register(case, post)


# --- the harness ---------------------------------------------------------------------------

ALL_CASES = [(route, fn) for route, fns in CASES.items() for fn in fns]


@pytest.mark.parametrize(("route", "fn"), ALL_CASES,
                         ids=[f"{r[0]}-{r[1]}-{fn.__name__}" for r, fn in ALL_CASES])
def test_it_answers_a_foreign_object_like_a_missing_one(tenant_a, tenant_b, route, fn) -> None:
    populate_a(tenant_a)
    missing_tokens = harness_missing_tokens()
    missing = fn(tenant_a, missing_tokens)

    tokens = populate_b(tenant_b)
    before_b = snapshot(tenant_b)
    assert len(before_b) == 9
    settings_b = Tenant.objects.get(pk=tenant_b.tenant.pk).settings
    foreign = fn(tenant_a, tokens)

    assert foreign.status_code == missing.status_code, (foreign.content, missing.content)
    assert foreign.status_code < 500
    replace = {tokens[k]: missing_tokens[k] for k in tokens}
    assert normalised(foreign, replace) == normalised(missing, {})
    for header in ("ETag", "WWW-Authenticate", "Content-Type"):
        assert foreign.get(header) == missing.get(header), header
    assert snapshot(tenant_b) == before_b
    assert Tenant.objects.get(pk=tenant_b.tenant.pk).settings == settings_b
    assert SECRET not in foreign.content.decode()


def test_it_sees_foreign_objects_only_when_they_are_its_own(tenant_a, tenant_b) -> None:
    """The cases above are not vacuous: B reaches every one of its objects."""
    tokens = populate_b(tenant_b)
    c = tenant_b.client
    assert c.get(f"{M}/{tokens['memory']}").status_code == 200
    for kind, plural in (("org", "orgs"), ("team", "teams"), ("project", "projects")):
        assert c.get(f"/api/v1/{plural}/{tokens[kind]}").status_code == 200
    listed = c.get(M, {"layer": "team", "projectId": tokens["project"]}).json()
    assert listed["totalCount"] == 1
    assert c.get(M, {"layer": "org", "teamId": tokens["team"]}).json()["totalCount"] == 1
    found = post(c, f"{M}/search", {"query": SECRET, "identifiers": {"userId": "u1"},
                                    "threshold": 0}).json()["results"]
    assert SECRET in [r["memory"]["content"] for r in found]
    recalled = post(c, f"{M}/recall", {"topic": SECRET, "identifiers": {"userId": "u1"}})
    assert SECRET in [r["memory"]["content"] for r in recalled.json()["results"]]
    assert c.get("/api/v1/settings").json()["search"]["defaultThreshold"] == 0.1


def test_it_reaches_its_own_objects_through_the_lifecycle_routes(tenant_a, tenant_b) -> None:
    """The lifecycle cases above are not vacuous either: B reaches its own data with them."""
    tokens = populate_b(tenant_b)
    b = tenant_b
    assert b.client.get(f"{M}/{tokens['memory']}/history").json()["history"][0]["action"] \
        == "add"
    assert post(b.client, f"{M}/feedback", {"memoryIds": [tokens["memory"]],
                                            "reward": -1}).status_code == 200
    assert b.client.post(f"{M}/{tokens['memory']}/restore").json()["restored"] is False
    assert SECRET in streamed(b.client.get("/api/v1/export")).content.decode()
    # user, session and agent memory
    assert b.client.delete(f"{M}?userId=u1").json() == {"erased": 3}


def test_it_reaches_its_own_graph_through_the_graph_routes(tenant_b) -> None:
    """The graph cases are not vacuous: B's graph answers B on the same routes."""
    graph_cases.check_own_graph(tenant_b, populate_b(tenant_b), post)


@pytest.mark.parametrize("method", ["options", "head"])
def test_it_answers_options_and_head_alike_for_foreign_and_missing(tenant_a, tenant_b,
                                                                   method) -> None:
    tokens = populate_b(tenant_b)
    for url in (f"{M}/{{memory}}", "/api/v1/orgs/{org}", "/api/v1/projects/{project}"):
        foreign = getattr(tenant_a.client, method)(url.format(**tokens))
        missing = getattr(tenant_a.client, method)(url.format(
            memory=str(uuid7()), org="org-nobody", project="proj-nobody"))
        assert foreign.status_code == missing.status_code
        assert foreign.status_code < 500
        assert foreign.content == missing.content


def test_it_has_a_case_for_every_route() -> None:
    routes = api_routes()
    assert ("memory-detail", "patch") in routes and len(routes) >= 17
    missing = sorted(routes - set(CASES))
    assert not missing, f"add a cross-tenant case for: {missing}"
    stale = sorted(set(CASES) - routes)
    assert not stale, f"cases for routes that no longer exist: {stale}"
