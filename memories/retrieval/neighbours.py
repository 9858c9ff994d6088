"""Neighbouring memories: the memory written just before and just after another one in the
same layer scope, when its text is in the other's recorded ``context`` (:func:`declared`).

Memory ids are UUIDv7, so id order is creation order, and the per-layer indexes
``(tenant, layer, <identifier>, id)`` find a memory's neighbours with one index probe each.
For a conversation imported or ingested turn by turn (``import_locomo``), they are the turns
before and after it: what a reply answers and what answers it. Hybrid search scores a
memory with its neighbours' relevance too (``memories.retrieval.fusion``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import QuerySet
from pgvector.django import CosineDistance

from memories.models import UNSERVED_COLUMNS, Memory


@dataclass(frozen=True)
class Adjacent:
    """The ids of a memory's previous and next memory in its scope (``None``: none)."""

    previous: Any | None
    next: Any | None


_ADJACENT_SQL = """
SELECT x.id,
       (SELECT b.id FROM ({base}) b WHERE b.id < x.id ORDER BY b.id DESC LIMIT 1),
       (SELECT b.id FROM ({base}) b WHERE b.id > x.id ORDER BY b.id LIMIT 1)
FROM unnest(%s::uuid[]) AS x(id)
WHERE EXISTS (SELECT 1 FROM ({base}) b WHERE b.id = x.id)
"""


def adjacent_ids(base: QuerySet[Memory], ids: list[Any]) -> dict[Any, Adjacent]:
    """``{id: Adjacent}`` for each of ``ids`` that ``base`` holds, in one statement: the
    nearest smaller and larger id of ``base`` (two index probes per memory).

    The statement is written here around ``base``'s SQL (its tenant, layer scope, states,
    scope and metadata filters, compiled once; PostgreSQL pulls the subqueries up into index
    probes) instead of by the ORM, whose two correlated subqueries took longer to build than
    to run: 3.3 → 1.8 ms per call at p50, the same neighbours for all 462 calls of the 231
    LoCoMo dev questions (``docs/performance.md``, "Retrieval quality"). Asking for the
    second neighbours in the same query (nested subqueries) was slower than a second query:
    9 ms against 2 × 4 ms (LoCoMo, p50)."""
    if not ids or base.query.is_empty():
        return {}
    sql, params = base.values("id").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(_ADJACENT_SQL.format(base=sql), [*params, *params, list(ids), *params])
        return {pk: Adjacent(previous, following) for pk, previous, following in cursor}


def rows_with_distance(base: QuerySet[Memory], ids: list[Any], vector: np.ndarray
                       ) -> dict[Any, Memory]:
    """``{id: memory}`` of ``ids`` in ``base``, each annotated with ``distance`` (cosine
    distance to ``vector``, computed in PostgreSQL)."""
    if not ids:
        return {}
    rows = (base.defer(*UNSERVED_COLUMNS).filter(pk__in=ids)
            .annotate(distance=CosineDistance("embedding", vector)))
    return {m.pk: m for m in rows}


def declared(memory: Memory, neighbour: Memory) -> bool:
    """Whether ``neighbour`` is part of ``memory``'s recorded context: its content is in
    ``memory.context`` (an imported conversation turn records its neighbouring turns there).
    Memories written without context have no neighbours, so facts that merely happen to be
    written one after another never lend each other relevance."""
    content = neighbour.content.strip()
    return bool(content) and content in (memory.context or "")
