"""API keys restricted to layers and identifiers: every memory route sees only what the key
may touch (outside rows answer like missing ones), writes outside are refused, and a
restricted key cannot create a wider key."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memory_project.errors import InvalidInput, Unauthorized
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tests.conftest import TenantFixture
from tests.helpers import assert_error, memory_row

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"


def restricted_client(tenant: TenantFixture, **restriction: Any) -> APIClient:
    with tenant_scope(tenant.ctx):
        _, raw = tenant_services.api_key_create(tenant.ctx, name="restricted", **restriction)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def world(tenant_a: TenantFixture) -> dict[str, Any]:
    """u1's and u2's user memories, a project memory and a company memory, plus a client
    whose key may only touch layer user with userId=u1."""
    with tenant_scope(tenant_a.ctx):
        tenant_services.project_create(tenant_a.ctx, external_id="p1")
    return {
        "mine": tenant_a.add("u1 likes green tea", "user", identifiers={"userId": "u1"}),
        "other": tenant_a.add("u2 likes green tea too", "user", identifiers={"userId": "u2"}),
        "project": tenant_a.add("project p1 uses green tea", "project",
                                identifiers={"projectId": "p1"}),
        "company": tenant_a.add("the company serves green tea", "company",
                                identifiers={"companyId": tenant_a.tenant.slug}),
        "tenant": tenant_a,
        "client": restricted_client(tenant_a, allowed_layers=["user"],
                                    pinned_identifiers={"userId": "u1"}),
    }


def test_get_update_delete_reach_only_the_keys_rows(world: dict[str, Any]) -> None:
    client = world["client"]
    assert client.get(f"{M}/{world['mine'].pk}").status_code == 200
    for name in ("other", "project", "company"):
        memory_id = world[name].pk
        missing = "0190a000-0000-7000-8000-000000000000"
        for path in (f"{M}/{memory_id}", f"{M}/{missing}"):
            assert_error(client.get(path), 404)
        assert_error(client.patch(f"{M}/{memory_id}", {"content": "changed"}, format="json"),
                     404)
        for query in ("", "?hard=true"):  # delete is idempotent: as for a missing id
            deleted = client.delete(f"{M}/{memory_id}{query}")
            as_missing = client.delete(f"{M}/{missing}{query}")
            assert (deleted.status_code, deleted.json()) == (
                as_missing.status_code, as_missing.json())
        assert_error(client.get(f"{M}/{memory_id}/history"), 404)
        assert_error(client.post(f"{M}/feedback", {"memoryIds": [str(memory_id)],
                                                   "reward": -1.0}, format="json"), 404)
        row = memory_row(world["tenant"], memory_id)
        assert row is not None and row["state"] == "active" and row["content"] == world[
            name].content, "a restricted key changed a row outside its restriction"
    response = client.patch(f"{M}/{world['mine'].pk}", {"content": "u1 likes black tea"},
                            format="json")
    assert response.status_code == 200, response.content
    assert client.delete(f"{M}/{world['mine'].pk}").status_code in (200, 204)


def test_writes_outside_the_restriction_are_refused(world: dict[str, Any]) -> None:
    client = world["client"]
    ok = client.post(M, {"content": "u1 note", "layer": "user",
                         "identifiers": {"userId": "u1"}}, format="json")
    assert ok.status_code == 201
    filled = client.post(M, {"content": "no identifiers given", "layer": "user"}, format="json")
    assert filled.status_code == 201, filled.content
    assert filled.json()["memory"]["identifiers"]["userId"] == "u1"
    assert_error(client.post(M, {"content": "u2 note", "layer": "user",
                                 "identifiers": {"userId": "u2"}}, format="json"),
                 403, "UNAUTHORIZED")
    assert_error(client.post(M, {"content": "project note", "layer": "project",
                                 "identifiers": {"projectId": "p1"}}, format="json"),
                 403, "UNAUTHORIZED")


def test_list_search_and_recall_see_only_the_keys_rows(world: dict[str, Any]) -> None:
    client = world["client"]
    listed = client.get(M, {"layer": "user", "userId": "u1"})
    assert [m["id"] for m in listed.json()["memories"]] == [str(world["mine"].pk)]
    assert listed.json()["totalCount"] == 1
    assert_error(client.get(M, {"layer": "user", "userId": "u2"}), 403, "UNAUTHORIZED")
    assert_error(client.get(M, {"layer": "company"}), 403, "UNAUTHORIZED")

    searched = client.post(f"{M}/search", {"query": "green tea", "threshold": 0.0,
                                           "identifiers": {"projectId": "p1"}}, format="json")
    assert searched.status_code == 200, searched.content
    ids = {r["memory"]["id"] for r in searched.json()["results"]}
    assert ids == {str(world["mine"].pk)}
    assert searched.json()["searchedLayers"] == ["user"]
    assert_error(client.post(f"{M}/search", {"query": "tea", "layers": ["company"]},
                             format="json"), 403, "UNAUTHORIZED")
    assert_error(client.post(f"{M}/search", {"query": "tea", "identifiers": {"userId": "u2"}},
                             format="json"), 403, "UNAUTHORIZED")

    recalled = client.post(f"{M}/recall", {"topic": "green tea"}, format="json")
    assert recalled.status_code == 200, recalled.content
    ids = {r["memory"]["id"] for r in recalled.json()["results"]}
    assert ids == {str(world["mine"].pk)}


def test_an_unrestricted_key_still_sees_everything(world: dict[str, Any],
                                                   tenant_a: TenantFixture) -> None:
    searched = tenant_a.client.post(
        f"{M}/search", {"query": "green tea", "threshold": 0.0,
                        "identifiers": {"userId": "u1", "projectId": "p1"}}, format="json")
    ids = {r["memory"]["id"] for r in searched.json()["results"]}
    assert {str(world["mine"].pk), str(world["project"].pk), str(world["company"].pk)} <= ids


def test_a_pin_without_a_layer_list_reaches_u1s_layers_and_the_shared_ones(
        world: dict[str, Any], tenant_a: TenantFixture) -> None:
    client = restricted_client(tenant_a, pinned_identifiers={"userId": "u1"})
    assert client.get(f"{M}/{world['mine'].pk}").status_code == 200
    assert client.get(f"{M}/{world['company'].pk}").status_code == 200
    assert_error(client.get(f"{M}/{world['other'].pk}"), 404)


def test_a_restricted_key_cannot_create_a_wider_key(tenant_a: TenantFixture) -> None:
    with tenant_scope(tenant_a.ctx):
        _key, raw = tenant_services.api_key_create(
            tenant_a.ctx, allowed_layers=["user", "session"], pinned_identifiers={"userId": "u1"})
        creator = tenant_services.api_key_authenticate(raw)
    assert creator.allowed_layers == {"user", "session"}
    assert creator.pinned_identifiers == (("userId", "u1"),)
    with tenant_scope(creator):
        with pytest.raises(Unauthorized):
            tenant_services.api_key_create(creator, allowed_layers=["company"])
        with pytest.raises(Unauthorized):
            tenant_services.api_key_create(creator, pinned_identifiers={"userId": "u2"})
        inherited, _ = tenant_services.api_key_create(creator)
        narrower, _ = tenant_services.api_key_create(
            creator, allowed_layers=["session"],
            pinned_identifiers={"userId": "u1", "sessionId": "s1"})
    assert sorted(inherited.allowed_layers) == ["session", "user"]
    assert inherited.pinned_identifiers == {"userId": "u1"}
    assert narrower.allowed_layers == ["session"]
    assert narrower.pinned_identifiers == {"userId": "u1", "sessionId": "s1"}


def test_restrictions_are_validated(tenant_a: TenantFixture) -> None:
    with tenant_scope(tenant_a.ctx):
        with pytest.raises(InvalidInput):
            tenant_services.api_key_create(tenant_a.ctx, allowed_layers=["galaxy"])
        with pytest.raises(InvalidInput):
            tenant_services.api_key_create(tenant_a.ctx, pinned_identifiers={"planetId": "x"})
        with pytest.raises(InvalidInput):
            tenant_services.api_key_create(tenant_a.ctx, pinned_identifiers={"userId": " "})


def test_the_command_creates_a_restricted_key(tenant_a: TenantFixture) -> None:
    out = StringIO()
    call_command("create_api_key", tenant_a.tenant.slug, "--layer", "user",
                 "--identifier", "userId=u1", "--rate-limit", "100", stdout=out)
    raw = out.getvalue().strip().rsplit(" ", 1)[-1]
    with tenant_scope(tenant_a.ctx):
        ctx = tenant_services.api_key_authenticate(raw)
    assert ctx.allowed_layers == {"user"}
    assert dict(ctx.pinned_identifiers) == {"userId": "u1"}
    assert ctx.rate_limit == 100
    with pytest.raises(CommandError):
        call_command("create_api_key", tenant_a.tenant.slug, "--identifier", "userId")
    with pytest.raises(CommandError):
        call_command("create_api_key", tenant_a.tenant.slug, "--layer", "galaxy")


def test_another_tenant_cannot_use_the_pins_to_reach_rows(world: dict[str, Any],
                                                         tenant_b: TenantFixture) -> None:
    client = restricted_client(tenant_b, allowed_layers=["user"],
                               pinned_identifiers={"userId": "u1"})
    assert_error(client.get(f"{M}/{world['mine'].pk}"), 404)
    listed = client.get(M, {"layer": "user"})
    assert listed.json()["memories"] == []
