"""The console's audit log page: filters by action, actor and date range, pages, and exports
the filtered entries as CSV (safe to open in a spreadsheet) or JSON; exporting is audited.
Another tenant's page and a reviewer are covered by ``test_console_access``."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tenants.audit import audit_record
from tenants.context import tenant_scope
from tenants.models import AuditEntry

pytestmark = pytest.mark.django_db


def log(tenant: Any, action: str, *, days_ago: int = 0, **details: Any) -> None:
    """An audit entry written ``days_ago`` days ago (the log is append-only: the clock is
    set back while it is written)."""
    when = timezone.now() - timedelta(days=days_ago)
    with tenant_scope(tenant.ctx), pytest.MonkeyPatch.context() as clock:
        clock.setattr(timezone, "now", lambda: when)
        audit_record(tenant.ctx, action=action, target_type="memory", details=details)


def page_rows(response: Any) -> list[str]:
    return [row for row in response.content.decode().split('<tr><td>')[1:]]


def test_it_filters_by_action_actor_and_days(tenant_a: Any, tenant_b: Any,
                                             admin: Client) -> None:
    log(tenant_a, "memory_erased", reason="user asked")
    log(tenant_a, "memory_archived", days_ago=3)
    log(tenant_b, "memory_erased", reason="globex only")
    base = f"/console/t/{tenant_a.tenant.slug}/audit/"
    everything = admin.get(base)
    assert everything.status_code == 200
    assert "globex only" not in everything.content.decode()
    erased = admin.get(base, {"action": "memory_erased"})
    assert "user asked" in erased.content.decode() and "memory_archived" not in "".join(
        page_rows(erased))
    today = timezone.now().date()
    recent = admin.get(base, {"since": str(today - timedelta(days=1))})
    assert "memory_archived" not in "".join(page_rows(recent))
    old = admin.get(base, {"until": str(today - timedelta(days=2))})
    rows = page_rows(old)
    assert len(rows) == 1 and "memory_archived" in rows[0]
    by_actor = admin.get(base, {"actor": "nobody-like-this"})
    assert page_rows(by_actor) == [] or "Nothing matches" in by_actor.content.decode()


def test_bad_filters_are_shown_not_raised(tenant_a: Any, admin: Client) -> None:
    base = f"/console/t/{tenant_a.tenant.slug}/audit/"
    for params, said in (({"since": "yesterday"}, "From"), ({"action": "no_such_action"},
                                                             "Action"),
                         ({"since": "2026-05-02", "until": "2026-05-01"}, "must not be after"),
                         ({"actor": "x" * 300}, "Actor")):
        response = admin.get(base, params)
        assert response.status_code == 400, params
        assert said in response.content.decode(), params


def test_it_exports_the_filtered_entries_as_csv_and_json(tenant_a: Any, admin: Client) -> None:
    log(tenant_a, "memory_erased", reason="=HYPERLINK(\"http://evil\")")
    log(tenant_a, "settings_updated")
    base = f"/console/t/{tenant_a.tenant.slug}/audit/"
    exported = admin.get(base, {"action": "memory_erased", "export": "csv"})
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("text/csv")
    assert "attachment" in exported["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [r["action"] for r in rows] == ["memory_erased"]
    assert json.loads(rows[0]["details"]) == {"reason": '=HYPERLINK("http://evil")'}
    as_json = json.loads(admin.get(base, {"export": "json"}).content)
    assert {e["action"] for e in as_json} >= {"memory_erased", "settings_updated"}
    with tenant_scope(tenant_a.ctx):
        assert AuditEntry.objects.filter(action="audit_exported").count() == 2


def test_a_formula_in_a_cell_is_neutralised() -> None:
    from console.views.audit import _cell

    assert _cell("=1+1") == "'=1+1" and _cell("-3") == "'-3" and _cell("alice") == "alice"
    assert _cell({"a": 1}) == '{"a": 1}'
