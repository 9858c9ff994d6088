"""Soft delete (hidden everywhere, restorable), hard erase (row gone, history content
blanked), bulk delete, restore, and the data-subject endpoints: export as JSON lines and
erasure by identifier."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from memories.api.serializers.memories import MemorySerializer
from memories.models import Memory, MemoryHistory
from memories.selectors import memory as selectors
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.helpers import assert_error, body, memory_row
from tests.retrieval_helpers import ids, recalled, searched

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"
EXPORT = "/api/v1/export"
USER = {"userId": "u1"}


def visible(tenant: Any, memory: Memory) -> dict[str, bool]:
    """Where ``memory`` can be seen: get, list, search, recall."""
    pk = str(memory.pk)
    listed = body(tenant.client.get(M, {"layer": "user", "userId": "u1"}))["memories"]
    return {
        "get": tenant.client.get(f"{M}/{pk}").status_code == 200,
        "list": pk in [m["id"] for m in listed],
        "search": pk in ids(searched(tenant, memory.content, threshold=0)["results"]),
        "recall": pk in ids(recalled(tenant, memory.content, min_confidence=0)),
    }


def history_rows(tenant: Any, memory_id: Any) -> list[MemoryHistory]:
    with tenant_scope(tenant.ctx):
        return list(MemoryHistory.objects.filter(memory_id=memory_id).order_by("created_at"))


def audit(tenant: Any, action: str) -> list[AuditEntry]:
    with tenant_scope(tenant.ctx):
        return list(AuditEntry.objects.filter(action=action))


def reader_client(tenant: Any) -> APIClient:
    with tenant_scope(tenant.ctx):
        _, raw = tenant_services.api_key_create(tenant.ctx, name="reader", roles=["reader"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def exported(client: APIClient, **params: str) -> list[dict[str, Any]]:
    response = client.get(EXPORT, params)
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/x-ndjson"
    text = b"".join(response.streaming_content).decode()
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


# --- soft delete and restore -------------------------------------------------------------------

def test_it_hides_a_soft_deleted_memory_from_every_read_and_restores_it(tenant_a) -> None:
    memory = tenant_a.add("The office wifi password rotates monthly")
    assert visible(tenant_a, memory) == {"get": True, "list": True, "search": True,
                                         "recall": True}
    assert tenant_a.client.delete(f"{M}/{memory.pk}").status_code == 200
    row = memory_row(tenant_a, memory.pk)
    assert row["state"] == "deleted" and row["deleted_at"] is not None
    assert visible(tenant_a, memory) == {"get": False, "list": False, "search": False,
                                         "recall": False}
    assert_error(tenant_a.client.patch(f"{M}/{memory.pk}", {"content": "x"}, format="json"),
                 404, "MEMORY_NOT_FOUND")

    response = tenant_a.client.post(f"{M}/{memory.pk}/restore")
    assert response.status_code == 200
    data = body(response)
    assert data["restored"] is True
    assert (data["memory"]["state"], data["memory"]["deletedAt"]) == ("active", None)
    assert data["memory"]["restoredAt"] is not None
    assert visible(tenant_a, memory) == {"get": True, "list": True, "search": True,
                                         "recall": True}
    assert [r.action for r in history_rows(tenant_a, memory.pk)] == ["add", "delete", "restore"]
    again = body(tenant_a.client.post(f"{M}/{memory.pk}/restore"))
    assert again["restored"] is False
    assert len(history_rows(tenant_a, memory.pk)) == 3


def test_it_restores_an_archived_memory_and_refuses_unknown_ones(tenant_a, tenant_b) -> None:
    memory = tenant_a.add("Archived by decay")
    with tenant_scope(tenant_a.ctx):
        Memory.objects.filter(pk=memory.pk).update(state="archived")
    assert body(tenant_a.client.post(f"{M}/{memory.pk}/restore"))["memory"]["state"] == "active"
    theirs = tenant_b.add("Globex memory")
    tenant_b.client.delete(f"{M}/{theirs.pk}")
    for target in (theirs.pk, "01a1fb00-0000-7000-8000-00000000abcd", "junk"):
        assert_error(tenant_a.client.post(f"{M}/{target}/restore"), 404, "MEMORY_NOT_FOUND")
    assert memory_row(tenant_b, theirs.pk)["state"] == "deleted"


def test_it_refuses_a_bad_hard_parameter_and_deletes_nothing(tenant_a) -> None:
    memory = tenant_a.add("Keep me")
    for query in ("hard=yes", "hard=", "Hard=true"):
        assert_error(tenant_a.client.delete(f"{M}/{memory.pk}?{query}"), 400, "INVALID_INPUT")
    assert memory_row(tenant_a, memory.pk)["state"] == "active"


# --- hard delete (erasure) ---------------------------------------------------------------------

def test_it_erases_on_hard_delete_and_blanks_the_history(tenant_a) -> None:
    memory = tenant_a.add("My phone number is 555-0100", metadata={"who": "me"})
    other = tenant_a.add("Unrelated memory")
    tenant_a.client.patch(f"{M}/{memory.pk}", {"content": "My phone is 555-0199"},
                          format="json")
    response = tenant_a.client.delete(f"{M}/{memory.pk}?hard=true")
    assert body(response) == {"success": True}
    assert memory_row(tenant_a, memory.pk) is None
    rows = history_rows(tenant_a, memory.pk)
    assert [r.action for r in rows] == ["add", "update", "erase"]
    assert all(r.old_content is r.new_content is r.old_metadata is r.new_metadata is None
               for r in rows)
    assert all(r.actor and r.created_at and r.erased_at for r in rows)
    assert history_rows(tenant_a, other.pk)[0].new_content == "Unrelated memory"
    history = body(tenant_a.client.get(f"{M}/{memory.pk}/history"))["history"]
    # ids, key prefixes and timestamps hold random digits: look at what could carry content
    carried = [{k: e[k] for k in ("oldContent", "newContent", "oldMetadata", "newMetadata",
                                  "details")} for e in history]
    assert "555" not in json.dumps(carried)
    assert [e["action"] for e in history] == ["add", "update", "erase"]
    assert [e.target_id for e in audit(tenant_a, "memory_erased")] == [str(memory.pk)]
    assert_error(tenant_a.client.post(f"{M}/{memory.pk}/restore"), 404, "MEMORY_NOT_FOUND")
    # idempotent
    assert body(tenant_a.client.delete(f"{M}/{memory.pk}?hard=true")) == {"success": True}


def test_it_erases_a_soft_deleted_memory_on_hard_delete(tenant_a) -> None:
    memory = tenant_a.add("Deleted first, erased later")
    tenant_a.client.delete(f"{M}/{memory.pk}")
    tenant_a.client.delete(f"{M}/{memory.pk}?hard=1")
    assert memory_row(tenant_a, memory.pk) is None
    assert [r.action for r in history_rows(tenant_a, memory.pk)] == ["add", "delete", "erase"]


def test_it_bulk_deletes_softly_or_hard(tenant_a) -> None:
    soft = [tenant_a.add(f"Soft doomed {i}") for i in range(2)]
    hard = [tenant_a.add(f"Hard doomed {i}") for i in range(2)]
    payload = {"ids": [str(m.pk) for m in soft] + ["junk"]}
    assert body(tenant_a.client.post(f"{M}/bulk-delete", payload, format="json")) == {
        "deleted": 2, "failed": ["junk"]}
    assert [memory_row(tenant_a, m.pk)["state"] for m in soft] == ["deleted", "deleted"]
    assert body(tenant_a.client.post(f"{M}/bulk-delete", payload, format="json"))[
        "deleted"] == 0  # already deleted
    payload = {"ids": [str(m.pk) for m in [*hard, soft[0]]], "hard": True}
    assert body(tenant_a.client.post(f"{M}/bulk-delete", payload, format="json")) == {
        "deleted": 3, "failed": []}
    assert [memory_row(tenant_a, m.pk) for m in [*hard, soft[0]]] == [None, None, None]
    assert memory_row(tenant_a, soft[1].pk) is not None
    assert_error(tenant_a.client.post(f"{M}/bulk-delete", {"ids": [str(soft[1].pk)],
                                                           "hard": "maybe"}, format="json"),
                 400, "INVALID_INPUT")
    assert memory_row(tenant_a, soft[1].pk) is not None


# --- export ------------------------------------------------------------------------------------

def test_it_streams_every_memory_of_the_tenant_and_none_of_another(
        tenant_a, tenant_b, monkeypatch) -> None:
    monkeypatch.setattr(selectors, "EXPORT_CHUNK_SIZE", 3)  # several chunks
    mine = [tenant_a.add(f"Acme memory number {i}") for i in range(7)]
    mine.append(tenant_a.add("Acme project memory", "project",
                             identifiers={"projectId": "p1"}))
    deleted = tenant_a.add("Acme deleted memory")
    tenant_a.client.delete(f"{M}/{deleted.pk}")
    for i in range(4):
        tenant_b.add(f"Globex memory number {i}")

    lines = exported(tenant_a.client)
    assert [line["id"] for line in lines] == sorted(str(m.pk) for m in mine)
    assert not any("Globex" in line["content"] for line in lines)
    assert set(lines[0]) == set(MemorySerializer.Meta.fields)
    assert "embedding" not in lines[0]
    everything = exported(tenant_a.client, includeDeleted="true")
    assert sorted(line["id"] for line in everything) == sorted(
        str(m.pk) for m in [*mine, deleted])
    assert {line["state"] for line in everything} == {"active", "deleted"}
    assert len(exported(tenant_b.client)) == 4
    entries = audit(tenant_a, "memory_export")
    assert sorted(e.details["includeDeleted"] for e in entries) == [False, True]


def test_it_exports_nothing_for_an_empty_tenant(tenant_a) -> None:
    assert exported(tenant_a.client) == []


@pytest.mark.parametrize("query", ["includeDeleted=maybe", "includeDeleted=", "layer=user",
                                   "includeDeleted=true&tenant=other", "includeEmbedding=1"])
def test_it_refuses_bad_export_parameters(tenant_a, query: str) -> None:
    tenant_a.add("Something")
    assert_error(tenant_a.client.get(f"{EXPORT}?{query}"), 400, "INVALID_INPUT")
    assert audit(tenant_a, "memory_export") == []


def test_it_needs_the_admin_role_for_export_and_erasure(tenant_a, anon) -> None:
    memory = tenant_a.add("Guarded")
    reader = reader_client(tenant_a)
    assert_error(reader.get(EXPORT), 403, "UNAUTHORIZED")
    assert_error(reader.delete(f"{M}?userId=u1"), 403, "UNAUTHORIZED")
    assert_error(anon.get(EXPORT), 401, "MISSING_TENANT_CONTEXT")
    assert memory_row(tenant_a, memory.pk)["state"] == "active"


# --- erasure by identifier ---------------------------------------------------------------------

def test_it_erases_every_memory_of_a_user_in_any_layer_and_state(tenant_a, tenant_b) -> None:
    doomed = [
        tenant_a.add("User one likes tea"),
        tenant_a.add("User one's agent note", "agent",
                     identifiers={"agentId": "a1", "userId": "u1"}),
        tenant_a.add("User one's session note", "session",
                     identifiers={"userId": "u1", "sessionId": "s1"}),
    ]
    soft = tenant_a.add("User one's deleted note")
    tenant_a.client.delete(f"{M}/{soft.pk}")
    doomed.append(soft)
    kept = tenant_a.add("User two likes coffee", identifiers={"userId": "u2"})
    theirs = tenant_b.add("Globex user one")

    response = tenant_a.client.delete(f"{M}?userId=u1")
    assert response.status_code == 200
    assert body(response) == {"erased": 4}
    for memory in doomed:
        assert memory_row(tenant_a, memory.pk) is None
        rows = history_rows(tenant_a, memory.pk)
        assert rows[-1].action == "erase" and rows[-1].details == {"reason": "identifier"}
        assert all(r.old_content is None and r.new_content is None for r in rows)
    assert memory_row(tenant_a, kept.pk)["state"] == "active"
    assert memory_row(tenant_b, theirs.pk)["state"] == "active"
    (entry,) = audit(tenant_a, "memory_erase_request")
    from tenants.audit import pseudonym

    assert entry.details == {"identifiers": {"userId": pseudonym(tenant_a.ctx, "u1")},
                             "erased": 4, "reviewItems": 0, "closedSessions": 0}
    assert "u1" not in str(entry.details)
    assert body(tenant_a.client.delete(f"{M}?userId=u1")) == {"erased": 0}


def test_it_erases_by_session_and_by_several_identifiers_together(tenant_a) -> None:
    s1 = tenant_a.add("Session one", "session", identifiers={"userId": "u1", "sessionId": "s1"})
    s2 = tenant_a.add("Session two", "session", identifiers={"userId": "u1", "sessionId": "s2"})
    other = tenant_a.add("Other user, same session id", "session",
                         identifiers={"userId": "u2", "sessionId": "s1"})
    assert body(tenant_a.client.delete(f"{M}?userId=u1&sessionId=s1")) == {"erased": 1}
    assert memory_row(tenant_a, s1.pk) is None
    assert memory_row(tenant_a, s2.pk) is not None and memory_row(tenant_a, other.pk)
    assert body(tenant_a.client.delete(f"{M}?sessionId=s1")) == {"erased": 1}


@pytest.mark.parametrize("query", ["", "?userId=", "?userId=%20", "?teamId=t1",
                                   "?companyId=acme", "?userId=u1&userId=u2",
                                   "?userId=u1&nope=1", "?userId=a%00b", "?userId=" + "x" * 256])
def test_it_refuses_an_erasure_without_a_valid_identifier(tenant_a, query: str) -> None:
    memory = tenant_a.add("Survives every bad request")
    assert_error(tenant_a.client.delete(f"{M}{query}"), 400, "INVALID_INPUT")
    assert memory_row(tenant_a, memory.pk)["state"] == "active"
    assert audit(tenant_a, "memory_erase_request") == []
