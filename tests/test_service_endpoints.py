"""Health, readiness, the OpenAPI document and Swagger UI, unknown URLs, and the admin."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Permission
from django.core.cache import cache
from rest_framework.test import APIClient

from tenants.context import dangerously_cross_tenant, tenant_scope
from tenants.models import ApiKey
from tests.helpers import assert_error, body

pytestmark = pytest.mark.django_db

KEY_RE = re.compile(r"msk_[A-Za-z0-9_\-]{40,}")


# --- health and readiness -------------------------------------------------------------------

def test_it_answers_health_without_touching_anything(client, django_assert_num_queries) -> None:
    with django_assert_num_queries(0):
        response = client.get("/health")
    assert response.status_code == 200
    assert body(response) == {"status": "ok"}


def test_it_is_ready_when_database_redis_and_model_work(client) -> None:
    response = client.get("/ready")
    assert response.status_code == 200, response.content
    data = body(response)
    assert data["status"] == "ready"
    assert set(data["components"]) == {"database", "redis", "embeddingModel"}
    for name, component in data["components"].items():
        assert component["status"] == "healthy", name
        assert component["latencyMs"] >= 0


def test_it_is_not_ready_when_redis_fails(client, monkeypatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("redis unreachable")

    monkeypatch.setattr(cache, "set", broken)
    response = client.get("/ready")
    assert response.status_code == 503
    components = body(response)["components"]
    assert components["redis"]["status"] == "unhealthy"
    assert "redis unreachable" in components["redis"]["message"]
    assert components["database"]["status"] == "healthy"


# --- OpenAPI and docs -----------------------------------------------------------------------

def test_it_serves_an_openapi_3_document_of_the_api(client) -> None:
    response = client.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert str(schema["openapi"]).startswith("3.")
    assert schema["info"]["title"] == "Memory service API"
    paths = schema["paths"]
    assert {"/api/v1/memories", "/api/v1/memories/{id}", "/api/v1/memories/bulk",
            "/api/v1/memories/bulk-delete", "/api/v1/orgs", "/api/v1/teams",
            "/api/v1/projects"} <= set(paths)
    assert {"get", "post"} <= set(paths["/api/v1/memories"])
    assert {"get", "patch", "delete"} <= set(paths["/api/v1/memories/{id}"])


def test_it_declares_both_api_key_headers_in_the_schema(client) -> None:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schema = json.loads(response.content)
    schemes = schema["components"]["securitySchemes"]
    assert {"type": "http", "scheme": "bearer"}.items() <= schemes["BearerApiKey"].items()
    assert schemes["HeaderApiKey"]["name"] == "X-API-Key"
    post = schema["paths"]["/api/v1/memories"]["post"]
    assert post["security"] == [{"BearerApiKey": []}, {"HeaderApiKey": []}]


def test_it_serves_swagger_ui(client) -> None:
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "swagger" in html.lower() and "/api/schema/" in html


@pytest.mark.parametrize("url", ["/api/v1/nope", "/api/v1/memories/", "/api/v2/memories",
                                 "/nope", "/api/v1/orgs/a/b"])
def test_it_answers_unknown_urls_with_the_envelope(client, url: str) -> None:
    error = assert_error(client.get(url), 404, "NOT_FOUND")
    assert error["retryable"] is False


# --- admin ----------------------------------------------------------------------------------

@pytest.fixture
def superuser(client, django_user_model) -> Any:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-x-123")
    client.force_login(user)
    return client


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


def test_it_keeps_staff_without_superuser_out_of_tenant_data(client, django_user_model,
                                                             tenant_a) -> None:
    tenant_a.add("Not for ordinary staff")
    user = django_user_model.objects.create_user("staff", password="pw-x-123", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(
        content_type__app_label__in=["memories", "tenants"]))
    client.force_login(user)
    for url in ("/admin/memories/memory/", "/admin/tenants/apikey/",
                "/admin/tenants/organization/"):
        response = client.get(url)
        assert response.status_code == 403, url
        assert b"Not for ordinary staff" not in response.content
    index = client.get("/admin/").content.decode()
    assert "/admin/memories/memory/" not in index


def test_it_sends_anonymous_visitors_to_the_login_page(client) -> None:
    response = client.get("/admin/memories/memory/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
