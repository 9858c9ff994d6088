"""Memory history: one row per add (bulk too), update and delete, written in the transaction
of the change, readable at ``GET /api/v1/memories/{id}/history`` oldest first, also after a
soft delete; another tenant's id answers like a missing one."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from memories.models import Memory, MemoryHistory
from memories.services import history as history_module
from memories.services.memory import MemoryInput, memory_bulk_add
from tenants.context import tenant_scope
from tenants.layers import LayerIdentifiers
from tenants.models import AuditEntry
from tests.helpers import assert_error, body

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"
USER = {"userId": "u1"}


def added(tenant: Any, content: str, **extra: Any) -> dict[str, Any]:
    response = tenant.client.post(M, {"content": content, "layer": "user",
                                      "identifiers": USER, **extra}, format="json")
    assert response.status_code == 201, response.content
    return body(response)["memory"]


def history(tenant: Any, memory_id: Any) -> list[dict[str, Any]]:
    response = tenant.client.get(f"{M}/{memory_id}/history")
    assert response.status_code == 200, response.content
    data = body(response)
    assert set(data) == {"history"}
    return data["history"]


def rows(tenant: Any, memory_id: Any) -> list[MemoryHistory]:
    with tenant_scope(tenant.ctx):
        return list(MemoryHistory.objects.filter(memory_id=memory_id).order_by("created_at"))


def test_it_records_an_add_with_the_stored_content_and_the_caller(tenant_a) -> None:
    memory = added(tenant_a, "User prefers dark mode", metadata={"tags": ["ui"]})
    (entry,) = history(tenant_a, memory["id"])
    assert entry["action"] == "add"
    assert entry["memoryId"] == memory["id"]
    assert (entry["oldContent"], entry["newContent"]) == (None, "User prefers dark mode")
    assert (entry["oldMetadata"], entry["newMetadata"]) == (None, {"tags": ["ui"]})
    assert entry["actor"].startswith("api_key:") and entry["actor"] != "api_key:"
    assert entry["erasedAt"] is None and entry["createdAt"]


def test_it_records_every_memory_of_a_bulk_add(tenant_a) -> None:
    items = [{"content": f"Bulk fact {i}", "layer": "user", "identifiers": USER}
             for i in range(3)]
    response = tenant_a.client.post(f"{M}/bulk", {"memories": items}, format="json")
    assert response.status_code == 201
    for result in body(response)["results"]:
        (entry,) = history(tenant_a, result["memory"]["id"])
        assert (entry["action"], entry["newContent"]) == ("add", result["memory"]["content"])


def test_it_records_updates_oldest_first_with_old_and_new_values(tenant_a) -> None:
    memory = added(tenant_a, "Version one", metadata={"a": 1})
    assert tenant_a.client.patch(f"{M}/{memory['id']}", {"content": "Version two"},
                                 format="json").status_code == 200
    assert tenant_a.client.patch(f"{M}/{memory['id']}", {"metadata": {"b": 2}},
                                 format="json").status_code == 200
    assert tenant_a.client.patch(f"{M}/{memory['id']}", {"importance": 0.9},
                                 format="json").status_code == 200
    entries = history(tenant_a, memory["id"])
    assert [e["action"] for e in entries] == ["add", "update", "update", "update"]
    assert [e["createdAt"] for e in entries] == sorted(e["createdAt"] for e in entries)
    content_change, metadata_change, field_change = entries[1:]
    assert (content_change["oldContent"], content_change["newContent"]) == (
        "Version one", "Version two")
    assert content_change["details"]["fields"] == ["content"]
    assert content_change["oldMetadata"] is None  # metadata did not change
    assert (metadata_change["oldMetadata"], metadata_change["newMetadata"]) == (
        {"a": 1}, {"a": 1, "b": 2})
    assert metadata_change["oldContent"] is None
    assert field_change["details"]["fields"] == ["importance"]
    assert field_change["details"]["version"] == 4


def test_it_records_a_delete_and_keeps_the_history_readable_afterwards(tenant_a) -> None:
    memory = added(tenant_a, "Soon deleted", metadata={"k": "v"})
    assert body(tenant_a.client.delete(f"{M}/{memory['id']}")) == {"success": True}
    assert tenant_a.client.get(f"{M}/{memory['id']}").status_code == 404
    entries = history(tenant_a, memory["id"])
    assert [e["action"] for e in entries] == ["add", "delete"]
    assert (entries[1]["oldContent"], entries[1]["oldMetadata"]) == ("Soon deleted", {"k": "v"})
    assert entries[1]["details"] == {"previousState": "active"}
    # deleting again is a no-op: no second delete row
    tenant_a.client.delete(f"{M}/{memory['id']}")
    assert [e["action"] for e in history(tenant_a, memory["id"])] == ["add", "delete"]


def test_it_writes_nothing_to_history_when_the_change_fails(tenant_a) -> None:
    memory = added(tenant_a, "Stable")
    stale = tenant_a.client.patch(f"{M}/{memory['id']}", {"content": "Lost", "version": 7},
                                  format="json")
    assert_error(stale, 409, "VERSION_CONFLICT")
    good = {"content": "Good", "layer": "user", "identifiers": USER}
    bad = {"content": "Bad", "layer": "galaxy", "identifiers": USER}
    failed = tenant_a.client.post(f"{M}/bulk", {"memories": [good, bad]}, format="json")
    assert_error(failed, 400, "INVALID_LAYER")
    with tenant_scope(tenant_a.ctx):
        assert MemoryHistory.objects.count() == 1  # the one add


def test_it_writes_memory_and_history_in_one_transaction(tenant_a, monkeypatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("history store down")

    monkeypatch.setattr("memories.services.memory.history_added", broken)
    item = MemoryInput(content="Never half-written", layer="user",
                       identifiers=LayerIdentifiers(userId="u1"))
    with tenant_scope(tenant_a.ctx):
        with pytest.raises(RuntimeError):
            memory_bulk_add(tenant_a.ctx, items=[item])
        assert not Memory.objects.filter(content="Never half-written").exists()


def test_it_answers_a_foreign_id_exactly_like_a_missing_one(tenant_a, tenant_b) -> None:
    theirs = tenant_b.add("Globex secret plan")
    missing = tenant_a.client.get(f"{M}/01a1fb00-0000-7000-8000-00000000abcd/history")
    foreign = tenant_a.client.get(f"{M}/{theirs.pk}/history")
    for response in (missing, foreign):
        assert_error(response, 404, "MEMORY_NOT_FOUND")
    assert body(missing)["error"]["message"] == body(foreign)["error"]["message"]
    assert b"Globex" not in foreign.content
    assert history(tenant_b, theirs.pk)[0]["newContent"] == "Globex secret plan"
    with tenant_scope(tenant_a.ctx):  # the security log has it (test_platform_role.py)
        assert not AuditEntry.objects.filter(target_id=str(theirs.pk)).exists()


@pytest.mark.parametrize("memory_id", ["not-a-uuid", "%00", "0" * 32, "-1"])
def test_it_answers_malformed_ids_like_missing_ones(tenant_a, memory_id: str) -> None:
    assert_error(tenant_a.client.get(f"{M}/{memory_id}/history"), 404, "MEMORY_NOT_FOUND")


def test_it_shows_an_empty_history_for_a_memory_stored_before_history(tenant_a) -> None:
    memory = tenant_a.add("Imported long ago")
    with tenant_scope(tenant_a.ctx):
        MemoryHistory.objects.filter(memory_id=memory.pk).delete()
    assert history(tenant_a, memory.pk) == []


def test_it_keeps_history_rows_behind_row_level_security(tenant_a, tenant_b) -> None:
    mine = tenant_a.add("Acme note")
    tenant_b.add("Globex note")
    with tenant_scope(tenant_a.ctx), connection.cursor() as cursor:
        cursor.execute("SELECT memory_id FROM memories_memoryhistory")
        assert [row[0] for row in cursor.fetchall()] == [mine.pk]
    with connection.cursor() as cursor:  # no tenant in scope: nothing at all
        cursor.execute("SELECT count(*) FROM memories_memoryhistory")
        assert cursor.fetchone()[0] == 0


def test_history_erase_blanks_content_and_keeps_who_and_when(tenant_a) -> None:
    memory = added(tenant_a, "Contains a secret", metadata={"secret": "x"})
    tenant_a.client.patch(f"{M}/{memory['id']}", {"content": "Still secret"}, format="json")
    before = rows(tenant_a, memory["id"])
    with tenant_scope(tenant_a.ctx):
        blanked = history_module.history_erase(tenant_a.ctx, [before[0].memory_id],
                                               reason="delete")
    assert blanked == 2
    after = rows(tenant_a, memory["id"])
    assert [r.action for r in after] == ["add", "update", "erase"]
    assert [(r.actor, r.created_at) for r in after[:2]] == [
        (r.actor, r.created_at) for r in before]
    for row in after:
        assert (row.old_content, row.new_content, row.old_metadata, row.new_metadata) == (
            None, None, None, None)
        assert row.erased_at is not None
    assert after[2].details == {"reason": "delete"}
    assert after[2].actor == "system:test"


