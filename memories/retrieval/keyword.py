"""Keyword relevance: Okapi BM25 over PostgreSQL full-text vectors.

BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009;
k1 = 1.2, b = 0.75) over the generated ``search_vector`` (English stemming, so "running"
matches "runs"). Candidates are the memories of a layer scope matching any of the query's
selective terms (GIN index). Term frequencies come from the tsvector positions, where
``context`` positions (weight D) count 0.35 of a ``content`` one, kept per memory in the
generated ``term_frequencies`` column. The statistics (size, mean length, document
frequencies) are the layer scope's, counted from its postings whatever filter narrows the
candidates, and cached (``memories.retrieval.keyword_stats``).

Callers pass a queryset narrowed by ``partition.keyword_partition``: the GIN index
``mem_keyword_gin`` covers ``search_vector`` and the row's ``scope_key`` lexeme, so "term AND
partition" is one index scan (figures: ``docs/performance.md``).

A query whose selective terms come down to one term held by thousands of the scope's memories
(on the 100k bench, "What has Melanie painted?": ``paint`` in 12.7k) ranks that term's best
postings instead (``memories_termimpact``, :func:`bm25`).

``ts_rank`` has no inverse document frequency; on LoCoMo, BM25 lifts keyword recall@10 from
0.52 to 0.62, and indexing each turn's neighbours as context to 0.72 (``eval_locomo``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from functools import partial
from itertools import combinations
from typing import Any, TypeVar

import numpy as np
from cachetools import LRUCache
from django.db import connection
from django.db.models import QuerySet

from memories.models import Memory, TermImpact
from memories.retrieval.bm25_sql import Terms, scored_rows, scores
from memories.retrieval.keyword_stats import PartitionStats, partition_stats, tsquery_or
from memories.retrieval.partition import LexemeQuery, scope_hash

T = TypeVar("T")
#: Baked into the SQL function ``memory_term_frequencies`` (migration 0006).
CONTEXT_WEIGHT = 0.35
#: Candidates come from the query's rarest terms first (the highest IDF), adding terms while
#: their document frequencies sum to at most this; the other terms still score candidates.
#: Below the cap, BM25 is exact; above it, only memories holding none of the rarer terms can
#: be missed, and they are the ones BM25 would rank low.
MAX_KEYWORD_CANDIDATES = 1000
#: A term in more than this share of the scope brings no candidates of its own once a rarer
#: term has (its IDF is small: at most ln(1 + 0.8/0.2) ≈ 1.6); it still scores them. On
#: LoCoMo this leaves recall@k unchanged and cuts keyword latency by a quarter.
COMMON_TERM_SHARE = 0.2
#: Up to this many candidates, every query term brings its memories (small scopes are exact).
ALWAYS_CANDIDATES = 200
#: Postings read for a query with one selective term over the cap (see :func:`champion_term`).
#: On the 200 bench questions of the 100k tenant, the 12 such questions agreed with BM25 over
#: every memory holding the term on 0.97 of their top 10 with 200 postings, on all of them
#: with 400.
CHAMPIONS = 400
#: The document length (lexemes) in a posting's impact, ``tf / (tf + k1·(1 − b + b·dl / L))``
#: (baked into ``memory_term_impact``, migration 0012; LoCoMo turns with their neighbours
#: average 29). Impacts order a term's postings; a scope whose mean length is more than twice
#: as long or half as short is ranked from its memories instead.
IMPACT_REFERENCE_LENGTH = 30.0

_lexemes: LRUCache[str, tuple[str, ...]] = LRUCache(maxsize=10_000)
_lexemes_lock = threading.Lock()


def query_lexemes(query: str) -> tuple[str, ...]:
    """The query's English lexemes (stemmed, stop words removed), as PostgreSQL makes them."""
    with _lexemes_lock:
        cached = _lexemes.get(query)
    if cached is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [query])
            cached = tuple(cursor.fetchone()[0] or ())
        with _lexemes_lock:
            _lexemes[query] = cached
    return cached


def _idf(size: int, df: int) -> float:
    """BM25's IDF, ``ln(1 + (N − df + 0.5) / (df + 0.5))`` (never negative: a cached ``N``
    may be older than a re-counted ``df``)."""
    size = max(size, df)
    return math.log(1.0 + (size - df + 0.5) / (df + 0.5))


def candidate_queries(stats: PartitionStats, present: list[str]) -> list[str]:
    """Raw ``tsquery`` texts that select BM25 candidates, tried in order until one yields
    enough memories (the last one always stands).

    - The query's rarest terms OR-ed, added while their document frequencies sum to at most
      ``MAX_KEYWORD_CANDIDATES`` (at least ``ALWAYS_CANDIDATES``; a term in more than
      ``COMMON_TERM_SHARE`` of the scope only when nothing rarer is present). Below the cap
      this is exact BM25.
    - When even the rarest term alone is over the cap (a large scope, where a single term can
      match a tenth of the memories), first the memories holding at least three of the four
      rarest uncommon terms, then those holding at least two: the "AND before OR" of search
      engines. A memory holding fewer terms is ranked by their weights alone, and rarely
      reaches the top ``limit`` when enough memories hold more (how closely the top 10 agree
      with BM25 over the OR of the terms, and what pairs only cost: ``docs/performance.md``,
      "Keyword search").
    """
    ordered = sorted(present, key=lambda lex: stats.df[lex])
    selective: list[str] = []
    total = 0
    for lex in ordered:
        grown = total + stats.df[lex]
        if selective and grown > ALWAYS_CANDIDATES and (
                grown > MAX_KEYWORD_CANDIDATES or stats.df[lex] > COMMON_TERM_SHARE * stats.size):
            break
        selective.append(lex)
        total += stats.df[lex]
    queries = [tsquery_or(selective)]
    uncommon = [lex for lex in ordered if stats.df[lex] <= COMMON_TERM_SHARE * stats.size][:4]
    if total > MAX_KEYWORD_CANDIDATES:
        for size in (2, 3):  # tried triples first, then pairs, then the OR
            if len(uncommon) >= size:
                groups = [" & ".join(tsquery_or([lex]) for lex in group)
                          for group in combinations(uncommon, size)]
                queries.insert(0, " | ".join(f"({group})" for group in groups))
    return queries


def champion_term(stats: PartitionStats, present: list[str]) -> str | None:
    """The term whose best postings stand in for the candidates, or ``None``.

    Only when even the rarest term is over ``MAX_KEYWORD_CANDIDATES`` and at most one term is
    uncommon (no pair or triple of rare terms narrows the candidates): the rarest term.
    BM25 then scores exactly the ``CHAMPIONS`` memories with that term's highest impacts
    (the other terms included). A memory outside them reaches the top ``limit`` only through
    the other terms, all common (IDF at most ~1.6), or because the scope's mean length is
    not ``IMPACT_REFERENCE_LENGTH`` (it shifts the balance between a posting's term frequency
    and its memory's length).
    """
    ordered = sorted(present, key=lambda lex: stats.df[lex])
    if not ordered or stats.df[ordered[0]] <= MAX_KEYWORD_CANDIDATES:
        return None
    uncommon = [lex for lex in ordered if stats.df[lex] <= COMMON_TERM_SHARE * stats.size]
    if len(uncommon) > 1:
        return None
    if not IMPACT_REFERENCE_LENGTH / 2 <= stats.avg_length <= IMPACT_REFERENCE_LENGTH * 2:
        return None
    return ordered[0]


def bm25(base: QuerySet[Memory], query: str, limit: int, *, partition_lexeme: str | None = None
         ) -> list[tuple[Any, float]]:
    """``[(id, score)]`` of the best ``limit`` memories of ``base`` for ``query`` (BM25).

    Candidates: with ``partition_lexeme`` (the scope ``base`` is narrowed to) and a
    :func:`champion_term`, the ``CHAMPIONS`` best postings of that term, read by one
    index-only scan of ``termimpact_champions`` (instead of scoring every memory holding the
    term; figures: ``docs/performance.md``, "Keyword search"). When fewer than ``limit`` of
    them pass ``base``'s filters, when ``limit`` exceeds ``CHAMPIONS``, or otherwise: as
    :func:`candidate_queries` says.

    Statistics (size, mean length, document frequencies): with ``partition_lexeme``, the
    layer scope's, from its postings (``base``: searchable memories of that scope), however a
    metadata or scope filter narrows ``base``: a filter decides which memories compete, not
    how rare a term is, as in Lucene and Elasticsearch (IDF over the index: "What Is
    Relevance?", Elasticsearch: The Definitive Guide; figures: ``docs/performance.md``,
    "Keyword search"). Without it, ``base``'s own, counted from its memories."""
    return _best(base, query, limit, scores, partition_lexeme)


def bm25_rows(base: QuerySet[Memory], query: str, limit: int, vector: np.ndarray | None, *,
              partition_lexeme: str | None = None) -> list[Memory]:
    """The memories :func:`bm25` ranks, best first, read by the statement that scores them
    (``bm25_sql.scored_rows``): each with ``keyword_score`` and, with ``vector``,
    ``distance`` (cosine) set; search-only columns deferred."""
    return _best(base, query, limit, partial(scored_rows, vector=vector), partition_lexeme)


def _query_terms(base: QuerySet[Memory], query: str, postings: int | None
                 ) -> tuple[PartitionStats, Terms] | None:
    """The statistics of ``base`` (:func:`partition_stats`) and the query's terms that the
    scope holds, with their IDFs; ``None`` when it holds none of them."""
    lexemes = query_lexemes(query)
    if not lexemes:
        return None
    stats = partition_stats(base, lexemes, postings=postings)
    present = [lex for lex in lexemes if stats.df.get(lex)]
    if not present:
        return None
    return stats, Terms(present, [_idf(stats.size, stats.df[lex]) for lex in present],
                        stats.avg_length)


def _best(base: QuerySet[Memory], query: str, limit: int,
          score: Callable[[QuerySet[Memory], Terms, int], list[T]],
          partition_lexeme: str | None) -> list[T]:
    """:func:`bm25`'s candidates, scored by ``score`` (``bm25_sql.scores`` or
    ``scored_rows``)."""
    found = _query_terms(base, query, _postings(partition_lexeme))
    if found is None:
        return []
    stats, terms = found
    present = terms.lexemes
    champion = champion_term(stats, present) if partition_lexeme and limit <= CHAMPIONS else None
    if champion is not None and partition_lexeme is not None:
        best = TermImpact.objects.filter(scope=scope_hash(partition_lexeme), lexeme=champion) \
            .order_by("-impact").values("memory_id")[:CHAMPIONS]
        scored = score(base.filter(pk__in=best), terms, limit)
        if len(scored) >= limit:
            return scored
    queries = candidate_queries(stats, present)
    for index, raw in enumerate(queries):
        tsquery = LexemeQuery(raw)
        scored = score(base.filter(search_vector=tsquery), terms, limit)
        if len(scored) >= limit or index == len(queries) - 1:
            return scored
    return []


def _postings(partition_lexeme: str | None) -> int | None:
    """The ``scope_hash`` whose postings give the statistics of :func:`bm25`, or ``None``."""
    return scope_hash(partition_lexeme) if partition_lexeme else None


def bm25_of(base: QuerySet[Memory], query: str, ids: list[Any], *,
            partition_lexeme: str | None = None) -> dict[Any, float]:
    """``{id: BM25}`` of the memories ``ids`` of ``base`` for ``query`` (the same statistics
    as :func:`bm25` with the same ``partition_lexeme``, so the scores compare with its list;
    a memory holding no query term is absent). One query; used for the neighbours of hybrid
    search's candidates."""
    found = _query_terms(base, query, _postings(partition_lexeme)) if ids else None
    if found is None:
        return {}
    _, terms = found
    return {pk: score for pk, score in scores(base.filter(pk__in=ids), terms, len(ids))
            if score > 0}
