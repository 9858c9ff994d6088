"""The tenant audit log (GET /api/v1/audit): key lifecycle entries, cross-tenant access
attempts (seed 001 "Tenant Isolation Enforcement": logged for security audit, without
revealing the other tenant), append-only storage, and the admin role."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from rest_framework.test import APIClient
from uuid6 import uuid7

from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body

pytestmark = pytest.mark.django_db

A = "/api/v1/audit"
M = "/api/v1/memories"


def entries(tenant: Any, **params: Any) -> list[dict[str, Any]]:
    response = tenant.client.get(A, params)
    assert response.status_code == 200, response.content
    return body(response)["results"]


def actions(tenant: Any) -> list[str]:
    return [e["action"] for e in entries(tenant)]


def new_key(tenant: Any, roles: list[str] | None = None) -> tuple[Any, APIClient]:
    with tenant_scope(tenant.ctx):
        key, raw = tenant_services.api_key_create(tenant.ctx, name="extra", roles=roles)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return key, client


# --- listing ----------------------------------------------------------------------------

def test_it_records_api_key_creation(tenant_a) -> None:
    [entry] = entries(tenant_a)
    assert entry["action"] == "api_key_created"
    assert entry["target_type"] == "api_key"
    assert entry["details"]["prefix"] == tenant_a.key[:12]
    assert entry["actor"] == "system:system"
    assert set(entry) == {"id", "created_at", "actor", "action", "target_type", "target_id",
                          "details"}
    assert tenant_a.key not in json.dumps(entry)


def test_it_records_revocation_once_newest_first(tenant_a) -> None:
    key, client = new_key(tenant_a, ["reader"])
    with tenant_scope(tenant_a.ctx):
        tenant_services.api_key_revoke(tenant_a.ctx, key_id=key.pk)
        tenant_services.api_key_revoke(tenant_a.ctx, key_id=key.pk)
    assert actions(tenant_a) == ["api_key_revoked", "api_key_created", "api_key_created"]
    revoked, created, _ = entries(tenant_a)
    assert revoked["target_id"] == created["target_id"] == str(key.pk)
    assert revoked["details"] == {"prefix": key.prefix, "name": "extra"}
    assert revoked["created_at"] >= created["created_at"]
    assert_error(client.get(M, {"layer": "user", "userId": "u1"}), 401)


def test_it_lists_newest_first_across_pages_and_filters_by_action(tenant_a) -> None:
    for n in range(4):
        response = tenant_a.client.post("/api/v1/policies", {"name": f"p{n}"}, format="json")
        assert response.status_code == 201
    listed = entries(tenant_a)
    assert [e["details"].get("name") for e in listed[:4]] == ["p3", "p2", "p1", "p0"]
    stamps = [e["created_at"] for e in listed]
    assert stamps == sorted(stamps, reverse=True)
    first = body(tenant_a.client.get(A, {"limit": 2}))
    assert [e["id"] for e in first["results"]] == [e["id"] for e in listed[:2]]
    second = body(tenant_a.client.get(first["next"]))
    assert [e["id"] for e in second["results"]] == [e["id"] for e in listed[2:4]]
    assert [e["action"] for e in entries(tenant_a, action="api_key_created")] == [
        "api_key_created"]


def test_the_audit_log_is_per_tenant(tenant_a, tenant_b) -> None:
    tenant_a.client.post("/api/v1/policies", {"name": "acme only"}, format="json")
    assert actions(tenant_b) == ["api_key_created"]
    assert "acme only" not in json.dumps(entries(tenant_b))


def test_a_reader_key_cannot_read_the_audit_log(tenant_a) -> None:
    _, reader = new_key(tenant_a, ["reader"])
    assert_error(reader.get(A), 403, "UNAUTHORIZED")
    _, reviewer = new_key(tenant_a, ["reviewer"])
    assert_error(reviewer.get(A), 403, "UNAUTHORIZED")


# --- cross-tenant access attempts -------------------------------------------------------

def attempt(tenant: Any, method: str, memory_id: str) -> Any:
    url = f"{M}/{memory_id}"
    if method == "get":
        return tenant.client.get(url)
    if method == "patch":
        return tenant.client.patch(url, {"content": "hijacked"}, format="json")
    return tenant.client.delete(url)


@pytest.mark.parametrize("method", ["get", "patch", "delete"])
def test_a_cross_tenant_attempt_leaves_no_trace_the_prober_can_read(tenant_a, tenant_b,
                                                                     method) -> None:
    """The attempt goes to the platform's security log (tests/tenants/test_platform_role.py), which
    no tenant reads: an entry in the prober's own audit log would tell it that the id
    exists elsewhere."""
    secret = tenant_a.add("Acme launches project Falcon in May")
    missing = str(uuid7())
    a_before, b_before = entries(tenant_a), entries(tenant_b)
    miss = attempt(tenant_b, method, missing)
    hit = attempt(tenant_b, method, str(secret.pk))
    assert hit.status_code == miss.status_code
    assert hit.content.decode().replace(str(secret.pk), missing) == miss.content.decode()
    assert entries(tenant_b) == b_before
    assert entries(tenant_a) == a_before
    assert body(tenant_a.client.get(f"{M}/{secret.pk}"))["memory"]["content"] == (
        "Acme launches project Falcon in May")


@pytest.mark.parametrize("memory_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_or_malformed_id_is_not_an_attempt(tenant_a, tenant_b, memory_id) -> None:
    tenant_a.add("Acme fact")
    for method in ("get", "patch", "delete"):
        assert attempt(tenant_b, method, memory_id).status_code in (200, 404)
    assert entries(tenant_b, action="cross_tenant_access_attempt") == []
    assert actions(tenant_a) == ["api_key_created"]


def test_a_cross_tenant_policy_lookup_answers_like_a_missing_one(tenant_a, tenant_b) -> None:
    policy = body(tenant_a.client.post("/api/v1/policies", {"name": "acme"}, format="json"))
    miss = tenant_b.client.get(f"/api/v1/policies/{uuid7()}")
    hit = tenant_b.client.get(f"/api/v1/policies/{policy['id']}")
    assert_error(hit, 404, "NOT_FOUND")
    assert hit.content == miss.content
    assert actions(tenant_b) == ["api_key_created"]


# --- append-only ------------------------------------------------------------------------

def raw_sql(tenant: Any, sql: str, params: list[Any] | None = None) -> None:
    with tenant_scope(tenant.ctx), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params or [])


@pytest.mark.parametrize("sql", [
    "UPDATE governance_auditentry SET action = 'nothing_happened'",
    "UPDATE governance_auditentry SET details = '{}'::jsonb WHERE id = %s",
    "DELETE FROM governance_auditentry",
    "DELETE FROM governance_auditentry WHERE id = %s",
    "TRUNCATE governance_auditentry",
])
def test_the_app_role_cannot_change_or_delete_audit_entries(tenant_a, sql) -> None:
    [entry] = entries(tenant_a)
    with pytest.raises(DatabaseError) as raised:
        raw_sql(tenant_a, sql, [entry["id"]] if "%s" in sql else None)
    assert "permission denied" in str(raised.value)
    assert entries(tenant_a) == [entry]


def test_the_app_role_cannot_change_audit_entries_through_the_orm(tenant_a) -> None:
    with tenant_scope(tenant_a.ctx):
        with pytest.raises(DatabaseError), transaction.atomic():
            AuditEntry.objects.update(action="nothing_happened")
        with pytest.raises(DatabaseError), transaction.atomic():
            AuditEntry.objects.all().delete()
    assert actions(tenant_a) == ["api_key_created"]


def test_the_app_role_can_append_and_read(tenant_a) -> None:
    raw_sql(tenant_a, "INSERT INTO governance_auditentry "
            "(id, tenant_id, created_at, actor, action, target_type, target_id, details) "
            "VALUES (%s, %s, clock_timestamp(), 'sql', 'appended', '', '', '{}'::jsonb)",
            [str(uuid7()), str(tenant_a.tenant.pk)])
    assert actions(tenant_a)[0] == "appended"


class TestAuditApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = ('audit.list',)
