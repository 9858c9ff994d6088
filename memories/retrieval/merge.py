"""Merging the layers' results (seed 001 "Layer Precedence Merging"): precedence first
(agent before user before session ...), then score; a result whose cosine similarity to an
already kept result of a higher-precedence layer is ≥ ``DEDUP_SIMILARITY`` is dropped."""

from __future__ import annotations

from typing import Any

from django.db import connection

from memories.retrieval.hits import SearchHit, order_within_layer
from tenants.layers import PRECEDENCE

DEDUP_SIMILARITY = 0.95

_NEAR_DUPLICATES_SQL = """
SELECT a.id, b.id FROM memories_memory a JOIN memories_memory b ON a.id < b.id
WHERE a.id = ANY(%s) AND b.id = ANY(%s) AND a.layer <> b.layer
  AND (a.embedding <=> b.embedding) <= %s
"""


def near_duplicates(candidates: list[SearchHit]) -> set[frozenset[Any]]:
    """Pairs of candidates from different layers whose cosine similarity is ≥ 0.95
    (computed in PostgreSQL, so no vector leaves the database)."""
    if len({c.layer for c in candidates}) < 2:
        return set()
    ids = [c.memory.pk for c in candidates]
    with connection.cursor() as cursor:
        cursor.execute(_NEAR_DUPLICATES_SQL, [ids, ids, 1.0 - DEDUP_SIMILARITY])
        return {frozenset(row) for row in cursor.fetchall()}


def merge_by_precedence(candidates: list[SearchHit]) -> list[SearchHit]:
    """Sort by layer precedence then score, and drop near-duplicates (cosine ≥ 0.95) of a
    result already kept from a higher-precedence layer (seed 001 ``mergeSearchResults``)."""
    ordered = sorted(candidates, key=lambda c: (PRECEDENCE[c.layer], *order_within_layer(c)))
    pairs = near_duplicates(ordered)
    kept: list[SearchHit] = []
    for cand in ordered:
        if pairs and any(frozenset((cand.memory.pk, k.memory.pk)) in pairs for k in kept):
            continue
        kept.append(cand)
    return kept
