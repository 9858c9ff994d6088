"""Cross-tenant access is a role the application's own does not have, and probes for another
tenant's ids leave no trace the prober can see or time (security review, findings 8 and 9)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.db import connections, transaction
from django.db.utils import ProgrammingError
from django.test.utils import CaptureQueriesContext

from memories.models import Memory
from tenants.audit import security_probes_classify
from tenants.context import dangerously_cross_tenant, tenant_scope
from tenants.models import AuditEntry, SecurityProbe, Tenant

pytestmark = pytest.mark.django_db(transaction=True,
                                   databases=["default", "owner", "platform"])


def _one(sql: str, params: list[Any] | None = None) -> Any:
    with connections["default"].cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def test_the_app_role_cannot_open_other_tenants_rows(owner_flushes: None, tenant_a: Any,
                                                    tenant_b: Any) -> None:
    tenant_b.add("Globex secret")
    assert _one("SELECT pg_has_role(current_user, 'memory_platform', 'MEMBER')") is False
    with tenant_scope(tenant_a.ctx):
        _one("SELECT set_config('app.cross_tenant', 'on', true)")
        assert _one("SELECT count(*) FROM memories_memory WHERE tenant_id = %s",
                    [str(tenant_b.tenant.id)]) == 0
        assert _one("SELECT count(*) FROM memories_memory") == 0


def test_the_app_role_cannot_change_or_delete_tenants(owner_flushes: None,
                                                     tenant_a: Any) -> None:
    for sql in ("UPDATE tenants_tenant SET name = 'taken over'",
                "UPDATE tenants_tenant SET is_active = false",
                "DELETE FROM tenants_tenant"):
        with pytest.raises(ProgrammingError, match="permission denied"), transaction.atomic():
            _one(sql + " RETURNING 1")
    assert Tenant.objects.get(pk=tenant_a.tenant.id).name == "Acme"


def test_the_escape_hatch_runs_as_the_platform_role(owner_flushes: None, tenant_a: Any,
                                                    tenant_b: Any) -> None:
    tenant_a.add("Acme note")
    tenant_b.add("Globex note")
    with dangerously_cross_tenant("test"):
        contents = sorted(Memory.objects.dangerously_all_tenants().values_list("content",
                                                                               flat=True))
        with connections["platform"].cursor() as cursor:
            cursor.execute("SELECT current_user")
            role = cursor.fetchone()[0]
    assert contents == ["Acme note", "Globex note"]
    assert role == "memory_platform"


def _shapes(queries: list[dict[str, str]]) -> list[str]:
    """Statements with their literals and ids blanked, for comparing two requests' work."""
    return [re.sub(r"'[^']*'|\b[0-9a-f-]{36}\b|\b\d+\b", "?", q["sql"]) for q in queries]


def test_a_probe_for_another_tenants_id_looks_and_costs_like_a_missing_one(
        owner_flushes: None, tenant_a: Any, tenant_b: Any) -> None:
    theirs = tenant_b.add("Globex secret")
    url = "/api/v1/memories/{}"
    tenant_a.client.get(url.format(uuid.uuid4()))  # warm every cache first
    with CaptureQueriesContext(connections["default"]) as foreign:
        answer_foreign = tenant_a.client.get(url.format(theirs.pk))
    missing_id = uuid.uuid4()
    with CaptureQueriesContext(connections["default"]) as missing:
        answer_missing = tenant_a.client.get(url.format(missing_id))
    assert answer_foreign.status_code == answer_missing.status_code == 404
    assert answer_foreign.content == answer_missing.content
    assert _shapes(foreign.captured_queries) == _shapes(missing.captured_queries)
    with tenant_scope(tenant_a.ctx):
        assert not AuditEntry.objects.filter(action__contains="cross_tenant").exists()
    with pytest.raises(ProgrammingError, match="permission denied"), transaction.atomic():
        _one("SELECT count(*) FROM governance_securityprobe")

    assert security_probes_classify() == {"classified": 3, "crossTenant": 1}
    with dangerously_cross_tenant("test"):
        flagged = {p.target_id: p.cross_tenant for p in SecurityProbe.objects.all()}
    assert flagged[theirs.pk] is True and flagged[missing_id] is False
