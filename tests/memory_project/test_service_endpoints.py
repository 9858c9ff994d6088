"""Health, readiness, the OpenAPI document and Swagger UI, unknown URLs, and the admin."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Permission
from django.core.cache import cache

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
    assert set(data["components"]) == {"database", "redis", "embeddingModel", "llm"}
    for name in ("database", "redis", "embeddingModel"):
        assert data["components"][name]["status"] == "healthy", name
        assert data["components"][name]["latencyMs"] >= 0
    # The tests run without a language model: reported, and not needed to be ready.
    assert data["components"]["llm"]["status"] == "degraded"


def test_it_is_not_ready_when_redis_fails(client, monkeypatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("redis unreachable")

    monkeypatch.setattr(cache, "set", broken)
    response = client.get("/ready")
    assert response.status_code == 503
    components = body(response)["components"]
    assert components["redis"]["status"] == "unhealthy"
    assert components["redis"]["error"] == "ConnectionError"
    assert "redis unreachable" not in response.content.decode()  # the text goes to the log
    assert components["database"]["status"] == "healthy"


def test_ready_runs_the_model_at_most_once_a_minute(client, monkeypatch) -> None:
    from memories.embedding import embedders as embeddings
    from memories.embedding import readiness as embedding_readiness

    monkeypatch.setattr(embedding_readiness, "_model_ok_until", 0.0)
    calls: list[int] = []
    real = embeddings.get_embedder()
    monkeypatch.setattr(real, "encode", lambda texts, _f=real.encode: calls.append(1) or _f(texts))
    for _ in range(5):
        assert client.get("/ready").status_code == 200
    assert len(calls) == 1


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
    assert "swagger" in html.lower()
    # The initializer is a script of its own (no inline script under the CSP).
    init = re.search(r'<script src="(/api/docs/\?script=[^"]*)"', html)
    assert init and "/api/schema/" in client.get(init.group(1).replace("&amp;", "&")
                                                 ).content.decode()


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
