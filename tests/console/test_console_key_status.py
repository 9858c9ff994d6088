"""The status of API keys on the Settings page's key list: active, expiring within a week,
expired or revoked (``console.selectors.key_status``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from console.selectors import key_status, key_status_class
from tenants.context import tenant_scope
from tenants.models import ApiKey
from tenants.services import api_key_create, api_key_revoke

pytestmark = pytest.mark.django_db


def row(response: Any, row_id: str) -> str:
    """The HTML of the table row ``<tr id="row_id">`` of the page."""
    found = re.search(rf'<tr id="{re.escape(row_id)}">(.*?)</tr>', response.content.decode(),
                      re.S)
    assert found, f"no row {row_id}"
    return found.group(1)


NOW = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("expires_in", "revoked", "status", "css"), [
    (None, False, "active", "active"),
    (timedelta(days=30), False, "active", "active"),
    (timedelta(days=7, seconds=1), False, "active", "active"),
    (timedelta(days=7), False, "expires in 7 days", "expiring"),
    (timedelta(days=2, hours=12), False, "expires in 3 days", "expiring"),
    (timedelta(hours=3), False, "expires in 1 day", "expiring"),
    (timedelta(0), False, "expired", "expired"),
    (timedelta(days=-1), False, "expired", "expired"),
    (timedelta(days=-1), True, "revoked", "revoked"),
    (None, True, "revoked", "revoked"),
])
def test_key_status(expires_in: timedelta | None, revoked: bool, status: str,
                    css: str) -> None:
    key = ApiKey(expires_at=NOW + expires_in if expires_in is not None else None,
                 revoked_at=NOW - timedelta(days=2) if revoked else None)
    assert key_status(key, NOW) == status
    assert key_status_class(status) == f"status-{css}"


def test_the_key_list_shows_expired_expiring_and_revoked_keys(tenant_a: Any,
                                                              admin: Client) -> None:
    now = timezone.now()
    with tenant_scope(tenant_a.ctx):
        old, _ = api_key_create(tenant_a.ctx, name="old", expires_at=now - timedelta(hours=1))
        soon, _ = api_key_create(tenant_a.ctx, name="soon",
                                 expires_at=now + timedelta(days=2, minutes=-1))
        gone, _ = api_key_create(tenant_a.ctx, name="gone")
        api_key_revoke(tenant_a.ctx, key_id=gone.pk)
        fine = ApiKey.objects.get(name="test")
    page = admin.get(f"/console/t/{tenant_a.tenant.slug}/settings/")
    assert '<td class="key-status status-expired">expired</td>' in row(page, f"key-{old.prefix}")
    assert ('<td class="key-status status-expiring">expires in 2 days</td>'
            in row(page, f"key-{soon.prefix}"))
    assert 'class="key-status status-revoked">revoked <time' in row(page, f"key-{gone.prefix}")
    assert '<td class="key-status status-active">active</td>' in row(page, f"key-{fine.prefix}")
