"""Console roles and tenant isolation, page by page: another tenant's page or object answers
exactly like a missing one (404) and changes nothing; reviewers see only the review queue."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from governance.models import Policy, ReviewItem, ReviewStatus
from memories.models import Memory, State
from tenants.context import tenant_scope
from tenants.models import ApiKey
from tests.console_helpers import (
    MISSING,
    audit_actions,
    console_user,
    platform_admin,
    policy,
    policy_hit,
)

pytestmark = pytest.mark.django_db


class World:
    """Tenants A and B, each with a memory, a policy, a review item and an API key."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b
        self.objects: dict[str, dict[str, Any]] = {}
        for name, tenant in (("a", a), ("b", b)):
            pol = policy(tenant)
            item = policy_hit(tenant)
            memory = tenant.add(f"{name} keeps the rota on Mondays")
            with tenant_scope(tenant.ctx):
                key = ApiKey.objects.order_by("created_at").first()
            self.objects[name] = {"memory": memory.pk, "policy": pol.pk, "item": item.pk,
                                  "key": key.pk, "slug": tenant.tenant.slug}


@pytest.fixture
def world(tenant_a: Any, tenant_b: Any) -> World:
    return World(tenant_a, tenant_b)


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def without_csrf(response: Any) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode())


def pages(slug: str, objs: dict[str, Any]) -> list[str]:
    """Every GET page of a tenant, with ``objs`` naming the objects to open."""
    base = f"/console/t/{slug}"
    return [f"{base}/", f"{base}/memories/", f"{base}/memories/{objs['memory']}/",
            f"{base}/policies/", f"{base}/policies/new/", f"{base}/policies/{objs['policy']}/",
            f"{base}/reviews/", f"{base}/reviews/{objs['item']}/", f"{base}/settings/",
            f"{base}/llm/", f"{base}/audit/", f"{base}/audit/?export=csv"]


def posts(slug: str, objs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every POST action of a tenant on the objects ``objs``."""
    base = f"/console/t/{slug}"
    memory = f"{base}/memories/{objs['memory']}"
    return [
        (f"{memory}/edit/", {"metadata": '{"x": 1}', "kind": "fact", "scope": "global",
                             "importance": "0.5", "confidence": "1", "version": "1"}),
        (f"{memory}/archive/", {}), (f"{memory}/delete/", {}), (f"{memory}/restore/", {}),
        (f"{base}/policies/{objs['policy']}/", {"name": "taken over", "pii_handling": "allow",
                                                 "sample_layer": "user", "action": "save"}),
        (f"{base}/policies/{objs['policy']}/delete/", {}),
        (f"{base}/reviews/decide/", {"items": [str(objs["item"])], "decision": "approve"}),
        (f"{base}/reviews/decide/", {"single": f"{objs['item']}:reject", "reason": "no"}),
        (f"{base}/settings/keys/{objs['key']}/revoke/", {}),
    ]


def state(world: World, name: str) -> tuple[Any, ...]:
    """What the POST actions could change in tenant ``name``."""
    tenant, objs = (world.a if name == "a" else world.b), world.objects[name]
    with tenant_scope(tenant.ctx):
        memory = Memory.objects.get(pk=objs["memory"])
        return (memory.state, memory.metadata, memory.version,
                sorted(Policy.objects.values_list("name", flat=True)),
                ReviewItem.objects.get(pk=objs["item"]).status,
                ApiKey.objects.get(pk=objs["key"]).revoked_at)


def test_it_answers_404_for_every_page_of_another_tenant(world: World) -> None:
    client = client_for(console_user(world.a, "alice", "admin"))
    for url in pages(world.objects["a"]["slug"], world.objects["a"]):
        assert client.get(url).status_code == 200, url
    for url in pages(world.objects["b"]["slug"], world.objects["b"]):
        response = client.get(url)
        assert response.status_code == 404, url
        assert world.b.tenant.name not in response.content.decode(), url
    for url in pages("no-such-tenant", world.objects["b"]):
        assert client.get(url).status_code == 404, url


def test_another_tenants_object_under_my_tenant_answers_like_a_missing_one(world: World
                                                                            ) -> None:
    client = client_for(console_user(world.a, "alice", "admin"))
    slug = world.objects["a"]["slug"]
    foreign = world.objects["b"]
    missing = {k: MISSING for k in ("memory", "policy", "item", "key")}
    for url_foreign, url_missing in zip(pages(slug, foreign), pages(slug, missing),
                                        strict=True):
        if url_foreign == url_missing:  # list pages name no object
            continue
        got_foreign, got_missing = client.get(url_foreign), client.get(url_missing)
        assert got_foreign.status_code == got_missing.status_code == 404, url_foreign
        assert without_csrf(got_foreign) == without_csrf(got_missing), url_foreign
    # The probe goes to the platform's security log, never to the prober's audit log
    # (tests/tenants/test_platform_role.py).
    assert not [a for a in audit_actions(world.a) if a[0] == "cross_tenant_access_attempt"]


def test_no_post_action_reaches_another_tenants_object(world: World) -> None:
    client = client_for(console_user(world.a, "alice", "admin"))
    before = state(world, "b")
    for slug, objs in ((world.objects["a"]["slug"], world.objects["b"]),
                       (world.objects["b"]["slug"], world.objects["b"]),
                       (world.objects["a"]["slug"], {k: MISSING for k in world.objects["b"]})):
        for url, data in posts(slug, objs):
            assert client.post(url, data).status_code == 404, url
    assert state(world, "b") == before


def test_a_reviewer_sees_only_the_review_queue(world: World) -> None:
    client = client_for(console_user(world.a, "rita", "reviewer"))
    slug, objs = world.objects["a"]["slug"], world.objects["a"]
    for url in pages(slug, objs):
        expected = 200 if "/reviews/" in url else 403
        assert client.get(url).status_code == expected, url
    for url, data in posts(slug, objs):
        if "/reviews/" not in url:
            assert client.post(url, data).status_code == 403, url
    for url in pages(world.objects["b"]["slug"], world.objects["b"]):
        assert client.get(url).status_code == 404, url
    landing = client.get("/console/")
    assert landing.status_code == 302
    assert landing["Location"] == f"/console/t/{slug}/reviews/"


def test_a_tenant_admin_lands_on_the_dashboard_and_a_stranger_nowhere(world: World) -> None:
    from django.contrib.auth import get_user_model

    landing = client_for(console_user(world.a, "alice", "admin")).get("/console/")
    assert landing["Location"] == f"/console/t/{world.objects['a']['slug']}/"
    stranger = get_user_model().objects.create_user("sam", "", "pw-sam-123456")
    assert client_for(stranger).get("/console/").status_code == 403
    for url in pages(world.objects["a"]["slug"], world.objects["a"]):
        assert client_for(stranger).get(url).status_code == 404, url


def test_signed_out_visitors_are_sent_to_the_login_page(world: World) -> None:
    client = Client()
    for url in ["/console/", *pages(world.objects["a"]["slug"], world.objects["a"])]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/console/login/"), url
    for url, data in posts(world.objects["a"]["slug"], world.objects["a"]):
        assert client.post(url, data).status_code == 302, url
    assert state(world, "a")[0] == State.ACTIVE


@pytest.mark.django_db(databases=["default", "owner", "platform"])  # the tenant list's counts
def test_a_platform_admin_opens_every_tenant(world: World) -> None:
    client = client_for(platform_admin())
    index = client.get("/console/")
    assert index.status_code == 200
    assert world.a.tenant.name in index.content.decode()
    assert world.b.tenant.name in index.content.decode()
    for name in ("a", "b"):
        for url in pages(world.objects[name]["slug"], world.objects[name]):
            assert client.get(url).status_code == 200, url


def test_a_platform_admin_still_works_inside_one_tenant_at_a_time(world: World) -> None:
    client = client_for(platform_admin())
    foreign_memory = world.objects["b"]["memory"]
    response = client.get(f"/console/t/{world.objects['a']['slug']}/memories/{foreign_memory}/")
    assert response.status_code == 404
    response = client.post(f"/console/t/{world.objects['a']['slug']}/reviews/decide/",
                           {"items": [str(world.objects["b"]["item"])], "decision": "approve"})
    assert response.status_code == 404
    with tenant_scope(world.b.ctx):
        assert ReviewItem.objects.get(pk=world.objects["b"]["item"]).status == \
            ReviewStatus.PENDING
