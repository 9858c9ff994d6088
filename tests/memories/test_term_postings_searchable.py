"""Keyword postings exist for the memories search can return (active, not pruned; migration
``memories.0018``), so a layer scope's postings count its document frequencies: the same
counts as a scan of its memories, read from one index. They are the statistics of every
search of the scope, filtered or not."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory, TermImpact
from memories.retrieval import keyword, keyword_stats
from memories.retrieval.keyword import scope_hash
from memories.retrieval.partition import (
    DOCUMENT_LEXEME,
    layer_queryset,
    partition_is,
    partition_lexeme,
)
from memories.services.deletion import memory_archive, memory_delete, memory_restore
from memories.services.memory import memory_update
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers
from tests.retrieval_helpers import searched

pytestmark = pytest.mark.django_db

USER = LayerIdentifiers(userId="u1")


def lexemes_of(tenant: Any, memory: Memory) -> set[str]:
    with tenant_scope(tenant.ctx):
        return set(TermImpact.objects.filter(memory_id=memory.pk)
                   .exclude(lexeme=DOCUMENT_LEXEME).values_list("lexeme", flat=True))


def test_a_memory_search_cannot_return_has_no_postings_until_it_can(tenant_a: Any) -> None:
    deleted = tenant_a.add("Kayak trip to the lake")
    archived = tenant_a.add("Kayak lesson on Sunday")
    pruned = tenant_a.add("Kayak repair kit")
    with tenant_scope(tenant_a.ctx):
        memory_delete(tenant_a.ctx, memory_id=deleted.pk)
        memory_archive(tenant_a.ctx, memory_id=archived.pk)
        Memory.objects.filter(pk=pruned.pk).update(pruned_at=timezone.now())
    assert [lexemes_of(tenant_a, m) for m in (deleted, archived, pruned)] == [set(), set(), set()]
    with tenant_scope(tenant_a.ctx):
        for memory in (deleted, archived, pruned):
            memory_restore(tenant_a.ctx, memory_id=memory.pk)
    assert lexemes_of(tenant_a, deleted) == {"kayak", "trip", "lake"}
    assert lexemes_of(tenant_a, archived) == {"kayak", "lesson", "sunday"}
    assert lexemes_of(tenant_a, pruned) == {"kayak", "repair", "kit"}


def test_postings_count_the_same_frequencies_as_the_memories(tenant_a: Any) -> None:
    for text in ("Kayak trip to the lake", "Kayak lesson at the lake", "Lake house",
                 "Kayak repair kit", "Sunday at the lake"):
        tenant_a.add(text)
    gone = tenant_a.add("Kayak and lake photos")
    with tenant_scope(tenant_a.ctx):
        memory_archive(tenant_a.ctx, memory_id=gone.pk)
        lexeme = partition_lexeme(tenant_a.ctx.tenant_id, Layer.USER, USER)
        base = layer_queryset(Layer.USER, USER).filter(partition_is(lexeme))
        sql, params = base.values("search_vector").query.sql_with_params()
        terms = ["kayak", "lake", "sunday", "photo", "absent"]
        scanned = keyword_stats._frequencies(sql, list(params), terms, None)
        counted = keyword_stats._frequencies(sql, list(params), terms, scope_hash(lexeme))
    assert scanned == counted == {"kayak": 3, "lake": 4, "sunday": 1, "photo": 0, "absent": 0}


def _frequency_queries(tenant: Any, **search: Any) -> list[str]:
    keyword_stats._stats.clear()
    with CaptureQueriesContext(connection) as captured:
        assert searched(tenant, "kayak lake", mode="keyword", **search)["results"]
    return [q["sql"] for q in captured.captured_queries  # the counts of document frequencies
            if "unnest" in q["sql"] and "count(*)" in q["sql"]]


def test_a_search_counts_from_the_postings_with_a_filter_too(tenant_a: Any) -> None:
    tenant_a.add("Kayak trip to the lake", metadata={"tags": ["trip"]})
    tenant_a.add("Lake house")
    for search in ({}, {"filter": {"tags": ["trip"]}}, {"scope": "s1"}):
        (counted,) = _frequency_queries(tenant_a, **search)
        assert "memories_termimpact" in counted and "search_vector" not in counted, search


def test_a_filter_decides_which_memories_compete_not_their_scores(tenant_a: Any) -> None:
    """BM25 statistics are the layer scope's however a filter narrows the candidates (as in
    Lucene and Elasticsearch): a memory scores the same with and without the filter."""
    trip = tenant_a.add("Kayak trip to the lake", metadata={"tags": ["trip"]})
    tenant_a.add("Kayak lesson", metadata={"tags": ["trip"]})
    for text in ("Lake house", "Lake view", "Kayak repair kit", "Sunday at the lake"):
        tenant_a.add(text)
    keyword_stats._stats.clear()
    with tenant_scope(tenant_a.ctx):
        lexeme = partition_lexeme(tenant_a.ctx.tenant_id, Layer.USER, USER)
        base = layer_queryset(Layer.USER, USER).filter(partition_is(lexeme))
        whole = dict(keyword.bm25(base, "kayak lake", 10, partition_lexeme=lexeme))
        tagged = base.filter(metadata__contains={"tags": ["trip"]})
        filtered = dict(keyword.bm25(tagged, "kayak lake", 10, partition_lexeme=lexeme))
    assert len(whole) == 6 and len(filtered) == 2
    assert filtered == {pk: whole[pk] for pk in filtered}
    assert filtered[trip.pk] == max(whole.values())


def test_a_hyphenated_compound_is_counted_and_found(tenant_a: Any) -> None:
    tenant_a.add("Self-care matters to Caroline")
    tenant_a.add("Caroline cares for her car")
    with tenant_scope(tenant_a.ctx):
        lexeme = partition_lexeme(tenant_a.ctx.tenant_id, Layer.USER, USER)
        base = layer_queryset(Layer.USER, USER).filter(partition_is(lexeme))
        sql, params = base.values("search_vector").query.sql_with_params()
        terms = ["self-car", "car"]
        assert keyword_stats._frequencies(sql, list(params), terms, scope_hash(lexeme)) == \
            keyword_stats._frequencies(sql, list(params), terms, None) == {"self-car": 1, "car": 1}
    found = searched(tenant_a, "self-care", mode="keyword")["results"]
    assert [r["memory"]["content"] for r in found] == [
        "Self-care matters to Caroline", "Caroline cares for her car"]  # "care" alone, lower


def _size_and_length(tenant: Any) -> tuple[tuple[int, float], tuple[int, float]]:
    """The user scope's size and mean length from its memories and from its document
    postings."""
    with tenant_scope(tenant.ctx):
        lexeme = partition_lexeme(tenant.ctx.tenant_id, Layer.USER, USER)
        base = layer_queryset(Layer.USER, USER).filter(partition_is(lexeme))
        read = keyword_stats._counted(base)
        posted = keyword_stats._counted(base, scope_hash(lexeme))
    return (read.size, round(read.avg_length, 9)), (posted.size, round(posted.avg_length, 9))


def test_the_document_postings_count_the_scopes_size_and_mean_length(tenant_a: Any,
                                                                    tenant_b: Any) -> None:
    kept = tenant_a.add("Kayak trip to the lake with Caroline and Melanie")
    archived = tenant_a.add("Lake house")
    pruned = tenant_a.add("Sunday brunch at the lake house by the water")
    tenant_a.add("the and of")  # stop words only: a memory of length 0
    tenant_b.add("Another tenant's lake memory with many more words in it")
    read, posted = _size_and_length(tenant_a)
    assert read == posted and read[0] == 4
    with tenant_scope(tenant_a.ctx):
        memory_archive(tenant_a.ctx, memory_id=archived.pk)
        Memory.objects.filter(pk=pruned.pk).update(pruned_at=timezone.now())
        memory_update(tenant_a.ctx, memory_id=kept.pk, content="Kayak trip")
    read, posted = _size_and_length(tenant_a)
    assert read == posted == (2, 1.0)  # "kayak trip" (2 lexemes) and the stop words (0)
    with tenant_scope(tenant_a.ctx):
        memory_restore(tenant_a.ctx, memory_id=archived.pk)
        memory_delete(tenant_a.ctx, memory_id=kept.pk)
    read, posted = _size_and_length(tenant_a)
    assert read == posted == (2, 1.0)  # "lake house" (2) and the stop words (0)


def test_a_search_reads_size_and_length_from_the_postings(tenant_a: Any) -> None:
    tenant_a.add("Kayak trip to the lake", metadata={"tags": ["trip"]})
    tenant_a.add("Lake house")

    def aggregates(**search: Any) -> list[str]:
        keyword_stats._stats.clear()
        with CaptureQueriesContext(connection) as captured:
            assert searched(tenant_a, "kayak lake", mode="keyword", **search)["results"]
        return [q["sql"] for q in captured.captured_queries
                if "AVG(" in q["sql"].upper() and "memories_" in q["sql"]]

    for search in ({}, {"filter": {"tags": ["trip"]}}):
        (counted,) = aggregates(**search)
        assert "memories_termimpact" in counted and "LENGTH(" not in counted.upper(), search
