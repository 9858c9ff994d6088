"""BM25 statistics of a layer scope (``memories.retrieval.keyword``): its size, mean
document length and the document frequencies of the terms asked for.

With the layer scope's postings (``memories_termimpact``, migrations 0012, 0018 and 0019) they
are index-only counts, however a metadata or scope filter narrows the candidates; without
them, counts over the memories themselves. They are cached per process and, once two
minutes old, counted again on the background thread while searches go on with the old ones
(:func:`partition_stats`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from cachetools import LRUCache
from django.db import connection
from django.db.models import Avg, Count, QuerySet
from django.db.models.functions import Length

from memories.models import Memory
from memories.retrieval.partition import DOCUMENT_LEXEME
from memory_project.after_response import in_background
from tenants.context import current_context
from tenants.entry import run_in_scope

#: Cached statistics are this old (seconds) before a search hands their recount to the
#: background thread.
STATS_TTL_SECONDS = 120
#: A scope's statistics are counted again once ``STATS_TTL_SECONDS`` old, or later when their
#: last count took longer than this share of that time (a count of a 100k-memory scope
#: reading every row and its terms' postings takes seconds; a large scope's statistics move
#: slowly): the recounts of a scope take at most 1% of one core.
RECOUNT_BUDGET = 0.01


@dataclass
class PartitionStats:
    """BM25 statistics of one layer scope: size, mean tsvector length, document frequencies;
    ``counted_at``: when size and mean length were counted (``time.monotonic()``); ``used``:
    the terms asked for since, whose frequencies a refresh counts again."""

    size: int
    avg_length: float
    df: dict[str, int] = field(default_factory=dict)
    counted_at: float = field(default_factory=time.monotonic)
    used: set[str] = field(default_factory=set)
    refreshing: bool = False
    #: Seconds the last count took (size and mean length; a refresh's frequencies too).
    cost: float = 0.0

    def due(self, now: float) -> bool:
        """Whether a refresh should start: old enough (``STATS_TTL_SECONDS``, stretched by
        ``RECOUNT_BUDGET``) and none running."""
        wait = max(STATS_TTL_SECONDS, self.cost / RECOUNT_BUDGET)
        return not self.refreshing and now - self.counted_at >= wait


_stats: LRUCache[tuple[str, tuple[str, ...]], PartitionStats] = LRUCache(maxsize=2048)
_cache_lock = threading.Lock()

_DF_SQL = """
SELECT l.lexeme, (SELECT count(*) FROM ({scope}) s WHERE s.search_vector @@ l.query)
FROM unnest(%s::text[], %s::tsquery[]) AS l(lexeme, query)
"""


def tsquery_or(lexemes: list[str]) -> str:
    """``lexemes`` OR-ed in ``tsquery`` input syntax, each quoted (``partition.LexemeQuery``)."""
    return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'"
                      for lex in lexemes)


def _scope_key(base: QuerySet[Memory], postings: int | None
               ) -> tuple[tuple[str, tuple[str, ...]], str, list[Any]]:
    """The cache key of ``base``'s statistics and the SQL that counts them: with
    ``postings``, the layer scope's (its postings count them: no SQL of ``base`` compiled);
    otherwise ``base``'s own."""
    if postings is not None:
        return (f"postings:{postings}", ()), "", []
    sql, params = base.values("search_vector").query.sql_with_params()
    return (sql, tuple(map(str, params))), sql, list(params)


_POSTINGS_SIZE_SQL = """
SELECT count(*), avg(impact) FROM memories_termimpact WHERE scope = %s AND lexeme = %s
"""


def _counted(base: QuerySet[Memory], postings: int | None = None) -> PartitionStats:
    """Size and mean tsvector length of ``base``, counted now: with ``postings`` (as in
    :func:`_frequencies`), one index-only scan of the scope's document postings (migration
    ``memories.0019``: ~0.5 s for the 1M bench tenant); otherwise one statement reading every
    row of the scope (~0.24 s for 100k memories, 7 s for 1M, 49 s from disk)."""
    started = time.monotonic()
    if postings is None:
        row = base.aggregate(n=Count("id"), avg=Avg(Length("search_vector")))
        size, avg = row["n"], row["avg"]
    else:
        with connection.cursor() as cursor:
            cursor.execute(_POSTINGS_SIZE_SQL, [postings, DOCUMENT_LEXEME])
            size, avg = cursor.fetchone()
    now = time.monotonic()
    return PartitionStats(size=size or 0, avg_length=float(avg or 1.0), counted_at=now,
                          cost=now - started)


_POSTINGS_DF_SQL = """
SELECT l.lexeme, (SELECT count(*) FROM memories_termimpact ti
                  WHERE ti.scope = %s AND ti.lexeme = l.lexeme)
FROM unnest(%s::text[]) AS l(lexeme)
"""


def _frequencies(sql: str, params: list[Any], lexemes: list[str], postings: int | None
                 ) -> dict[str, int]:
    """Document frequencies of ``lexemes`` in the scope ``sql`` (one count per term): with
    ``postings`` (the scope's ``scope_hash``; only for a scope that is a whole layer scope of
    searchable memories, whose postings are exactly its memories', migration
    ``memories.0018``), an index-only count of each term's postings in
    ``termimpact_champions``; otherwise a GIN scan reading every memory holding the term
    (a term held by 108k memories of the 1M bench tenant: 26 ms against 4.4 s)."""
    with connection.cursor() as cursor:
        if postings is None:
            cursor.execute(_DF_SQL.format(scope=sql),
                           [*params, lexemes, [tsquery_or([lex]) for lex in lexemes]])
        else:
            cursor.execute(_POSTINGS_DF_SQL, [postings, lexemes])
        return {lex: int(n) for lex, n in cursor.fetchall()}


def _refresh(base: QuerySet[Memory], scope: tuple[tuple[str, tuple[str, ...]], str, list[Any]],
             stale: PartitionStats, postings: int | None) -> None:
    """Count ``base``'s statistics again (``scope``: its :func:`_scope_key`), with the
    frequencies of the terms asked for since ``stale`` was counted, and put them in its
    place."""
    key, sql, params = scope
    try:
        started = time.monotonic()
        fresh = _counted(base, postings)
        with _cache_lock:
            used = sorted(stale.used)
        if used:
            fresh.df.update(_frequencies(sql, params, used, postings))
        fresh.cost = time.monotonic() - started
        with _cache_lock:
            _stats[key] = fresh
    finally:
        stale.refreshing = False


def partition_stats(base: QuerySet[Memory], lexemes: tuple[str, ...], *,
                    postings: int | None = None) -> PartitionStats:
    """:class:`PartitionStats` of ``base`` covering ``lexemes`` (one count per term the
    scope's statistics do not hold yet; ``postings``: the ``scope_hash`` of the layer scope
    ``base`` lies in, whose postings count them, size and mean length included, and whose
    statistics they are however a filter narrows ``base``: :func:`_frequencies`,
    :func:`_counted`).

    A scope is counted in the request the first time; its statistics are then cached per
    process. Once they are ``STATS_TTL_SECONDS`` old (or older: ``RECOUNT_BUDGET``), the
    next search uses them as they are
    and hands a recount to the background thread (``memory_project.after_response
    .in_background``), so no request waits for it: reading every row of a 100k-memory scope
    took ~0.24 s, and a busy scope used to keep its first statistics as long as it was
    searched at least every two minutes.
    """
    scope = _scope_key(base, postings)  # with postings: whatever narrows ``base``
    key, sql, params = scope
    with _cache_lock:
        stats = _stats.get(key)
        due = stats is not None and stats.due(time.monotonic())
        if stats is not None and due:
            stats.refreshing = True
    if stats is None:
        stats = _counted(base, postings)
    elif due:
        ctx = current_context()
        if ctx is None:  # no tenant scope to hand over (RLS still applies): count here
            _refresh(base, scope, stats, postings)
        else:
            in_background(partial(run_in_scope, ctx, _refresh, base, scope, stats, postings))
    # A cached 0 may be stale (a memory holding the term was added since): count it again,
    # or the term would be dropped from the query until the statistics are counted again.
    missing = [lex for lex in lexemes if not stats.df.get(lex)]
    counted = _frequencies(sql, params, missing, postings) if missing else {}
    with _cache_lock:
        stats.df.update(counted)
        stats.used.update(lexemes)
        if key not in _stats:
            _stats[key] = stats
    return stats
