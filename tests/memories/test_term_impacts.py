"""The keyword postings (``memories_termimpact``): kept by PostgreSQL as memories change,
isolated per tenant, and read by BM25 when one selective term holds too many memories."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import TermImpact
from memories.retrieval import keyword, keyword_stats
from memories.retrieval.keyword import champion_term, scope_hash
from memories.retrieval.keyword_stats import PartitionStats
from memories.retrieval.partition import DOCUMENT_LEXEME, partition_lexeme
from memories.services.deletion import memory_delete, memory_erase_by_identifiers
from memories.services.memory import MemoryInput, memory_bulk_add, memory_update
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers
from tests.retrieval_helpers import searched

pytestmark = pytest.mark.django_db

USER = LayerIdentifiers(userId="u1")


def postings(tenant: Any, memory_id: Any) -> dict[str, TermImpact]:
    """The memory's term postings (its document posting aside)."""
    with tenant_scope(tenant.ctx):
        return {p.lexeme: p for p in TermImpact.objects.filter(memory_id=memory_id)
                .exclude(lexeme=DOCUMENT_LEXEME)}


def test_adding_a_memory_writes_one_posting_per_lexeme_with_its_scope_and_impact(
        tenant_a) -> None:
    memory = tenant_a.add("Melanie paints sunsets and paints lakes")
    rows = postings(tenant_a, memory.pk)
    assert set(rows) == {"melani", "paint", "sunset", "lake"}
    lexeme = partition_lexeme(tenant_a.ctx.tenant_id, Layer.USER, USER)
    assert {p.scope for p in rows.values()} == {scope_hash(lexeme)}
    # tf 2 for "paint", 4 lexemes: 2 / (2 + 1.2 * (0.25 + 0.75 * 4 / 30))
    assert rows["paint"].impact == pytest.approx(2 / (2 + 1.2 * (0.25 + 0.75 * 4 / 30)))
    assert rows["paint"].impact > rows["lake"].impact
    with tenant_scope(tenant_a.ctx):  # and its document posting: its length, 4 lexemes
        document = TermImpact.objects.get(memory_id=memory.pk, lexeme=DOCUMENT_LEXEME)
    assert document.impact == 4.0 and document.scope == scope_hash(lexeme)


def test_one_bulk_insert_writes_the_postings_of_every_memory_in_one_statement(
        tenant_a) -> None:
    texts = ["Melanie paints sunsets", "Caroline paints lakes", "Jon teaches dance"]
    with tenant_scope(tenant_a.ctx), CaptureQueriesContext(connection) as queries:
        added = memory_bulk_add(tenant_a.ctx, items=[
            MemoryInput(content=text, layer="user", identifiers=USER) for text in texts])
    inserts = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith('INSERT INTO "memories_memory"')]
    assert len(inserts) == 1  # the statement-level trigger saw all three rows at once
    expected = [{"melani", "paint", "sunset"}, {"carolin", "paint", "lake"},
                {"jon", "teach", "danc"}]
    for result, lexemes in zip(added, expected, strict=True):
        rows = postings(tenant_a, result.memory.pk)
        assert set(rows) == lexemes
        assert {p.tenant_id for p in rows.values()} == {tenant_a.ctx.tenant_id}


def test_scope_hash_matches_the_sql_function_for_every_sign() -> None:
    for lexeme in ("s" + "0" * 64, "s" + "f" * 64, "s7fffffffffffffff" + "a" * 48,
                   "s8000000000000000" + "b" * 48):
        with connection.cursor() as cursor:
            cursor.execute("SELECT memory_scope_hash(array_to_tsvector(ARRAY[%s]))", [lexeme])
            assert cursor.fetchone()[0] == scope_hash(lexeme)
    assert scope_hash("s" + "f" * 64) == -1


def test_new_content_replaces_the_postings_and_a_hard_delete_removes_them(tenant_a) -> None:
    memory = tenant_a.add("Gina opened an online clothing store")
    with tenant_scope(tenant_a.ctx):
        memory_update(tenant_a.ctx, memory_id=memory.pk, content="Jon teaches dance classes")
    assert set(postings(tenant_a, memory.pk)) == {"jon", "teach", "danc", "class"}
    with tenant_scope(tenant_a.ctx):
        memory_delete(tenant_a.ctx, memory_id=memory.pk, hard=True)
    assert postings(tenant_a, memory.pk) == {}


def test_erasing_a_data_subject_erases_the_postings_of_its_memories(tenant_a) -> None:
    kept = tenant_a.add("Acme ships on Fridays", identifiers={"userId": "u2"})
    erased = tenant_a.add("Ada lives in Lisbon")
    with tenant_scope(tenant_a.ctx):
        assert memory_erase_by_identifiers(tenant_a.ctx, identifiers={"userId": "u1"}) == 1
    assert postings(tenant_a, erased.pk) == {}
    assert set(postings(tenant_a, kept.pk)) == {"acm", "ship", "friday"}


def test_counting_a_retrieval_leaves_the_postings_untouched(tenant_a) -> None:
    memory = tenant_a.add("Caroline went camping in July")
    with tenant_scope(tenant_a.ctx), connection.cursor() as cursor:
        cursor.execute("SELECT lexeme, xmin::text FROM memories_termimpact WHERE memory_id = %s",
                       [memory.pk])
        before = sorted(cursor.fetchall())
    assert searched(tenant_a, "camping", mode="keyword")["results"]
    with tenant_scope(tenant_a.ctx), connection.cursor() as cursor:
        cursor.execute("SELECT reference_count FROM memories_memory WHERE id = %s", [memory.pk])
        assert cursor.fetchone()[0] == 1
        cursor.execute("SELECT lexeme, xmin::text FROM memories_termimpact WHERE memory_id = %s",
                       [memory.pk])
        assert sorted(cursor.fetchall()) == before


def test_another_tenant_reads_none_of_the_postings(tenant_a, tenant_b) -> None:
    memory = tenant_a.add("Acme migrates to PostgreSQL")
    assert postings(tenant_a, memory.pk)
    assert postings(tenant_b, memory.pk) == {}
    with tenant_scope(tenant_b.ctx), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memories_termimpact WHERE memory_id = %s",
                       [memory.pk])
        assert cursor.fetchone()[0] == 0


def stats(size: int, avg_length: float = 30.0, **df: int) -> PartitionStats:
    return PartitionStats(size=size, avg_length=avg_length, df=dict(df))


def test_the_champion_term_is_the_rarest_when_no_other_term_is_uncommon() -> None:
    over = stats(100_000, paint=12_000, melani=55_000)
    assert champion_term(over, ["melani", "paint"]) == "paint"
    assert champion_term(stats(100_000, gina=55_000, jon=58_000), ["jon", "gina"]) == "gina"
    # Under the cap BM25 is exact; two uncommon terms narrow by pairs instead.
    assert champion_term(stats(100_000, paint=900, melani=55_000), ["paint", "melani"]) is None
    assert champion_term(stats(100_000, paint=12_000, art=9_000), ["paint", "art"]) is None
    # Impacts assume ~30 lexemes per memory: far longer or shorter scopes are not ranked by them.
    assert champion_term(stats(100_000, 200.0, paint=12_000), ["paint"]) is None


@pytest.fixture
def tiny_cap(monkeypatch: Any) -> None:
    monkeypatch.setattr(keyword, "MAX_KEYWORD_CANDIDATES", 2)
    monkeypatch.setattr(keyword, "ALWAYS_CANDIDATES", 1)
    monkeypatch.setattr(keyword, "COMMON_TERM_SHARE", 0.5)
    monkeypatch.setattr(keyword, "CHAMPIONS", 2)
    monkeypatch.setattr(keyword, "IMPACT_REFERENCE_LENGTH", 4.0)
    keyword_stats._stats.clear()


#: "pottery" in 3 of 8 memories (uncommon, over the cap of 2), "Melanie" in 6 (common).
POTTERY = [
    "Pottery",
    "Pottery pottery with Melanie",
    "Melanie bought pottery tools, clay, a wheel and glaze for the spring courses",
    "Melanie went hiking",
    "Melanie cooked dinner",
    "Melanie read a book",
    "Melanie visited Paris",
    "Caroline swam",
]


def reads_champions(sql: str) -> bool:
    """A term's best postings, read in impact order (not a count of its postings)."""
    return "memories_termimpact" in sql and '"impact" DESC' in sql


def keyword_contents(tenant: Any, query: str, **payload: Any) -> list[str]:
    data = searched(tenant, query, mode="keyword", **payload)
    return [r["memory"]["content"] for r in data["results"]]


def test_one_selective_term_over_the_cap_ranks_its_best_postings(tenant_a, tiny_cap,
                                                                 monkeypatch: Any) -> None:
    for content in POTTERY:
        tenant_a.add(content)
    with CaptureQueriesContext(connection) as queries:
        got = keyword_contents(tenant_a, "Melanie's pottery", limit=2)
    assert any(reads_champions(q["sql"]) for q in queries.captured_queries)
    monkeypatch.setattr(keyword, "CHAMPIONS", 1)  # fewer than limit: every holder is scored
    keyword_stats._stats.clear()
    with CaptureQueriesContext(connection) as queries:
        exact = keyword_contents(tenant_a, "Melanie's pottery", limit=2)
    assert not any(reads_champions(q["sql"]) for q in queries.captured_queries)
    assert got == exact == ["Pottery pottery with Melanie", "Pottery"]


def test_it_scores_every_holder_when_too_few_champions_pass_the_filters(
        tenant_a, tiny_cap, monkeypatch: Any) -> None:
    monkeypatch.setattr(keyword, "CHAMPIONS", 3)
    for content in ("Pottery", "Pottery pottery", "Pottery again", "Pottery today"):
        tenant_a.add(content)  # the best postings, none of them tagged
    market = ["Pottery market stall", "Pottery market prices", "Pottery market opening hours"]
    for content in market:
        tenant_a.add(content, metadata={"tags": ["market"]})
    with CaptureQueriesContext(connection) as queries:
        got = keyword_contents(tenant_a, "pottery", limit=3, filter={"tags": ["market"]})
    assert any(reads_champions(q["sql"]) for q in queries.captured_queries)
    assert sorted(got) == sorted(market)


def test_impacts_order_a_terms_postings_like_bm25_does() -> None:
    def bm25_factor(tf: float, dl: int, avg: float) -> float:
        return tf / (tf + 1.2 * (0.25 + 0.75 * dl / avg))
    pairs = [(1.0, 5), (1.0, 40), (2.0, 12), (0.35, 3), (3.0, 60)]
    with connection.cursor() as cursor:
        impacts = []
        for tf, dl in pairs:
            cursor.execute("SELECT memory_term_impact(%s, %s)", [tf, dl])
            impacts.append(cursor.fetchone()[0])
    expected = [bm25_factor(tf, dl, 30.0) for tf, dl in pairs]
    assert all(math.isclose(a, b) for a, b in zip(impacts, expected, strict=True))
