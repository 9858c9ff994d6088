"""Erasing a data subject reaches every store (security review, finding 3): after
``DELETE /api/v1/memories?userId=…``, neither the subject's text nor its identifiers are
left in any table, in Redis, or in this process's embedding cache, and nothing can bring
them back."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.db import connections

from memories.embedding import embedders as embeddings
from memory_project import embedded
from tests.helpers import assert_error, body

M = "/api/v1/memories"
SUBJECT = "subject-4711"
MARKER = "Zanzibar lighthouse 7731"


pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])


@pytest.fixture(autouse=True)
def _owner_flushes(owner_flushes: None) -> None:
    """The rows are committed (each request commits); the owner empties them afterwards."""


def every_row_text() -> str:
    """Every row of every table of the test database as JSON text, read by the owner role,
    which sees every tenant's rows (it is a member of the platform role)."""
    with connections["owner"].cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        tables = [row[0] for row in cursor.fetchall()]
        chunks = []
        for table in tables:
            cursor.execute(f'SELECT coalesce(string_agg(row_to_json(t)::text, E\'\\n\'), \'\') '
                           f'FROM "{table}" t')
            chunks.append(f"--- {table}\n{cursor.fetchone()[0]}")
    return "\n".join(chunks)


def redis_text() -> bytes:
    """Every key and string value in Redis."""
    client = cache._cache.get_client(write=False)
    found = []
    for key in client.scan_iter(count=1000):
        found.append(key)
        if client.type(key) == b"string":
            found.append(client.get(key) or b"")
    return b"\n".join(found)


def test_erasing_a_subject_leaves_nothing_anywhere(tenant_a: Any, tenant_b: Any) -> None:
    client = tenant_a.client
    ids = {"userId": SUBJECT}
    first = client.post(M, {"content": f"{MARKER}: the first note", "layer": "user",
                            "identifiers": ids}, format="json")
    assert first.status_code == 201 and body(first)["embeddingGenerated"] is True
    memory_id = body(first)["memory"]["id"]
    client.patch(f"{M}/{memory_id}", {"content": f"{MARKER}: the note, edited"},
                 format="json")
    session = {"userId": SUBJECT, "sessionId": "sess-4711"}
    client.post(M, {"content": f"{MARKER} in a session", "layer": "session",
                    "identifiers": session, "importance": 0.95}, format="json")
    assert client.post("/api/v1/sessions/sess-4711/close", {"identifiers": ids},
                       format="json").status_code == 200
    soft = body(client.post(M, {"content": f"{MARKER}, deleted softly", "layer": "user",
                                "identifiers": ids}, format="json"))["memory"]["id"]
    client.delete(f"{M}/{soft}")
    client.post(M, {"content": "Other user note", "layer": "user",
                    "identifiers": {"userId": "someone-else"}}, format="json")
    client.post("/api/v1/policies", {"name": "no falcons", "denied_terms": ["falcon"]},
                format="json")
    refused = client.post(M, {"content": f"falcon {MARKER}", "layer": "user",
                              "identifiers": ids, "metadata": {"note": MARKER}}, format="json")
    assert refused.status_code == 422
    [item] = body(client.get("/api/v1/reviews", {"kind": "policy_hit"}))["results"]
    client.post(f"{M}/search", {"query": MARKER, "identifiers": ids}, format="json")
    assert MARKER in every_row_text() and SUBJECT in every_row_text()

    erased = client.delete(f"{M}?userId={SUBJECT}")
    assert body(erased)["erased"] == 4  # the first note, its session copy, both user notes

    rows = every_row_text()
    assert MARKER not in rows
    assert SUBJECT not in rows
    assert "sess-4711" not in rows
    assert MARKER.encode() not in redis_text()
    digest = embeddings.content_hash(f"{MARKER}: the first note")
    assert not any(digest in key for key in embeddings._local)
    assert not list(cache._cache.get_client().scan_iter(
        match=cache.make_key(f"emb:*:{tenant_a.tenant.id}:{digest}")))
    assert not list(cache._cache.get_client().scan_iter(
        match=cache.make_key(f"emb:query:*:{tenant_a.tenant.id}:*")))
    # Nothing confirms the text existed, and nothing can bring it back.
    again = client.post(M, {"content": f"{MARKER}: the first note", "layer": "user",
                            "identifiers": {"userId": "new-user"}}, format="json")
    assert body(again)["embeddingGenerated"] is True
    assert_error(client.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json"),
                 404, "NOT_FOUND")
    assert_error(client.post(f"{M}/{memory_id}/restore"), 404, "MEMORY_NOT_FOUND")


def test_erasing_one_subject_keeps_the_others(tenant_a: Any) -> None:
    tenant_a.add("Alice note", identifiers={"userId": "alice"})
    tenant_a.add("Bob note", identifiers={"userId": "bob"})
    assert body(tenant_a.client.delete(f"{M}?userId=alice"))["erased"] == 1
    listed = body(tenant_a.client.get(M, {"layer": "user", "userId": "bob"}))["memories"]
    assert [m["content"] for m in listed] == ["Bob note"]


def test_the_embedded_redis_keeps_its_data_private(settings: Any) -> None:
    if not settings.REDIS_URL.startswith("unix://"):
        return  # an external Redis: its files are its operator's
    # The dump inside is rewritten with Redis's own mode: the directory keeps it private.
    directory = embedded.redis_data_dir(settings.VAR_DIR)
    assert directory.stat().st_mode & 0o077 == 0


def _query_keys(tenant: Any) -> list[Any]:
    return list(cache._cache.get_client().scan_iter(
        match=cache.make_key(f"emb:query:*:{tenant.tenant.id}:*")))


def test_an_erasure_deletes_its_tenants_query_entries_only(tenant_a: Any, tenant_b: Any
                                                         ) -> None:
    for tenant in (tenant_a, tenant_b):
        tenant.add("Alice note", identifiers={"userId": "alice"})
        tenant.client.post(f"{M}/search", {"query": "what did alice write",
                                           "identifiers": {"userId": "alice"}}, format="json")
        assert _query_keys(tenant)
    assert body(tenant_a.client.delete(f"{M}?userId=alice"))["erased"] == 1
    assert _query_keys(tenant_a) == []
    assert _query_keys(tenant_b)  # the other tenant keeps its entries
