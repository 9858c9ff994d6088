"""BM25 statistics of a scope (``memories.retrieval.keyword_stats.partition_stats``): counted in
the request the first time, then cached; once ``STATS_TTL_SECONDS`` old they are counted again
off the request, however busy the scope, while searches go on with the old ones."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from memories.models import Memory
from memories.retrieval import keyword_stats
from memory_project.after_response import drain
from tenants.context import tenant_scope
from tests.retrieval_helpers import searched


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: Any) -> Iterator[_Clock]:
    """``keyword``'s clock, moved by hand; the statistics cache starts empty."""
    fake = _Clock()
    monkeypatch.setattr(keyword_stats.time, "monotonic", fake.monotonic)
    keyword_stats._stats.clear()
    yield fake
    keyword_stats._stats.clear()


def _stats(tenant: Any) -> keyword_stats.PartitionStats:
    with tenant_scope(tenant.ctx):
        return keyword_stats.partition_stats(Memory.objects.filter(layer="user"), ("kayak",))


@pytest.mark.django_db
def test_a_scope_searched_all_the_time_is_still_counted_again(tenant_a: Any,
                                                              clock: _Clock) -> None:
    for i in range(3):
        tenant_a.add(f"Kayak trip {i}")
    first = _stats(tenant_a)
    assert (first.size, first.df["kayak"]) == (3, 3)
    for i in range(2):
        tenant_a.add(f"Kayak lesson {i}")
    for _ in range(5):  # searched every minute: the statistics stay as they were counted
        clock.now += 60
        assert _stats(tenant_a) is first
        if clock.now - 1_000.0 >= keyword_stats.STATS_TTL_SECONDS:
            break
    # the search that found them due used the old ones and had them counted again
    assert (first.size, first.df["kayak"]) == (3, 3)
    fresh = _stats(tenant_a)
    assert (fresh.size, fresh.df["kayak"], fresh.counted_at) == (5, 5, clock.now)
    assert _stats(tenant_a) is fresh


@pytest.mark.django_db
def test_keyword_search_sees_the_counted_statistics(tenant_a: Any, clock: _Clock) -> None:
    tenant_a.add("Kayak trip on the lake")
    searched(tenant_a, "kayak", mode="keyword")
    (cached,) = keyword_stats._stats.values()
    assert cached.size == 1
    tenant_a.add("Kayak lesson with the kids")
    clock.now += keyword_stats.STATS_TTL_SECONDS
    assert len(searched(tenant_a, "kayak", mode="keyword")["results"]) == 2
    (counted,) = keyword_stats._stats.values()
    assert (counted.size, counted.df["kayak"]) == (2, 2)


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_the_recount_runs_on_the_background_thread_in_the_tenants_scope(
        tenant_a: Any, tenant_b: Any, clock: _Clock, settings: Any, owner_flushes: None,
        monkeypatch: Any) -> None:
    settings.AFTER_RESPONSE_IN_BACKGROUND = True
    tenant_a.add("Kayak trip")
    tenant_b.add("Kayak trip of another tenant")
    first = _stats(tenant_a)
    tenant_a.add("Kayak lesson")
    counted_on: list[str] = []
    counted = keyword_stats._counted

    def recording(base: Any, postings: int | None = None) -> keyword_stats.PartitionStats:
        counted_on.append(threading.current_thread().name)
        return counted(base, postings)

    monkeypatch.setattr(keyword_stats, "_counted", recording)
    clock.now += keyword_stats.STATS_TTL_SECONDS
    assert _stats(tenant_a) is first  # answered with the old statistics, not waiting
    drain()
    assert len(counted_on) == 1 and counted_on[0].startswith("after-response")
    fresh = _stats(tenant_a)
    assert (fresh.size, fresh.df["kayak"]) == (2, 2)  # tenant B's memory is not counted


def test_a_count_that_took_long_is_repeated_less_often() -> None:
    ttl = keyword_stats.STATS_TTL_SECONDS
    quick = keyword_stats.PartitionStats(size=10, avg_length=5.0, counted_at=0.0, cost=0.01)
    slow = keyword_stats.PartitionStats(size=10**6, avg_length=5.0, counted_at=0.0, cost=5.0)
    assert not quick.due(ttl - 1) and quick.due(ttl)
    stretched = slow.cost / keyword_stats.RECOUNT_BUDGET  # 500 s: 1% of one core
    assert not slow.due(ttl) and not slow.due(stretched - 1) and slow.due(stretched)
    slow.refreshing = True
    assert not slow.due(stretched * 10)  # one recount at a time
