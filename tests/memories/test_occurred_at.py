"""``occurredAt``: a memory's time on its source's clock, beside ``createdAt``, through the
API (``Memory.occurred_at``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memories.models import Memory
from tenants.context import tenant_scope

URL = "/api/v1/memories"


@pytest.mark.django_db
def test_occurred_at_is_written_read_patched_and_cleared(tenant_a) -> None:
    created = tenant_a.client.post(URL, {
        "content": "We camped by the lake.", "layer": "user",
        "identifiers": {"userId": "u1"}, "occurredAt": "2023-06-20"}, format="json")
    assert created.status_code == 201, created.content
    memory = created.json()["memory"]
    assert memory["occurredAt"] == "2023-06-20T00:00:00Z"
    patched = tenant_a.client.patch(f"{URL}/{memory['id']}",
                                    {"occurredAt": "2023-06-21T09:30:00+02:00"}, format="json")
    assert patched.status_code == 200, patched.content
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=memory["id"]).occurred_at == datetime(
            2023, 6, 21, 7, 30, tzinfo=UTC)
    cleared = tenant_a.client.patch(f"{URL}/{memory['id']}", {"occurredAt": None},
                                    format="json")
    assert cleared.status_code == 200
    assert tenant_a.client.get(f"{URL}/{memory['id']}").json()["memory"]["occurredAt"] is None


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["yesterday", "2023-13-01", 20230620, ["2023-06-20"],
                                   "0001-01-01T00:00:00+05:00", "2023-06-20T10:00:00+25:00"])
def test_a_bad_occurred_at_is_refused_and_nothing_is_stored(tenant_a, value) -> None:
    response = tenant_a.client.post(URL, {
        "content": "We camped by the lake.", "layer": "user",
        "identifiers": {"userId": "u1"}, "occurredAt": value}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_INPUT"
    assert "occurredAt" in str(response.json()["error"]["details"])
    with tenant_scope(tenant_a.ctx):
        assert not Memory.objects.exists()
