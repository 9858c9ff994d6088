"""The statements that score BM25 candidates (``memories.retrieval.keyword`` picks the
candidates and the statistics): ``Σ idf·tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))``
(Robertson & Zaragoza, 2009; k1 = 1.2, b = 0.75), term frequencies read from the generated
``term_frequencies`` column and document lengths from ``search_vector``.

:func:`scores` returns ``(id, score)`` pairs; :func:`scored_rows` returns the memories
themselves from the same statement (their served columns joined to the best ``limit`` scores,
with the cosine distance to a query vector): one statement instead of scoring, then reading
the rows by id (``docs/performance.md``, "Keyword search").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import QuerySet

from memories.models import UNSERVED_COLUMNS, Memory

BM25_K1 = 1.2
BM25_B = 0.75

_BM25_SQL = """
SELECT c.id, {score} AS score
FROM (
    SELECT s.id, {frequencies},
           %s::float8 * (1 - %s::float8 + %s::float8 * length(s.search_vector) / %s::float8) AS norm
    FROM ({candidates}) s
    OFFSET 0
) c
ORDER BY score DESC, c.id
LIMIT %s
"""

_ROWS_SQL = """
SELECT {columns}, r.score AS keyword_score{distance}
FROM ({scored}) r JOIN {table} m ON m.id = r.id
ORDER BY r.score DESC, r.id
"""


@dataclass(frozen=True)
class Terms:
    """The query terms that score: ``lexemes`` with their ``idfs``, and the scope's mean
    document length ``avg_length`` (lexemes)."""

    lexemes: list[str]
    idfs: list[float]
    avg_length: float


def _bm25_sql(candidates: str, terms: int) -> str:
    """BM25 over ``candidates`` (``id``, ``search_vector``, ``term_frequencies``) for
    ``terms`` query lexemes, the best first, at most a ``LIMIT`` parameter.

    ``OFFSET 0`` keeps the planner from inlining the inner query, which would read each
    term frequency out of the jsonb twice per candidate (numerator and denominator)."""
    score = " + ".join(f"%s::float8 * c.tf{i} / (c.tf{i} + c.norm)" for i in range(terms))
    frequencies = ", ".join(
        f"coalesce((s.term_frequencies ->> %s)::float8, 0) AS tf{i}" for i in range(terms))
    return _BM25_SQL.format(score=score, frequencies=frequencies, candidates=candidates)


def _statement(candidates: QuerySet[Memory], terms: Terms, limit: int) -> tuple[str, list[Any]]:
    sql, params = candidates.values("id", "search_vector", "term_frequencies").query \
        .sql_with_params()
    k1, b = BM25_K1, BM25_B
    return _bm25_sql(sql, len(terms.lexemes)), [
        *(idf * (k1 + 1) for idf in terms.idfs), *terms.lexemes, k1, b, b, terms.avg_length,
        *params, limit]


@cache
def _served_columns() -> str:
    """The memory columns :func:`scored_rows` reads, qualified by ``m``."""
    quote = connection.ops.quote_name
    return ", ".join(f"m.{quote(str(f.column))}" for f in Memory._meta.concrete_fields
                     if f.attname not in UNSERVED_COLUMNS)


def scores(candidates: QuerySet[Memory], terms: Terms, limit: int) -> list[tuple[Any, float]]:
    """``[(id, BM25)]`` of the best ``limit`` of ``candidates``, best first (ties by id)."""
    sql, params = _statement(candidates, terms, limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


def scored_rows(candidates: QuerySet[Memory], terms: Terms, limit: int,
                vector: np.ndarray | None) -> list[Memory]:
    """The best ``limit`` of ``candidates`` as memories (the served columns; search-only ones
    deferred), best first, each with ``keyword_score`` and, with ``vector``, ``distance``
    (cosine) set. One statement; the rows are joined to ids that ``candidates`` (the caller's
    tenant-scoped queryset) selected, and row-level security applies to the join as well."""
    scored, params = _statement(candidates, terms, limit)
    distance = ""
    if vector is not None:
        distance = ", m.embedding <=> %s::vector AS distance"
        params = [Memory._meta.get_field("embedding").get_prep_value(vector), *params]
    sql = _ROWS_SQL.format(columns=_served_columns(), distance=distance, scored=scored,
                           table=connection.ops.quote_name(Memory._meta.db_table))
    rows = list(Memory.objects.raw(sql, params))
    for memory in rows:
        memory.keyword_score = float(memory.keyword_score)  # type: ignore[attr-defined]
    return rows
