"""Platform admins manage tenants from the console: the tenant list with counts read across
tenants, creating a tenant with its first admin key (shown once), deactivating and
reactivating one. Nobody else may."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tenants.context import tenant_scope
from tenants.models import AuditEntry, Tenant
from tests.console_helpers import console_user, platform_admin

# Counts and activation go through the platform connection: they see committed rows only.
pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner", "platform"])


@pytest.fixture(autouse=True)
def _owner_flushes(owner_flushes: None) -> None:
    """Transactional tests: the owner role empties the tables afterwards."""


@pytest.fixture
def root() -> Client:
    client = Client()
    client.force_login(platform_admin())
    return client


def test_the_tenant_list_counts_each_tenants_memories(root: Client, tenant_a: Any,
                                                      tenant_b: Any) -> None:
    tenant_a.add("Acme note one")
    tenant_a.add("Acme note two")
    tenant_b.add("Globex note")
    page = root.get("/console/")
    assert page.status_code == 200
    text = page.content.decode()
    row_a = re.search(rf'<tr id="tenant-{tenant_a.tenant.slug}">(.*?)</tr>', text, re.S)
    row_b = re.search(rf'<tr id="tenant-{tenant_b.tenant.slug}">(.*?)</tr>', text, re.S)
    assert row_a and '<td class="memories">2</td>' in row_a.group(1)
    assert row_b and '<td class="memories">1</td>' in row_b.group(1)


def test_a_platform_admin_creates_a_tenant_whose_key_works_and_is_shown_once(
        root: Client) -> None:
    created = root.post("/console/tenants/new/", {"name": "Initech", "slug": "initech"})
    assert created.status_code == 302
    shown = root.get("/console/")
    key = re.search(r'<pre id="new-tenant-key">(msk_[^<]+)</pre>', shown.content.decode())
    assert key is not None
    assert key.group(1) not in root.get("/console/").content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key.group(1)}")
    assert api.get("/api/v1/settings").status_code == 200
    duplicate = root.post("/console/tenants/new/", {"name": "Initech", "slug": "initech"},
                          follow=True)
    assert "exists" in duplicate.content.decode()
    assert Tenant.objects.filter(slug="initech").count() == 1


def test_deactivating_stops_the_tenants_keys_and_is_audited(root: Client,
                                                            tenant_a: Any) -> None:
    slug = tenant_a.tenant.slug
    assert root.post(f"/console/tenants/{slug}/active/", {"active": "off"}).status_code == 302
    assert tenant_a.client.get("/api/v1/settings").status_code == 401
    assert root.post(f"/console/tenants/{slug}/active/", {"active": "on"}).status_code == 302
    assert tenant_a.client.get("/api/v1/settings").status_code == 200
    with tenant_scope(tenant_a.ctx):
        actions = list(AuditEntry.objects.filter(target_type="tenant")
                       .order_by("created_at").values_list("action", "actor"))
    assert actions == [("tenant_deactivated", "system:console:root"),
                       ("tenant_activated", "system:console:root")]
    assert root.post("/console/tenants/no-such/active/", {"active": "off"}).status_code == 404


def test_only_platform_admins_may_manage_tenants(tenant_a: Any) -> None:
    client = Client()
    client.force_login(console_user(tenant_a, "alice", "admin"))
    assert client.post("/console/tenants/new/", {"name": "Evil"}).status_code == 403
    assert client.post(f"/console/tenants/{tenant_a.tenant.slug}/active/",
                       {"active": "off"}).status_code == 403
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).is_active
    assert not Tenant.objects.filter(name="Evil").exists()
