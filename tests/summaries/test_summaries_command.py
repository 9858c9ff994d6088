"""``manage.py summaries_generate``: summaries for memories stored before summaries existed."""

from __future__ import annotations

from io import StringIO
from typing import Any

from django.core.management import call_command

from summaries.models import LayerSummary, SummaryScope
from tenants.context import tenant_scope


def test_it_summarises_each_scope_once_with_progress_and_timing(tenant_a: Any) -> None:
    for project in ("p1", "p2"):
        tenant_a.add(f"Notes of {project}: the launch moved to May.", layer="project",
                     identifiers={"projectId": project})
    tenant_a.add("Alice prefers tea.", layer="user", identifiers={"userId": "alice"})
    out, err = StringIO(), StringIO()
    call_command("summaries_generate", "--tenant", tenant_a.tenant.slug, "--layer", "project",
                 stdout=out, stderr=err)
    assert "scopes summarised: 2 of 2; summaries written: 6" in out.getvalue()
    assert "s per summary" in out.getvalue() and "summaries" in err.getvalue()
    with tenant_scope(tenant_a.ctx):
        assert set(LayerSummary.objects.values_list("layer", flat=True)) == {"project"}
    again = StringIO()
    call_command("summaries_generate", "--tenant", tenant_a.tenant.slug, stdout=again,
                 stderr=StringIO())
    assert "scopes summarised: 1 of 1" in again.getvalue()  # only the user scope was left
    with tenant_scope(tenant_a.ctx):
        assert SummaryScope.objects.count() == 3
