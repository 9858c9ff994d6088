"""The console shows a memory's two clocks: when it was stored and, when the writer gave
it, when what it records was said or happened (``occurred_at``); exports carry both."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.test import Client

from console.browse import export_row
from tenants.context import tenant_scope


def url(tenant: Any, path: str) -> str:
    return f"/console/t/{tenant.tenant.slug}/{path}"


def text(response: Any) -> str:
    return response.content.decode()


def test_the_memory_page_shows_both_clocks(tenant_a: Any, admin: Client) -> None:
    said = tenant_a.add("Melanie: here's the sunset I painted",
                        occurred_at=datetime(2023, 10, 13, 10, 31, tzinfo=UTC))
    plain = tenant_a.add("Alice drinks Green Tea")
    body = text(admin.get(url(tenant_a, f"memories/{said.pk}/")))
    assert re.search(r"<th>Occurred</th><td[^>]*>2023-10-13 10:31:00 UTC", body)
    assert "<th>Created</th>" in body
    assert "<th>Occurred</th>" not in text(admin.get(url(tenant_a, f"memories/{plain.pk}/")))
    with tenant_scope(tenant_a.ctx):
        said.refresh_from_db()
    assert export_row(said)["occurred_at"] == "2023-10-13T10:31:00+00:00"
