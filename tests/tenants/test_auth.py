"""API keys: how a request gets its tenant, and why a bad key never gets one."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.models import ApiKey
from tests.helpers import assert_error, body

pytestmark = pytest.mark.django_db

LIST_URL = "/api/v1/memories?layer=user&userId=u1"
KEY_RE = re.compile(r"msk_[A-Za-z0-9_\-]{40,}")  # the full key, not the 12-char prefix


def client_with(**credentials: str) -> APIClient:
    client = APIClient()
    client.credentials(**credentials)
    return client


def new_key(tenant, **kwargs) -> tuple[ApiKey, str]:
    with tenant_scope(tenant.ctx):
        return tenant_services.api_key_create(tenant.ctx, **kwargs)


def test_it_answers_missing_tenant_context_without_a_key(anon) -> None:
    for url in (LIST_URL, "/api/v1/orgs", "/api/v1/memories/bulk"):
        response = anon.get(url) if "bulk" not in url else anon.post(url, {}, format="json")
        error = assert_error(response, 401, "MISSING_TENANT_CONTEXT")
        assert error["retryable"] is False
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_treats_an_empty_bearer_or_another_scheme_as_no_key() -> None:
    for header in ("Bearer ", "Bearer", "Basic dXNlcjpwYXNz"):
        response = client_with(HTTP_AUTHORIZATION=header).get(LIST_URL)
        assert_error(response, 401, "MISSING_TENANT_CONTEXT")


@pytest.mark.parametrize(
    "raw_key",
    [
        "msk_unknownkey0000000000000000000000000000000000000",  # well-formed, unknown
        "not-a-key",
        "msk_",
        "msk_abc",
        "x" * 300,
    ],
)
def test_it_rejects_unknown_and_malformed_keys(tenant_a, raw_key: str) -> None:
    for credentials in ({"HTTP_AUTHORIZATION": f"Bearer {raw_key}"},
                        {"HTTP_X_API_KEY": raw_key}):
        response = client_with(**credentials).get(LIST_URL)
        error = assert_error(response, 401, "INVALID_TENANT_CONTEXT")
        assert error["retryable"] is False


def test_it_rejects_a_real_prefix_with_a_wrong_secret(tenant_a) -> None:
    forged = tenant_a.key[:12] + "A" * (len(tenant_a.key) - 12)
    assert forged != tenant_a.key
    response = client_with(HTTP_AUTHORIZATION=f"Bearer {forged}").get(LIST_URL)
    assert_error(response, 401, "INVALID_TENANT_CONTEXT")


def test_it_rejects_a_revoked_key(tenant_a) -> None:
    key, raw = new_key(tenant_a, name="to revoke")
    client = client_with(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get(LIST_URL).status_code == 200
    with tenant_scope(tenant_a.ctx):
        tenant_services.api_key_revoke(tenant_a.ctx, key_id=key.id)
    assert_error(client.get(LIST_URL), 401, "INVALID_TENANT_CONTEXT")
    # The tenant's other key keeps working.
    assert tenant_a.client.get(LIST_URL).status_code == 200


def test_it_rejects_an_expired_key_and_accepts_one_expiring_later(tenant_a) -> None:
    _, expired = new_key(tenant_a, expires_at=timezone.now() - timedelta(seconds=1))
    _, valid = new_key(tenant_a, expires_at=timezone.now() + timedelta(hours=1))
    assert_error(client_with(HTTP_X_API_KEY=expired).get(LIST_URL), 401,
                 "INVALID_TENANT_CONTEXT")
    assert client_with(HTTP_X_API_KEY=valid).get(LIST_URL).status_code == 200


def test_it_accepts_bearer_and_x_api_key_for_the_same_tenant(tenant_a) -> None:
    tenant_a.add("Acme keeps its memories", identifiers={"userId": "u1"})
    for credentials in ({"HTTP_AUTHORIZATION": f"Bearer {tenant_a.key}"},
                        {"HTTP_AUTHORIZATION": f"bearer   {tenant_a.key}  "},
                        {"HTTP_X_API_KEY": tenant_a.key}):
        response = client_with(**credentials).get(LIST_URL)
        assert response.status_code == 200, credentials
        assert [m["content"] for m in body(response)["memories"]] == [
            "Acme keeps its memories"
        ]


def test_it_sees_the_key_tenant_only(tenant_a, tenant_b) -> None:
    tenant_a.add("Acme only")
    tenant_b.add("Globex only")
    assert [m["content"] for m in body(tenant_b.client.get(LIST_URL))["memories"]] == [
        "Globex only"
    ]


def test_it_sets_last_used_at_on_use(tenant_a) -> None:
    key, raw = new_key(tenant_a)
    assert key.last_used_at is None
    before = timezone.now()
    assert client_with(HTTP_X_API_KEY=raw).get(LIST_URL).status_code == 200
    with tenant_scope(tenant_a.ctx):
        used = ApiKey.objects.get(pk=key.pk).last_used_at
    assert used is not None and before <= used <= timezone.now()


def test_a_process_records_a_key_s_use_once_a_minute(tenant_a) -> None:
    key, raw = new_key(tenant_a)
    client = client_with(HTTP_X_API_KEY=raw)
    assert client.get(LIST_URL).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        assert client.get(LIST_URL).status_code == 200
    assert not [q for q in captured.captured_queries if "last_used_at" in q["sql"]]
    with tenant_scope(tenant_a.ctx):
        assert ApiKey.objects.get(pk=key.pk).last_used_at is not None


def test_it_does_not_touch_last_used_at_for_a_rejected_key(tenant_a) -> None:
    key, raw = new_key(tenant_a, expires_at=timezone.now() - timedelta(seconds=1))
    assert client_with(HTTP_X_API_KEY=raw).get(LIST_URL).status_code == 401
    with tenant_scope(tenant_a.ctx):
        assert ApiKey.objects.get(pk=key.pk).last_used_at is None


def test_it_never_stores_the_raw_key(tenant_a) -> None:
    key, raw = new_key(tenant_a, name="secret keeper")
    assert raw.startswith("msk_") and len(raw) > 40
    with tenant_scope(tenant_a.ctx), connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(k)::text FROM tenants_apikey k")
        rows = [json.loads(r[0]) for r in cursor.fetchall()]
    assert len(rows) == 2  # the fixture's key and this one
    for row in rows:
        for column, value in row.items():
            assert raw not in str(value), column
            assert raw[12:] not in str(value), column  # not even the secret part
    stored = next(r for r in rows if r["id"] == str(key.id))
    assert stored["key_hash"] == hashlib.sha256(raw.encode()).hexdigest()
    assert stored["prefix"] == raw[:12]


def test_it_never_lets_one_tenant_read_another_tenants_keys(tenant_a, tenant_b) -> None:
    with tenant_scope(tenant_a.ctx):
        prefixes = set(ApiKey.objects.values_list("prefix", flat=True))
    assert prefixes == {tenant_a.key[:12]}


def test_it_refuses_a_duplicate_tenant_in_the_command(tenant_a) -> None:
    with pytest.raises(CommandError):
        call_command("create_tenant", "Acme", stdout=StringIO())


def test_it_creates_an_api_key_for_an_existing_tenant_from_the_command(tenant_a) -> None:
    tenant_a.add("Acme memory")
    out = StringIO()
    call_command("create_api_key", tenant_a.tenant.slug, "--name", "ci", stdout=out)
    keys = KEY_RE.findall(out.getvalue())
    assert len(keys) == 1 and keys[0] != tenant_a.key
    response = client_with(HTTP_X_API_KEY=keys[0]).get(LIST_URL)
    assert response.status_code == 200
    assert [m["content"] for m in body(response)["memories"]] == ["Acme memory"]
    with tenant_scope(tenant_a.ctx):
        assert ApiKey.objects.filter(name="ci", prefix=keys[0][:12]).count() == 1


def test_it_creates_an_expiring_key_from_the_command(tenant_a) -> None:
    out = StringIO()
    call_command("create_api_key", tenant_a.tenant.name, "--expires-days", "2", stdout=out)
    (raw,) = KEY_RE.findall(out.getvalue())
    assert raw[:12] in out.getvalue().replace(raw, "")  # the prefix is printed too
    with tenant_scope(tenant_a.ctx):
        key = ApiKey.objects.get(prefix=raw[:12])
    assert key.expires_at is not None
    assert timedelta(days=1) < key.expires_at - timezone.now() <= timedelta(days=2)


def test_it_refuses_an_unknown_tenant_in_the_command(db) -> None:
    with pytest.raises(CommandError):
        call_command("create_api_key", "no-such-tenant", stdout=StringIO())
