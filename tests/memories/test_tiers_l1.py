"""L1 and batch get (seed 004 "Three-tier storage architecture", "L1 cache management",
"Batch retrieve", "Badger write failure"): ``memories.tiers.l1``,
``memories.selectors.entries`` and ``POST /api/v1/memories/batch-get``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from memories.tiers.entries import MemoryEntry
from memories.tiers.l1 import EntryCache, l1_cache, l1_reset, parse_payload
from tenants.context import tenant_scope
from tests.helpers import assert_error, body, new_key

BATCH = "/api/v1/memories/batch-get"
MISSING = "01a20000-0000-7000-8000-000000000000"


def _entry(memory_id: str, content: str = "x") -> MemoryEntry:
    now = datetime.now(UTC)
    return MemoryEntry(id=memory_id, task_id=None, session_id=None, content=content,
                       vector=None, metadata={}, strength=1.0, decay_rate=0.0,
                       last_review=now, created_at=now, layer="user",
                       identifiers={"userId": "u1"}, kind="fact", scope="global",
                       state="active", version=1)


def _listening(cache: EntryCache) -> EntryCache:
    cache.listening.set()  # a cache under test, with no listener thread
    return cache


@pytest.fixture
def l1() -> Iterator[EntryCache]:
    """A fresh L1 of this process, its listener connected."""
    l1_reset()
    cache = l1_cache(wait_seconds=10)
    assert cache.listening.is_set(), "the L1 listener did not connect"
    yield cache
    l1_reset()


def _tiers(response: Any) -> dict[str, int]:
    return {k: int(v) for k, v in (p.split("=") for p in response["X-Memory-Tiers"].split(", "))}


# --- the cache ------------------------------------------------------------------------------

def test_the_least_recently_used_entry_is_evicted_at_the_size_limit() -> None:
    tenant = uuid.uuid4()
    cache = _listening(EntryCache(maxsize=2, ttl=60))
    cache.put_many(tenant, [_entry("a"), _entry("b")], generation=cache.generation())
    assert set(cache.get_many(tenant, ["a"])) == {"a"}  # "a" is now the most recently used
    cache.put_many(tenant, [_entry("c")], generation=cache.generation())
    assert set(cache.get_many(tenant, ["a", "b", "c"])) == {"a", "c"}


def test_entries_are_keyed_by_tenant() -> None:
    cache = _listening(EntryCache(maxsize=10, ttl=60))
    mine, other = uuid.uuid4(), uuid.uuid4()
    cache.put_many(mine, [_entry("a")], generation=cache.generation())
    assert cache.get_many(other, ["a"]) == {}
    assert set(cache.get_many(mine, ["a"])) == {"a"}


def test_an_invalidation_during_a_read_keeps_what_was_read_out_of_the_cache() -> None:
    tenant = uuid.uuid4()
    cache = _listening(EntryCache(maxsize=10, ttl=60))
    generation = cache.generation()
    cache.invalidate([(str(tenant), "a")])  # a write committed while "a" was being read
    assert cache.put_many(tenant, [_entry("a", "old")], generation=generation) == 0
    assert cache.get_many(tenant, ["a"]) == {}


def test_a_cache_not_receiving_invalidations_serves_nothing() -> None:
    tenant = uuid.uuid4()
    cache = EntryCache(maxsize=10, ttl=60)
    assert cache.put_many(tenant, [_entry("a")], generation=cache.generation()) == 0
    assert cache.get_many(tenant, ["a"]) == {}


def test_a_size_of_zero_turns_l1_off() -> None:
    cache = _listening(EntryCache(maxsize=0, ttl=60))
    assert not cache.enabled


@pytest.mark.parametrize("payload,key", [
    ("t1:m1", ("t1", "m1")), ("t1:", None), (":m1", None), ("garbage", None)])
def test_notification_payloads(payload: str, key: tuple[str, str] | None) -> None:
    assert parse_payload(payload) == key


# --- batch get ------------------------------------------------------------------------------

@pytest.mark.django_db
def test_batch_get_returns_entries_in_order_and_lists_the_missing(tenant_a, tenant_b, l1
                                                                  ) -> None:
    first = tenant_a.add("Maria likes green tea", identifiers={"userId": "u1"})
    second = tenant_a.add("Maria lives in Lisbon", identifiers={"userId": "u1"})
    foreign = tenant_b.add("Globex secret", identifiers={"userId": "u1"})
    ids = [str(second.pk), "not-a-uuid", str(first.pk), str(foreign.pk), MISSING,
           str(second.pk)]
    response = tenant_a.client.post(BATCH, {"ids": ids}, format="json")
    assert response.status_code == 200, response.content
    data = body(response)
    assert [e["id"] for e in data["entries"]] == [str(second.pk), str(first.pk)]
    assert data["missing"] == ["not-a-uuid", str(foreign.pk), MISSING]
    entry = data["entries"][1]
    assert entry["content"] == "Maria likes green tea"
    assert entry["strength"] == 1.0
    assert entry["lastReview"][:19] == entry["createdAt"][:19]  # confirmed when stored
    assert entry["sessionId"] is None and entry["taskId"] is None
    assert "vector" not in entry
    with_vector = body(tenant_a.client.post(BATCH, {"ids": [str(first.pk)],
                                                    "includeVector": True}, format="json"))
    assert len(with_vector["entries"][0]["vector"]) == 384


@pytest.mark.django_db
def test_another_tenants_id_answers_like_a_missing_one(tenant_a, tenant_b, l1) -> None:
    foreign = tenant_b.add("Globex secret", identifiers={"userId": "u1"})
    theirs = body(tenant_a.client.post(BATCH, {"ids": [str(foreign.pk)]}, format="json"))
    missing = body(tenant_a.client.post(BATCH, {"ids": [MISSING]}, format="json"))
    assert theirs == {"entries": [], "missing": [str(foreign.pk)]}
    assert missing == {"entries": [], "missing": [MISSING]}


@pytest.mark.django_db
def test_the_second_read_is_served_by_l1_without_reading_l2(tenant_a, l1) -> None:
    memory = tenant_a.add("Maria likes green tea")
    first = tenant_a.client.post(BATCH, {"ids": [str(memory.pk)]}, format="json")
    assert _tiers(first) == {"l1": 0, "l2": 1, "l3": 0}
    with CaptureQueriesContext(connection) as queries:
        second = tenant_a.client.post(BATCH, {"ids": [str(memory.pk)]}, format="json")
    assert _tiers(second) == {"l1": 1, "l2": 0, "l3": 0}
    assert body(second)["entries"] == body(first)["entries"]
    reads = [q["sql"] for q in queries.captured_queries
             if q["sql"].lstrip().upper().startswith("SELECT") and "memories_memory" in q["sql"]]
    assert reads == []


@pytest.mark.django_db
def test_a_restricted_key_reads_from_l2_within_its_restrictions(tenant_a, l1) -> None:
    mine = tenant_a.add("Pinned user fact", identifiers={"userId": "u1"})
    other = tenant_a.add("Another user's fact", identifiers={"userId": "u2"})
    tenant_a.client.post(BATCH, {"ids": [str(mine.pk), str(other.pk)]}, format="json")
    _, client = new_key(tenant_a, pinned_identifiers={"userId": "u1"})
    response = client.post(BATCH, {"ids": [str(mine.pk), str(other.pk)]}, format="json")
    assert response.status_code == 200, response.content
    assert _tiers(response)["l1"] == 0
    assert [e["id"] for e in body(response)["entries"]] == [str(mine.pk)]
    assert body(response)["missing"] == [str(other.pk)]


@pytest.mark.django_db
@pytest.mark.parametrize("payload", [
    {}, {"ids": []}, {"ids": "abc"}, {"ids": [None]}, {"ids": [1, 2]}, {"ids": [""]},
    {"ids": [MISSING] * 101}, {"ids": [MISSING], "includeVector": "perhaps"}, []])
def test_bad_batch_get_input_gets_the_envelope(tenant_a, payload: Any) -> None:
    response = tenant_a.client.post(BATCH, payload, format="json")
    assert_error(response, 400, "INVALID_INPUT")


# --- invalidation in every process ----------------------------------------------------------

def _committed_memory(tenant: Any, text: str) -> str:
    return str(tenant.add(text).pk)


def _owner_update(sql: str, params: list[Any]) -> None:
    """A write by another process: its own connection, as the owner role."""
    params_conn = connections["owner"].get_connection_params()
    with psycopg.connect(**params_conn, autocommit=True) as conn:
        conn.execute(sql, params)


def _content(tenant: Any, memory_id: str) -> tuple[str | None, dict[str, int]]:
    response = tenant.client.post(BATCH, {"ids": [memory_id]}, format="json")
    entries = body(response)["entries"]
    return (entries[0]["content"] if entries else None), _tiers(response)


def _eventually(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_a_commit_in_another_process_invalidates_this_processs_entry(owner_flushes, l1
                                                                      ) -> None:
    from tests.conftest import make_tenant

    tenant = make_tenant("Tiers")
    memory_id = _committed_memory(tenant, "Maria likes green tea")
    _content(tenant, memory_id)
    assert _content(tenant, memory_id) == ("Maria likes green tea",
                                           {"l1": 1, "l2": 0, "l3": 0})
    for drink in ("black coffee", "mint tea", "hot chocolate"):
        _owner_update("UPDATE memories_memory SET content = %s, version = version + 1 "
                      "WHERE id = %s", [f"Maria likes {drink}", memory_id])
        # dropped as the notification arrives (well before the next request), not in batches
        assert _eventually(lambda: not l1.get_many(tenant.tenant.id, [memory_id]), timeout=0.5)
        assert _content(tenant, memory_id) == (f"Maria likes {drink}",
                                               {"l1": 0, "l2": 1, "l3": 0})
    _owner_update("DELETE FROM memories_memory WHERE id = %s", [memory_id])
    assert _eventually(lambda: _content(tenant, memory_id)[0] is None)


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_a_failed_write_never_touches_l1(owner_flushes, l1) -> None:
    from tests.conftest import make_tenant

    tenant = make_tenant("Tiers")
    memory_id = _committed_memory(tenant, "Maria likes green tea")
    _content(tenant, memory_id)
    generation = l1.generation()
    with pytest.raises(RuntimeError), tenant_scope(tenant.ctx), transaction.atomic():
        from memories.models import Memory

        Memory.objects.filter(pk=memory_id).update(content="never committed")
        raise RuntimeError("the write fails after the update")
    time.sleep(0.5)  # a notification, had there been one, would have arrived
    assert l1.generation() == generation
    assert _content(tenant, memory_id) == ("Maria likes green tea",
                                           {"l1": 1, "l2": 0, "l3": 0})


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_an_update_through_the_api_is_seen_at_once(owner_flushes, l1) -> None:
    from tests.conftest import make_tenant

    tenant = make_tenant("Tiers")
    memory_id = _committed_memory(tenant, "Maria likes green tea")
    _content(tenant, memory_id)
    response = tenant.client.patch(f"/api/v1/memories/{memory_id}",
                                   {"content": "Maria likes black coffee"}, format="json")
    assert response.status_code == 200, response.content
    assert _content(tenant, memory_id)[0] == "Maria likes black coffee"
