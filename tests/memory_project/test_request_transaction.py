"""The request transaction (``tenants.middleware``): the tenant settings a request set are
gone from its pooled connection once the request ends, whether the request's transaction
is the outermost one (the service) or nested (a test's)."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])


def settings_now() -> tuple[str | None, str | None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('app.tenant_id', true), "
                       "current_setting('app.cross_tenant', true)")
        return cursor.fetchone()


def test_an_outermost_request_transaction_leaves_no_tenant_behind(tenant_a,
                                                                  owner_flushes) -> None:
    assert not connection.in_atomic_block
    response = tenant_a.client.post("/api/v1/memories/search",
                                    {"query": "dairy", "identifiers": {"userId": "u1"}},
                                    format="json")
    assert response.status_code == 200
    assert not connection.in_atomic_block
    assert settings_now() in ((None, None), ("", ""), ("", None), (None, ""))
