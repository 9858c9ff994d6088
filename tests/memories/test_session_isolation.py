"""Session isolation (seed 004 "Session isolation"): reads and deletes for session "A" never
return or touch a memory of session "B" of the same user in the same tenant, and a session's
memories are read in id order from the index ``mem_session_idx`` (the seed's
``memory:{sessionID}:{entryID}`` prefix scan: ``(tenant, layer, session_id, id)``).

Both sessions hold a memory with the same content, so no test passes because the texts
differ.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import ClosedSession, Memory, State
from memories.services.lifecycle import sessions_cleanup
from memories.services.memory import MemoryInput, memory_bulk_add
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.layers import LayerIdentifiers
from tests.helpers import body, memory_row
from tests.retrieval_helpers import ids, recalled, searched

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"
SHARED = "The deploy key rotates every Friday at noon"
SESSION_A = {"userId": "u1", "sessionId": "A"}
SESSION_B = {"userId": "u1", "sessionId": "B"}


def session_memories(tenant: Any, session: dict[str, str], texts: list[str],
                     importance: float = 0.5) -> list[str]:
    """Add ``texts`` to ``session``'s layer in one batch; their ids, in id (creation) order."""
    items = [MemoryInput(content=text, layer="session", importance=importance,
                         identifiers=LayerIdentifiers.from_mapping(session)) for text in texts]
    with tenant_scope(tenant.ctx):
        return [str(r.memory.pk) for r in memory_bulk_add(tenant.ctx, items=items)]


def two_sessions(tenant: Any) -> tuple[list[str], list[str]]:
    """Three memories in session A and three in session B of user u1 (one shared text)."""
    a = session_memories(tenant, SESSION_A, [SHARED, "Session A talked about invoices",
                                             "Session A chose the blue theme"])
    b = session_memories(tenant, SESSION_B, [SHARED, "Session B talked about shipping",
                                             "Session B chose the red theme"])
    return a, b


def rows(tenant: Any, memory_ids: list[str]) -> list[dict[str, Any] | None]:
    """Every column of each memory (``None`` once it is gone), read straight from the table."""
    return [memory_row(tenant, pk) for pk in memory_ids]


def active_count(tenant: Any, session_id: str) -> int:
    with tenant_scope(tenant.ctx):
        return Memory.objects.filter(layer="session", session_id=session_id,
                                     state=State.ACTIVE).count()


def listed(tenant: Any, session: dict[str, str], **params: Any) -> dict[str, Any]:
    response = tenant.client.get(M, {"layer": "session", **session, **params})
    assert response.status_code == 200, response.content
    return body(response)


# --- reads -------------------------------------------------------------------------------

def test_listing_session_a_returns_only_its_memories_in_id_order(tenant_a, tenant_b) -> None:
    a, b = two_sessions(tenant_a)
    session_memories(tenant_b, SESSION_A, [SHARED])  # another tenant's session "A"
    tenant_a.add("A user-layer memory of u1", identifiers={"userId": "u1"})
    data = listed(tenant_a, SESSION_A)
    assert [m["id"] for m in data["memories"]] == sorted(a, reverse=True)  # newest first
    assert data["totalCount"] == 3
    assert {m["identifiers"]["sessionId"] for m in data["memories"]} == {"A"}
    assert [m["id"] for m in listed(tenant_a, SESSION_B)["memories"]] == sorted(b, reverse=True)


def test_paging_through_session_a_never_crosses_into_session_b(tenant_a) -> None:
    a, b = two_sessions(tenant_a)
    seen: list[str] = []
    cursor = None
    while True:
        data = listed(tenant_a, SESSION_A, limit=1, **({"cursor": cursor} if cursor else {}))
        seen.extend(m["id"] for m in data["memories"])
        cursor = data["nextCursor"]
        if cursor is None:
            break
    assert seen == sorted(a, reverse=True) and not set(seen) & set(b)


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_searching_session_a_never_returns_a_memory_of_session_b(tenant_a, mode) -> None:
    a, b = two_sessions(tenant_a)
    for query in (SHARED, "Session B talked about shipping", "theme"):
        found = ids(searched(tenant_a, query, identifiers=SESSION_A, layers=["session"],
                             mode=mode, threshold=0)["results"])
        assert not set(found) & set(b), (query, mode)
        assert set(found) <= set(a)
    shared = ids(searched(tenant_a, SHARED, identifiers=SESSION_A, layers=["session"],
                          mode=mode, threshold=0)["results"])
    assert a[0] in shared


def test_searching_and_recalling_every_layer_of_session_a_leaves_b_out(tenant_a) -> None:
    a, b = two_sessions(tenant_a)
    found = ids(searched(tenant_a, SHARED, identifiers=SESSION_A, threshold=0)["results"])
    assert a[0] in found and not set(found) & set(b)
    again = ids(recalled(tenant_a, SHARED, identifiers=SESSION_A, min_confidence=0))
    assert a[0] in again and not set(again) & set(b)


# --- deletes -----------------------------------------------------------------------------

def test_bulk_deleting_session_a_leaves_session_b_untouched(tenant_a) -> None:
    a, b = two_sessions(tenant_a)
    before, count = rows(tenant_a, b), active_count(tenant_a, "B")
    response = tenant_a.client.post(f"{M}/bulk-delete", {"ids": a}, format="json")
    assert body(response) == {"deleted": 3, "failed": []}
    assert [row["state"] for row in rows(tenant_a, a) if row] == ["deleted"] * 3
    assert listed(tenant_a, SESSION_A)["memories"] == []
    assert rows(tenant_a, b) == before and active_count(tenant_a, "B") == count == 3


def test_hard_bulk_deleting_session_a_leaves_session_b_untouched(tenant_a) -> None:
    a, b = two_sessions(tenant_a)
    before = rows(tenant_a, b)
    response = tenant_a.client.post(f"{M}/bulk-delete", {"ids": a, "hard": True},
                                    format="json")
    assert body(response) == {"deleted": 3, "failed": []}
    assert rows(tenant_a, a) == [None, None, None]
    assert rows(tenant_a, b) == before and active_count(tenant_a, "B") == 3


def test_erasing_session_a_by_identifier_leaves_session_b_untouched(tenant_a) -> None:
    a, b = two_sessions(tenant_a)
    before = rows(tenant_a, b)
    response = tenant_a.client.delete(M + "?userId=u1&sessionId=A")
    assert body(response) == {"erased": 3}
    assert rows(tenant_a, a) == [None, None, None]
    assert rows(tenant_a, b) == before and active_count(tenant_a, "B") == 3
    assert [m["id"] for m in listed(tenant_a, SESSION_B)["memories"]] == sorted(b, reverse=True)


def test_closing_session_a_leaves_session_b_untouched(tenant_a) -> None:
    a = session_memories(tenant_a, SESSION_A, [SHARED, "Session A decided on Postgres"],
                         importance=0.9)
    b = session_memories(tenant_a, SESSION_B, [SHARED, "Session B decided on Redis"],
                         importance=0.9)
    before = rows(tenant_a, b)
    response = tenant_a.client.post("/api/v1/sessions/A/close",
                                    {"identifiers": {"userId": "u1"}}, format="json")
    assert response.status_code == 200, response.content
    result = body(response)
    assert result["sessionId"] == "A" and len(result["promoted"]) == 2
    with tenant_scope(tenant_a.ctx):
        copies = list(Memory.objects.filter(pk__in=result["promoted"]))
        assert list(ClosedSession.objects.values_list("session_id", flat=True)) == ["A"]
    assert sorted(c.metadata["promotedFrom"]["id"] for c in copies) == sorted(a)
    assert rows(tenant_a, b) == before and active_count(tenant_a, "B") == 2


def test_the_idle_session_job_deletes_only_the_idle_session(tenant_a) -> None:
    a, b = two_sessions(tenant_a)
    with tenant_scope(tenant_a.ctx):
        tenant_services.tenant_settings_update(tenant_a.ctx, patch={"lifecycle": {
            "sessionCleanup": {"retentionPeriod": "1d", "autoDelete": True}}})
        Memory.objects.filter(session_id="A").update(
            updated_at=timezone.now() - timedelta(days=2))
    before = rows(tenant_a, b)
    with tenant_scope(tenant_a.ctx):
        counts = sessions_cleanup(tenant_a.ctx)
    assert counts["closed"] == 1 and counts["deleted"] == 3
    assert [row["state"] for row in rows(tenant_a, a) if row] == ["deleted"] * 3
    assert rows(tenant_a, b) == before and active_count(tenant_a, "B") == 3


# --- the index behind a session's reads --------------------------------------------------

SESSIONS = 12
PER_SESSION = 30


@pytest.fixture
def _owner_flushes(owner_flushes: None) -> None:
    """The rows are committed (the owner analyzes them); the owner empties them afterwards."""


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
@pytest.mark.usefixtures("_owner_flushes")
def test_a_sessions_page_is_read_from_mem_session_idx_in_id_order(tenant_a) -> None:
    """With statistics of a user who has had a dozen sessions (the owner role runs
    ``ANALYZE``), the list's page query is a backward scan of ``mem_session_idx``: no
    sequential scan, and no sort (the index yields the session's rows newest id first)."""
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        for n in range(SESSIONS):
            identifiers = LayerIdentifiers(userId="u1", sessionId=f"s{n}")
            memory_bulk_add(tenant_a.ctx, items=[
                MemoryInput(content=f"Session {n} note {i}", layer="session",
                            identifiers=identifiers) for i in range(PER_SESSION)])
        memory_bulk_add(tenant_a.ctx, items=[
            MemoryInput(content=f"User note {i}", layer="user",
                        identifiers=LayerIdentifiers(userId="u1")) for i in range(PER_SESSION)])
    with connections["owner"].cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    with CaptureQueriesContext(connection) as captured:
        data = listed(tenant_a, {"userId": "u1", "sessionId": "s3"}, limit=10)
    assert data["totalCount"] == PER_SESSION
    assert {m["content"].split(" note ")[0] for m in data["memories"]} == {"Session 3"}
    (page,) = [q["sql"] for q in captured.captured_queries
               if q["sql"].startswith("SELECT") and '"memories_memory"' in q["sql"]
               and "ORDER BY" in q["sql"] and "LIMIT" in q["sql"]]
    with transaction.atomic(), tenant_scope(tenant_a.ctx), connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + page)
        shown = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan Backward using mem_session_idx on memories_memory" in shown, shown
    assert "Seq Scan" not in shown and "Sort" not in shown, shown
    condition = shown[shown.index("Index Cond"):].splitlines()[0]
    assert "layer" in condition and "session_id" in condition, shown
