"""GET /api/v1/memories: newest first, cursor pagination, its total count, and seed 001
metadata filters."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory
from memories.services.deletion import memory_archive, memory_delete, memory_restore
from memories.services.memory import MemoryInput, memory_bulk_add
from tenants.context import tenant_scope
from tenants.layers import LayerIdentifiers
from tests.helpers import assert_error, body

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"


def bulk(tenant: Any, contents: list[str], metadata: list[dict[str, Any]] | None = None,
         user: str = "u1") -> list[str]:
    """Add memories in order (ids are time-ordered) and return their ids."""
    metadata = metadata or [{} for _ in contents]
    items = [MemoryInput(content=c, layer="user", metadata=m,
                         identifiers=LayerIdentifiers(userId=user))
             for c, m in zip(contents, metadata, strict=True)]
    with tenant_scope(tenant.ctx):
        return [str(r.memory.pk) for r in memory_bulk_add(tenant.ctx, items=items)]


def listing(tenant: Any, **params: Any) -> dict[str, Any]:
    response = tenant.client.get(URL, {"layer": "user", "userId": "u1", **params})
    assert response.status_code == 200, response.content
    return body(response)


def contents(tenant: Any, **params: Any) -> set[str]:
    return {m["content"] for m in listing(tenant, **params)["memories"]}


# --- order and pagination ---------------------------------------------------------------

def test_it_lists_newest_first_within_the_layer_and_user(tenant_a) -> None:
    ids = bulk(tenant_a, ["first", "second", "third"])
    bulk(tenant_a, ["someone else's"], user="u2")
    tenant_a.add("session note", "session", identifiers={"userId": "u1", "sessionId": "s"})
    data = listing(tenant_a)
    assert [m["id"] for m in data["memories"]] == ids[::-1]
    assert data["totalCount"] == 3 and data["nextCursor"] is None


def test_it_walks_every_page_without_duplicates_or_gaps(tenant_a) -> None:
    ids = bulk(tenant_a, [f"memory {i}" for i in range(11)])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 4, **({"cursor": cursor} if cursor else {})}
        data = listing(tenant_a, **params)
        assert data["totalCount"] == 11
        assert len(data["memories"]) == (4 if data["nextCursor"] else 3)
        seen.extend(m["id"] for m in data["memories"])
        pages += 1
        cursor = data["nextCursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == ids[::-1]


def test_it_keeps_pages_stable_when_memories_are_added_meanwhile(tenant_a) -> None:
    ids = bulk(tenant_a, [f"old {i}" for i in range(5)])
    first = listing(tenant_a, limit=2)
    bulk(tenant_a, ["newer 1", "newer 2"])
    second = listing(tenant_a, limit=2, cursor=first["nextCursor"])
    assert [m["id"] for m in first["memories"] + second["memories"]] == ids[::-1][:4]
    assert second["totalCount"] == 7


def test_it_uses_a_default_page_size_of_50(tenant_a) -> None:
    bulk(tenant_a, [f"fact number {i}" for i in range(52)])
    data = listing(tenant_a)
    assert len(data["memories"]) == 50 and data["nextCursor"] and data["totalCount"] == 52
    assert len(listing(tenant_a, limit=100)["memories"]) == 52
    assert len(listing(tenant_a, limit=1)["memories"]) == 1


@pytest.mark.parametrize("limit", ["0", "101", str(10**9), "abc", "-1", "1.5", "", "1e3"])
def test_it_refuses_a_limit_out_of_range(tenant_a, limit: str) -> None:
    response = tenant_a.client.get(URL, {"layer": "user", "userId": "u1", "limit": limit})
    assert assert_error(response, 400, "INVALID_INPUT")["retryable"] is False


@pytest.mark.parametrize("cursor", ["!!!", "abc", "AAAA", "x" * 500, "%00"])
def test_it_refuses_a_cursor_it_did_not_issue(tenant_a, cursor: str) -> None:
    bulk(tenant_a, ["one"])
    response = tenant_a.client.get(URL, {"layer": "user", "userId": "u1", "cursor": cursor})
    assert_error(response, 400, "INVALID_INPUT")


def test_it_requires_the_layer_parameter(tenant_a) -> None:
    assert_error(tenant_a.client.get(URL, {"userId": "u1"}), 400, "INVALID_INPUT")


# --- filters ----------------------------------------------------------------------------

@pytest.fixture
def tagged(tenant_a) -> Any:
    bulk(
        tenant_a,
        ["alpha", "beta", "both", "none", "pointer", "tool"],
        [
            {"tags": ["a"], "source": {"type": "manual"}, "priority": 3, "score": 0.2,
             "topic": "We use PostgreSQL", "owner": {"team": "core"}},
            {"tags": ["b"], "source": {"type": "conversation"}, "priority": 1, "score": 0.5,
             "langs": ["py", "go"], "owner": {"team": "infra"}},
            {"tags": ["a", "b", "c"], "priority": 3, "score": 0.9, "topic": "postgres tuning"},
            {"score": "n/a", "priority": "3"},
            {"tags": ["c"], "knowledgePointer": {"sourceType": "adr", "sourceId": "adr-1",
                                                 "contentHash": "sha256:x",
                                                 "syncedAt": "2025-01-07T09:00:00Z"},
             "source": {"type": "knowledge_sync"}, "score": 1.5},
            {"source": {"type": "tool_result"}, "score": None, "flag": True},
        ],
    )
    return tenant_a


def test_it_filters_by_tags_with_or(tagged) -> None:
    assert contents(tagged, tags="a") == {"alpha", "both"}
    assert contents(tagged, tags="a,b") == {"alpha", "beta", "both"}
    assert contents(tagged, tags="b,c") == {"beta", "both", "pointer"}
    assert contents(tagged, tags="zzz") == set()
    assert listing(tagged, tags="a,b")["totalCount"] == 3


def test_it_filters_by_source_type(tagged) -> None:
    assert contents(tagged, sourceType="manual") == {"alpha"}
    assert contents(tagged, sourceType="tool_result") == {"tool"}
    assert contents(tagged, sourceType="import") == set()
    response = tagged.client.get(URL, {"layer": "user", "userId": "u1", "sourceType": "fax"})
    assert assert_error(response, 400, "INVALID_INPUT")["details"]["allowed"]


def test_it_filters_by_knowledge_pointer(tagged) -> None:
    assert contents(tagged, hasKnowledgePointer="true") == {"pointer"}
    assert contents(tagged, hasKnowledgePointer="false") == {
        "alpha", "beta", "both", "none", "tool"}
    response = tagged.client.get(URL, {"layer": "user", "userId": "u1",
                                       "hasKnowledgePointer": "maybe"})
    assert_error(response, 400, "INVALID_INPUT")


def test_it_filters_custom_fields_by_equality(tagged) -> None:
    assert contents(tagged, **{"custom.priority": "3"}) == {"alpha", "both"}
    assert contents(tagged, **{"custom.priority": "1"}) == {"beta"}
    assert contents(tagged, **{"custom.flag": "true"}) == {"tool"}
    assert contents(tagged, **{"custom.priority": "3", "tags": "b"}) == {"both"}


def test_it_filters_custom_fields_by_contains(tagged) -> None:
    assert contents(tagged, **{"custom.topic__contains": "postgres"}) == {"alpha", "both"}
    assert contents(tagged, **{"custom.langs__contains": "go"}) == {"beta"}
    assert contents(tagged, **{"custom.topic__contains": "mysql"}) == set()


def test_it_filters_custom_fields_by_range(tagged) -> None:
    assert contents(tagged, **{"custom.score__gte": "0.5"}) == {"beta", "both", "pointer"}
    assert contents(tagged, **{"custom.score__gt": "0.5"}) == {"both", "pointer"}
    assert contents(tagged, **{"custom.score__gte": "0.5", "custom.score__lt": "1"}) == {
        "beta", "both"}
    assert contents(tagged, **{"custom.score__lte": "0.2"}) == {"alpha"}


def test_it_compares_range_filters_only_with_values_of_the_same_type(tagged) -> None:
    """A string or null score is not "less than 0.9" (jsonb orders types, not values)."""
    assert contents(tagged, **{"custom.score__lt": "0.9"}) == {"alpha", "beta"}
    assert contents(tagged, **{"custom.priority__gte": "2"}) == {"alpha", "both"}


def test_it_filters_nested_custom_fields(tagged) -> None:
    assert contents(tagged, **{"custom.owner.team": "core"}) == {"alpha"}
    assert contents(tagged, **{"custom.owner.team__contains": "inf"}) == {"beta"}
    assert contents(tagged, **{"custom.owner.team": "nobody"}) == set()


@pytest.mark.parametrize(
    "params",
    [
        {"custom.score__between": "1"},
        {"custom.score__": "1"},
        {"custom.": "1"},
        {"custom.a b": "1"},
        {"custom.a..b": "1"},
        {"custom.a.b.c.d.e.f": "1"},
        {"custom.$where": "1"},
        {"custom.score__gte": "true"},
        {"custom.x": "a\x00b"},
        {"tags": "a\x00"},
    ],
)
def test_it_refuses_bad_custom_filters(tagged, params: dict[str, str]) -> None:
    response = tagged.client.get(URL, {"layer": "user", "userId": "u1", **params})
    assert_error(response, 400, "INVALID_INPUT")


def test_it_caps_the_number_of_conditions(tagged) -> None:
    params = {f"custom.f{i}": "1" for i in range(21)}
    response = tagged.client.get(URL, {"layer": "user", "userId": "u1", **params})
    assert_error(response, 400, "INVALID_INPUT")


def test_its_total_count_is_the_scopes_searchable_memories_counted_from_the_postings(
        tenant_a, tenant_b) -> None:
    """Unfiltered, ``totalCount`` is the scope's document postings (one per active, unpruned
    memory), read without the memories; it follows archive, prune, restore and delete."""
    ids = bulk(tenant_a, [f"memory {i}" for i in range(5)])
    bulk(tenant_a, ["someone else's"], user="u2")
    bulk(tenant_b, ["another tenant's"])
    with CaptureQueriesContext(connection) as captured:
        assert listing(tenant_a)["totalCount"] == 5
    counts = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 1 and "memories_termimpact" in counts[0]
    with tenant_scope(tenant_a.ctx):
        memory_archive(tenant_a.ctx, memory_id=ids[0])
        Memory.objects.filter(pk=ids[1]).update(pruned_at=timezone.now())
        memory_delete(tenant_a.ctx, memory_id=ids[2])
    assert listing(tenant_a)["totalCount"] == 2 == len(listing(tenant_a)["memories"])
    with tenant_scope(tenant_a.ctx):
        memory_restore(tenant_a.ctx, memory_id=ids[0])
    assert listing(tenant_a)["totalCount"] == 3
    assert listing(tenant_a, tags="none")["totalCount"] == 0  # filtered: counted from rows
