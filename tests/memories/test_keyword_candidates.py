"""How BM25 picks its candidates: exact OR of the rare terms below the cap; above it, memories
holding three uncommon terms first, then two, and the OR again when those are too few."""

from __future__ import annotations

from typing import Any

import pytest

from memories.retrieval import keyword, keyword_stats
from memories.retrieval.keyword import candidate_queries
from memories.retrieval.keyword_stats import PartitionStats
from tests.retrieval_helpers import searched


def stats(size: int, **df: int) -> PartitionStats:
    return PartitionStats(size=size, avg_length=10.0, df=dict(df))


def test_it_ors_the_rare_terms_while_their_frequencies_stay_under_the_cap() -> None:
    s = stats(100_000, zebra=40, lisbon=300, trip=500, the_=60_000)
    assert candidate_queries(s, ["the_", "trip", "zebra", "lisbon"]) == [
        "'zebra' | 'lisbon' | 'trip'"]


def test_it_tries_pairs_of_uncommon_terms_first_when_the_rarest_term_is_over_the_cap(
        ) -> None:
    s = stats(100_000, kid=11_000, like=16_000, melanie=55_000)
    assert candidate_queries(s, ["kid", "like", "melanie"]) == [
        "('kid' & 'like')",
        "'kid'",
    ]


def test_it_tries_triples_then_pairs_of_the_four_rarest_uncommon_terms() -> None:
    s = stats(100_000, a=2000, b=3000, c=4000, d=5000, e=6000, f=90_000)
    triples, pairs, anyone = candidate_queries(s, list("abcdef"))
    assert triples == ("('a' & 'b' & 'c') | ('a' & 'b' & 'd') | ('a' & 'c' & 'd') "
                       "| ('b' & 'c' & 'd')")
    assert pairs.count("&") == 6 and "'e'" not in pairs and "'f'" not in pairs
    assert anyone == "'a'"


def test_it_keeps_one_query_for_a_single_common_term() -> None:
    assert candidate_queries(stats(100_000, kid=11_000), ["kid"]) == ["'kid'"]


@pytest.fixture
def tiny_cap(monkeypatch: Any) -> None:
    monkeypatch.setattr(keyword, "MAX_KEYWORD_CANDIDATES", 2)
    monkeypatch.setattr(keyword, "ALWAYS_CANDIDATES", 1)
    monkeypatch.setattr(keyword, "COMMON_TERM_SHARE", 0.9)
    keyword_stats._stats.clear()


@pytest.mark.django_db
def test_it_ranks_memories_holding_both_terms_above_the_cap(tenant_a, tiny_cap) -> None:
    tenant_a.add("Pottery class on Monday with the kids")
    tenant_a.add("Pottery class notes")
    tenant_a.add("Pottery glaze colours")
    tenant_a.add("Evening class schedule")
    tenant_a.add("Yoga class schedule")
    data = searched(tenant_a, "pottery class", mode="keyword", limit=2)
    got = [r["memory"]["content"] for r in data["results"]]
    assert got == ["Pottery class notes", "Pottery class on Monday with the kids"]


@pytest.mark.django_db
def test_it_falls_back_to_any_term_when_too_few_hold_two(tenant_a, tiny_cap) -> None:
    tenant_a.add("Pottery class notes")
    tenant_a.add("Pottery glaze colours")
    tenant_a.add("Pottery wheel repair")
    tenant_a.add("Evening class schedule")
    tenant_a.add("Yoga class schedule")
    tenant_a.add("Class photos from the trip")
    data = searched(tenant_a, "pottery class", mode="keyword", limit=3)
    got = [r["memory"]["content"] for r in data["results"]]
    assert len(got) == 3 and got[0] == "Pottery class notes"


@pytest.mark.django_db
def test_it_keeps_term_frequencies_with_context_positions_at_their_weight(tenant_a) -> None:
    from memories.models import Memory
    from tenants.context import tenant_scope

    memory = tenant_a.add("Running runs", context="a run in the park")
    with tenant_scope(tenant_a.ctx):
        frequencies = Memory.objects.values_list("term_frequencies", flat=True).get(
            pk=memory.pk)
    assert frequencies["run"] == pytest.approx(2 + keyword.CONTEXT_WEIGHT)
    assert frequencies["park"] == pytest.approx(keyword.CONTEXT_WEIGHT)


@pytest.mark.django_db
def test_pairs_stand_when_too_few_memories_hold_three_terms(tenant_a, tiny_cap, monkeypatch
                                                           ) -> None:
    monkeypatch.setattr(keyword, "MAX_KEYWORD_CANDIDATES", 1)
    tenant_a.add("Pottery class glaze")
    tenant_a.add("Pottery class notes")
    tenant_a.add("Glaze class schedule")
    tenant_a.add("Pottery wheel repair")
    tenant_a.add("Evening yoga schedule")
    data = searched(tenant_a, "pottery class glaze", mode="keyword", limit=3)
    got = [r["memory"]["content"] for r in data["results"]]
    assert got[0] == "Pottery class glaze"
    assert set(got[1:]) == {"Pottery class notes", "Glaze class schedule"}
