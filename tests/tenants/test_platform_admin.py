"""Platform staff's cross-tenant views (the Django admin and the tenant commands) run on the
platform role's own connection (``tenants.routers``), which sees only committed rows: these
tests commit their data (transactional), unlike the rest of the suite."""

from __future__ import annotations

import hashlib
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from tenants.context import dangerously_cross_tenant, tenant_scope
from tenants.models import ApiKey, Tenant
from tests.helpers import assert_error, body
from tests.jobs.test_jobs_outbox import broker_down, enqueue, queue  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True,
                                   databases=["default", "owner", "platform"])

KEY_RE = re.compile(r"msk_[A-Za-z0-9_\-]{40,}")
LIST_URL = "/api/v1/memories?layer=user&userId=u1"


@pytest.fixture(autouse=True)
def _owner_flushes(owner_flushes: None) -> None:
    """Committed rows are emptied by the owner role after each test."""


@pytest.fixture
def superuser(client: Any, django_user_model: Any) -> Any:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-x-123")
    client.force_login(user)
    return client


def client_with(**credentials: str) -> APIClient:
    api = APIClient()
    api.credentials(**credentials)
    return api


def test_platform_staff_deactivate_a_tenant_and_its_keys_stop_working(tenant_a: Any) -> None:
    assert tenant_a.client.get(LIST_URL).status_code == 200  # the key is cached now
    with dangerously_cross_tenant("test"):
        Tenant.objects.filter(pk=tenant_a.tenant.pk).update(is_active=False)
    assert_error(tenant_a.client.get(LIST_URL), 401, "INVALID_TENANT_CONTEXT")


def test_it_shows_platform_staff_every_tenants_memories(superuser, tenant_a, tenant_b) -> None:
    tenant_a.add("Acme admin-visible fact")
    tenant_b.add("Globex admin-visible fact", "project", identifiers={"projectId": "p1"})
    response = superuser.get("/admin/memories/memory/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Acme admin-visible fact" in html and "Globex admin-visible fact" in html

    filtered = superuser.get("/admin/memories/memory/", {"layer__exact": "project"}).content
    assert b"Globex admin-visible fact" in filtered
    assert b"Acme admin-visible fact" not in filtered


def test_it_opens_a_memory_of_any_tenant_read_only(superuser, tenant_b) -> None:
    memory = tenant_b.add("Globex detail fact")
    response = superuser.get(f"/admin/memories/memory/{memory.pk}/change/")
    assert response.status_code == 200
    assert b"Globex detail fact" in response.content
    assert superuser.get("/admin/memories/memory/add/").status_code == 403


def test_it_shows_a_new_api_key_once_and_stores_only_its_hash(superuser, tenant_a) -> None:
    response = superuser.post(
        "/admin/tenants/apikey/add/",
        {"tenant": str(tenant_a.tenant.pk), "name": "from admin",
         "expires_at_0": "", "expires_at_1": ""},
        follow=True,
    )
    assert response.status_code == 200
    messages = [str(m) for m in response.context["messages"]]
    keys = [k for m in messages for k in KEY_RE.findall(m)]
    assert len(keys) == 1, messages
    raw = keys[0]
    assert any(raw[:12] in m and "added successfully" in m for m in messages), messages

    with tenant_scope(tenant_a.ctx):
        key = ApiKey.objects.get(name="from admin")
    assert key.prefix == raw[:12]
    assert key.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert key.created_by.endswith("admin:root")
    assert all(raw not in str(getattr(key, f.attname)) for f in ApiKey._meta.fields)

    # the key works, and the changelist never shows it again
    api = APIClient()
    api.credentials(HTTP_X_API_KEY=raw)
    assert api.get("/api/v1/orgs").status_code == 200
    assert raw.encode() not in superuser.get("/admin/tenants/apikey/").content
    assert raw.encode() not in superuser.get(f"/admin/tenants/apikey/{key.pk}/change/").content


def test_it_revokes_keys_from_the_admin(superuser, tenant_a) -> None:
    with tenant_scope(tenant_a.ctx):
        key = ApiKey.objects.get()
    response = superuser.post("/admin/tenants/apikey/", {
        "action": "revoke", "_selected_action": [str(key.pk)]}, follow=True)
    assert response.status_code == 200
    with dangerously_cross_tenant("test"):
        assert ApiKey.objects.dangerously_all_tenants().get(pk=key.pk).revoked_at is not None
    assert_error(tenant_a.client.get("/api/v1/orgs"), 401, "INVALID_TENANT_CONTEXT")


def test_it_shows_platform_staff_the_history_read_only(client, django_user_model, tenant_a,
                                                       tenant_b) -> None:
    mine, theirs = tenant_a.add("Acme note"), tenant_b.add("Globex note")
    client.force_login(django_user_model.objects.create_superuser("root", "r@x.io", "pw-9x"))
    html = client.get("/admin/memories/memoryhistory/").content.decode()
    assert str(mine.pk) in html and str(theirs.pk) in html
    assert client.get("/admin/memories/memoryhistory/add/").status_code == 403
    assert client.get("/admin/memories/memoryfeedback/").status_code == 200


def test_it_creates_a_tenant_with_a_working_key_from_the_command() -> None:
    out = StringIO()
    call_command("create_tenant", "Initech Corp", stdout=out)
    tenant = Tenant.objects.get(slug="initech-corp")
    keys = KEY_RE.findall(out.getvalue())
    assert len(keys) == 1, out.getvalue()
    client = client_with(HTTP_AUTHORIZATION=f"Bearer {keys[0]}")
    response = client.post(
        "/api/v1/memories",
        {"content": "Initech uses TPS reports", "layer": "company"},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert body(response)["memory"]["identifiers"] == {"companyId": "initech-corp"}
    with dangerously_cross_tenant("test"):
        key = ApiKey.objects.dangerously_all_tenants().get(prefix=keys[0][:12])
    assert key.tenant_id == tenant.id


def test_platform_staff_see_queued_jobs_read_only(
        client: Any, django_user_model: Any, tenant_a: Any, tenant_b: Any,
        queue: str,  # noqa: F811 (the fixture imported above)
        broker_down: None,  # noqa: F811
        django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        jobs = [enqueue(tenant, queue) for tenant in (tenant_a, tenant_b)]
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com",
                                                                  "pw-x-123"))
    listing = client.get("/admin/jobs/queuedjob/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert all(str(job.pk) in html for job in jobs)
    assert client.get("/admin/jobs/queuedjob/add/").status_code == 403
    page = client.get(f"/admin/jobs/queuedjob/{jobs[0].pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content

