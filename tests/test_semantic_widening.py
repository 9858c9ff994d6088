"""A starved HNSW scan is widened by the share of candidates that passed the scope's filters
(``memories.semantic.widened``), not straight to the widest candidate list."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memories import semantic
from memories.search import SearchRequest, memory_search
from memories.semantic import widened
from tenants.context import tenant_scope
from tests.test_search_plans import USER, add_many, exact_top


def test_it_asks_for_the_candidates_the_share_that_passed_calls_for() -> None:
    # 5 of 100 candidates passed: 1.5 · 10 · 100 / 5 = 300 should hold 10 of them.
    assert widened(100, 5, 10, 1000) == 300
    assert widened(100, 1, 10, 1000) == 1000  # capped at the widest
    assert widened(100, 0, 10, 1000) == 1000  # nothing passed: no share to go by
    assert widened(100, 9, 10, 1000) == 200  # at least twice as wide
    assert widened(40, 3, 10, 1000) == 200


@pytest.mark.django_db
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
    set_to = [int(m.group(1)) for q in captured.captured_queries
              if (m := re.search(r"'hnsw\.ef_search', '(\d+)'", q["sql"]))]
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
