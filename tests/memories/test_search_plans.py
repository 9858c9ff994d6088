"""Query plans of retrieval under row-level security: keyword search uses the GIN index,
semantic search the HNSW index, and a filtered HNSW scan never starves the top-k; a starved
scan is widened by the share of candidates that passed (``memories.retrieval.semantic.widened``)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from memories.embedding import embedders as embeddings
from memories.models import Memory
from memories.retrieval import semantic
from memories.retrieval.partition import partition_lexeme, resolve_identifiers
from memories.retrieval.search import SearchRequest, memory_search
from memories.retrieval.semantic import widened
from memories.services.memory import MemoryInput, memory_bulk_add
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers

# What the bundled MiniLM model understands is part of what these tests check.
pytestmark = [pytest.mark.django_db, pytest.mark.real_embedder]

USER = LayerIdentifiers.from_mapping({"userId": "u1"})


def add_many(tenant: Any, texts: list[str]) -> None:
    with tenant_scope(tenant.ctx):
        memory_bulk_add(tenant.ctx, items=[
            MemoryInput(content=t, layer="user", identifiers=USER) for t in texts])


def plan(sql: str, params: Any = (), *, no_sort: bool = False) -> str:
    """``EXPLAIN`` of ``sql`` with sequential scans (and with ``no_sort``, sorts) discouraged,
    so that an index the planner may use shows up (one it may not use never does)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        if no_sort:
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute("SET LOCAL enable_incremental_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_it_lets_keyword_candidates_use_the_gin_index_under_row_level_security(
        tenant_a) -> None:
    """Under RLS an index serves a condition only if its function is LEAKPROOF; the full-text
    match is the only indexable condition here, so the plan shows whether it may be."""
    add_many(tenant_a, ["The runner runs every morning", "Dr. Smith prescribed rest"])
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        shown = plan("SELECT id FROM memories_memory "
                     "WHERE search_vector @@ to_tsquery('simple', 'run')")
    assert "mem_keyword_gin" in shown


def test_a_keyword_search_finds_its_scope_and_term_in_one_index_scan(tenant_a) -> None:
    """The ranking query ANDs the term with the layer scope's ``scope_key`` lexeme, and under
    RLS both can be conditions of the one GIN index scan (no intersection with the tenant's
    btree entries)."""
    add_many(tenant_a, ["The runner runs every morning", "Dr. Smith prescribed rest"])
    request = SearchRequest(query="running", identifiers=USER, mode="keyword",
                            layers=("user",))
    with transaction.atomic(), tenant_scope(tenant_a.ctx), \
            CaptureQueriesContext(connection) as captured:
        found = memory_search(tenant_a.ctx, request)
        ranking = [q["sql"] for q in captured.captured_queries if "c.tf0" in q["sql"]]
        lexeme = partition_lexeme(tenant_a.ctx.tenant_id, Layer.USER,
                              resolve_identifiers(tenant_a.ctx, USER))
        shown = plan("SELECT id FROM memories_memory "
                     "WHERE search_vector @@ to_tsquery('simple', 'run') "
                     "AND scope_key @@ to_tsquery('simple', %s)", [lexeme])
    assert [c.memory.content for c in found.results] == ["The runner runs every morning"]
    assert ranking and "scope_key" in ranking[0] and lexeme in ranking[0]
    index_scan = shown[shown.index("Bitmap Index Scan on mem_keyword_gin"):]
    condition = index_scan[index_scan.index("Index Cond"):].splitlines()[0]
    assert "search_vector @@" in condition and "scope_key @@" in condition


@pytest.mark.django_db(databases=["default", "owner"])
def test_scope_key_keeps_no_statistics(tenant_a) -> None:
    """Statistics on ``scope_key`` lead PostgreSQL to intersect the keyword index scan with
    the tenant's btree entries (migration ``memories.0011``)."""
    add_many(tenant_a, ["The runner runs every morning", "Dr. Smith prescribed rest"])
    with connections["owner"].cursor() as cursor:  # the owner may ANALYZE
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("SELECT attstattarget FROM pg_attribute WHERE attrelid = "
                       "'memories_memory'::regclass AND attname = 'scope_key'")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'memories_memory' "
                       "AND attname = 'scope_key'")
        assert cursor.fetchone()[0] == 0


def test_it_orders_a_large_scope_by_the_hnsw_index_without_a_sort(tenant_a, settings) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1  # every scope counts as large
    add_many(tenant_a, [f"Garden note {i} about tomatoes" for i in range(12)])
    request = SearchRequest(query="tomatoes", identifiers=USER, mode="semantic",
                            threshold=0.0, layers=("user",))
    with transaction.atomic(), tenant_scope(tenant_a.ctx), \
            CaptureQueriesContext(connection) as captured:
        memory_search(tenant_a.ctx, request)
        ranking = [q["sql"] for q in captured.captured_queries
                   if "<=>" in q["sql"] and "ORDER BY" in q["sql"]]
        assert ranking, "no semantic ranking query ran"
        shown = plan(ranking[0], no_sort=True)
    assert "Index Scan using mem_embedding_hnsw" in shown
    assert "Sort" not in shown


def exact_top(tenant: Any, query: str, limit: int) -> list[str]:
    vector = embeddings.get_embedder().encode([query])[0]
    with tenant_scope(tenant.ctx):
        rows = list(Memory.objects.filter(layer="user").values_list("content", "embedding"))
    scored = sorted(rows, key=lambda r: -float(np.dot(vector, r[1]) / np.linalg.norm(r[1])))
    return [content for content, _ in scored[:limit]]


def test_it_never_starves_the_top_k_when_other_tenants_fill_the_index(
        tenant_a, tenant_b, settings) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1  # force the HNSW path
    settings.MEMORY_HNSW_EF_SEARCH = 1
    settings.MEMORY_HNSW_EF_SEARCH_MAX = 1  # ef_search = 2 × limit: too few for tenant A
    add_many(tenant_b, [f"Tomato harvest log entry {i} from the greenhouse" for i in range(120)])
    add_many(tenant_a, [f"Tomato plant {i} needs water" for i in range(8)]
             + ["The quarterly budget is due", "Dentist on Friday", "Bike tyre is flat",
                "Buy oat milk"])
    request = SearchRequest(query="tomato greenhouse", identifiers=USER, mode="semantic",
                            threshold=0.0, layers=("user",), limit=10)
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        with connection.cursor() as cursor:  # a tiny table: make the planner walk the graph
            cursor.execute("SET LOCAL enable_sort = off")
        found = memory_search(tenant_a.ctx, request)
    got = [c.memory.content for c in found.results]
    assert len(got) == 10
    assert got == exact_top(tenant_a, "tomato greenhouse", 10)


def test_it_asks_for_the_candidates_the_share_that_passed_calls_for() -> None:
    # 5 of 100 candidates passed: 1.5 · 10 · 100 / 5 = 300 should hold 10 of them.
    assert widened(100, 5, 10, 1000) == 300
    assert widened(100, 1, 10, 1000) == 1000  # capped at the widest
    assert widened(100, 0, 10, 1000) == 1000  # nothing passed: no share to go by
    assert widened(100, 9, 10, 1000) == 200  # at least twice as wide
    assert widened(40, 3, 10, 1000) == 200


def test_a_small_tenant_in_a_shared_index_is_widened_step_by_step(
        tenant_a: Any, tenant_b: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1  # force the HNSW path
    settings.MEMORY_HNSW_EF_SEARCH = 40
    settings.MEMORY_HNSW_EF_SEARCH_MAX = 1000
    notes = [f"Tomato greenhouse note {i}: watered the seedlings" for i in range(300)]
    add_many(tenant_b, [n for i, n in enumerate(notes) if i % 5])
    add_many(tenant_a, notes[::5])  # a fifth of the index
    steps: list[tuple[int, int, int]] = []

    def recorded(ef_search: int, found: int, limit: int, widest: int) -> int:
        steps.append((ef_search, found, widened(ef_search, found, limit, widest)))
        return steps[-1][2]

    monkeypatch.setattr(semantic, "widened", recorded)
    request = SearchRequest(query="tomato greenhouse seedlings", identifiers=USER,
                            mode="semantic", threshold=0.0, layers=("user",), limit=20)
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        with connection.cursor() as cursor:  # a small table: make the planner walk the graph
            cursor.execute("SET LOCAL enable_sort = off")
        with CaptureQueriesContext(connection) as captured:
            found = memory_search(tenant_a.ctx, request)
        assert ef_search_now() == getattr(connection, semantic.SESSION_EF_SEARCH)  # restored
    set_to = [int(m.group(1)) for q in captured.captured_queries
              if (m := re.search(r"'hnsw\.ef_search', '(\d+)'", q["sql"]))]
    restored = set_to.pop()
    assert restored == getattr(connection, semantic.SESSION_EF_SEARCH)
    assert set_to[0] == 40 and steps, "a fifth of 40 candidates cannot fill 20 results"
    assert set_to[1:] == [next_ef for _, _, next_ef in steps]
    for ef_search, passed, next_ef in steps:
        assert next_ef == (1000 if passed == 0 else
                           min(1000, max(2 * ef_search, -(-30 * ef_search // passed))))
    assert set_to[-1] < 1000, "a fifth of the candidates passed: no need for the widest list"
    got = [c.memory.content for c in found.results]
    assert len(got) == 20
    assert set(got) <= set(notes[::5])
    assert len(set(got) & set(exact_top(tenant_a, "tomato greenhouse seedlings", 20))) >= 18


def ef_search_now() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search')::int")
        return int(cursor.fetchone()[0])


def test_a_connection_opens_at_the_configured_ef_search(settings) -> None:
    settings.MEMORY_HNSW_EF_SEARCH = 77
    opened = connections.create_connection("default")
    try:
        with opened.cursor() as cursor:
            cursor.execute("SELECT current_setting('hnsw.ef_search')::int")
            assert cursor.fetchone()[0] == 77 == getattr(opened, semantic.SESSION_EF_SEARCH)
    finally:
        opened.close()


def test_a_scan_at_the_connections_width_sets_nothing(tenant_a, settings) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1  # every scope counts as large
    add_many(tenant_a, [f"Garden note {i} about tomatoes" for i in range(12)])
    request = SearchRequest(query="tomatoes", identifiers=USER, mode="semantic",
                            threshold=0.0, layers=("user",))
    session = getattr(connection, semantic.SESSION_EF_SEARCH)
    assert session == settings.MEMORY_HNSW_EF_SEARCH
    with transaction.atomic(), tenant_scope(tenant_a.ctx), \
            CaptureQueriesContext(connection) as captured:
        found = memory_search(tenant_a.ctx, request)
        assert ef_search_now() == session
    assert len(found.results) == 10
    assert not [q for q in captured.captured_queries if "set_config('hnsw.ef_search'" in q["sql"]]


def test_it_lets_metadata_filters_use_the_gin_index_under_row_level_security(tenant_a) -> None:
    """Every metadata filter (tags, source type, custom equality) is a ``jsonb`` containment,
    which the metadata GIN index serves under RLS only if ``jsonb_contains`` is LEAKPROOF."""
    add_many(tenant_a, ["The runner runs every morning", "Dr. Smith prescribed rest"])
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        shown = plan("SELECT id FROM memories_memory WHERE metadata @> %s::jsonb",
                     ['{"tags": ["run"]}'])
    assert "mem_metadata_gin" in shown
