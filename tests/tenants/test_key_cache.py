"""``tenants.key_cache``: a key seen before costs one version lookup, and whatever would
refuse it without the cache (revocation, deletion, expiry, a deactivated tenant, a changed
restriction) refuses it on the very next request, however the change was written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tenants import key_cache
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.models import ApiKey
from tests.helpers import assert_error

pytestmark = pytest.mark.django_db

LIST_URL = "/api/v1/memories?layer=user&userId=u1"


def get(tenant: Any) -> Any:
    with CaptureQueriesContext(connection) as captured:
        response = tenant.client.get(LIST_URL)
    response.key_queries = [q["sql"] for q in captured.captured_queries
                            if "tenants_apikey" in q["sql"] and q["sql"].startswith("SELECT")]
    return response


def sql(tenant: Any, statement: str, *params: Any) -> int:
    """Run ``statement`` in ``tenant``'s scope (row-level security hides the rows
    otherwise); the number of rows it changed."""
    with tenant_scope(tenant.ctx), connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def test_a_known_key_is_not_read_again(tenant_a) -> None:
    first, second = get(tenant_a), get(tenant_a)
    assert first.status_code == second.status_code == 200
    assert first.key_queries and second.key_queries == []


def test_its_last_use_does_not_evict_it(tenant_a) -> None:
    get(tenant_a)
    assert sql(tenant_a, "UPDATE tenants_apikey SET last_used_at = now() - interval '1 day'")
    assert get(tenant_a).key_queries == []


@pytest.mark.parametrize("change", [
    "UPDATE tenants_apikey SET revoked_at = now()",
    "DELETE FROM tenants_apikey",
    "UPDATE tenants_apikey SET expires_at = now() - interval '1 second'",
])  # deactivating the tenant is platform staff's: tests/tenants/test_platform_admin.py
def test_a_change_in_plain_sql_refuses_the_cached_key(tenant_a, change: str) -> None:
    assert get(tenant_a).status_code == 200
    assert sql(tenant_a, change) == 1
    assert_error(get(tenant_a), 401, "INVALID_TENANT_CONTEXT")


def test_a_revocation_through_the_service_refuses_it(tenant_a) -> None:
    assert get(tenant_a).status_code == 200
    with tenant_scope(tenant_a.ctx):
        key = ApiKey.objects.get()
        tenant_services.api_key_revoke(tenant_a.ctx, key_id=key.pk)
    assert_error(get(tenant_a), 401, "INVALID_TENANT_CONTEXT")


def test_a_changed_restriction_applies_at_once(tenant_a) -> None:
    assert get(tenant_a).status_code == 200
    assert sql(tenant_a, "UPDATE tenants_apikey SET allowed_layers = '[\"agent\"]'")
    response = get(tenant_a)
    assert response.key_queries
    assert_error(response, 403)


def test_a_key_expiring_while_cached_is_refused(tenant_a, monkeypatch) -> None:
    assert sql(tenant_a, "UPDATE tenants_apikey SET expires_at = now() + interval '1 hour'")
    assert get(tenant_a).status_code == 200
    later = timezone.now() + timedelta(hours=2)
    monkeypatch.setattr(key_cache.timezone, "now", lambda: later)
    monkeypatch.setattr(tenant_services.timezone, "now", lambda: later)
    assert_error(get(tenant_a), 401, "INVALID_TENANT_CONTEXT")


def test_other_tenants_keys_are_unaffected(tenant_a, tenant_b) -> None:
    get(tenant_a), get(tenant_b)
    assert sql(tenant_a, "UPDATE tenants_apikey SET revoked_at = now()")
    assert_error(get(tenant_a), 401, "INVALID_TENANT_CONTEXT")
    assert get(tenant_b).key_queries == []


def test_a_known_key_enters_its_tenant_in_the_version_check(tenant_a) -> None:
    tenant_a.add("User likes green tea")
    get(tenant_a)
    with CaptureQueriesContext(connection) as captured:
        response = tenant_a.client.get(LIST_URL)
    entering = [q["sql"] for q in captured.captured_queries
                if "app.tenant_id" in q["sql"] and "'app.tenant_id', ''" not in q["sql"]]
    assert len(entering) == 1 and "config_version" in entering[0]  # (not the leaving one)
    assert [m["content"] for m in response.json()["memories"]] == ["User likes green tea"]


def test_a_stale_version_enters_no_tenant_before_the_key_is_read_again(tenant_a) -> None:
    tenant_a.add("User likes green tea")
    get(tenant_a)
    assert sql(tenant_a, "UPDATE tenants_apikey SET allowed_layers = '[\"user\"]'") == 1
    response = get(tenant_a)
    assert response.key_queries  # read from the database, then entered
    assert [m["content"] for m in response.json()["memories"]] == ["User likes green tea"]
