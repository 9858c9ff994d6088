"""Semantic ranking: the memories of a scope nearest to a query vector (seed 001 "Search
Memory", seed 002 hybrid search).

pgvector cosine distance ``<=>`` over the HNSW index, top ``limit``; cosine similarity =
1 − distance, kept when ≥ ``threshold``. Small scopes are scanned exactly; when a filtered
HNSW scan returns fewer than ``limit`` rows (the filter starved it; pgvector before 0.8 has
no iterative scans), it is widened in proportion to the share of candidates that passed, up
to ``MEMORY_HNSW_EF_SEARCH_MAX``, then the scope is searched exactly. Every index scan sets
``hnsw.ef_search`` for its transaction first.
"""

from __future__ import annotations

import math
import threading
from typing import Any, cast

import numpy as np
from cachetools import TTLCache
from django.conf import settings
from django.db import connection
from django.db.models import FloatField, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from pgvector.django import CosineDistance

from memories.models import UNSERVED_COLUMNS, Memory

#: Per scope (its SQL), how the last semantic ranking succeeded: the ``hnsw.ef_search`` to
#: start from, or ``EXACT``. A scope that starved the index last time starts wider.
_scan_starts: TTLCache[tuple[str, tuple[str, ...]], int] = TTLCache(maxsize=4096, ttl=300)
_scan_lock = threading.Lock()
EXACT = 0
#: Safety factor of :func:`widened` on the candidates a starved scan's share calls for.
WIDEN_MARGIN = 1.5


def nearest(base: QuerySet[Memory], vector: np.ndarray, limit: int) -> list[Memory]:
    """The ``limit`` memories of ``base`` nearest to ``vector``, nearest first.

    A scope of fewer than ``MEMORY_EXACT_SCAN_MAX_ROWS`` memories (counted up to that bound)
    is scanned exactly: exact, and cheaper than a graph walk. A larger one goes through the
    HNSW index, ordered by distance alone in SQL (a second sort key would keep the planner off
    the index); equal distances are then ordered by id here. pgvector 0.6 has no iterative
    index scans, so a scan whose rows the filters mostly drop (a small tenant or layer in a
    big table) can return fewer than ``limit``: it is then widened by the share of candidates
    that passed (:func:`widened`), up to ``MEMORY_HNSW_EF_SEARCH_MAX`` candidates, and if that
    still starves, the scope is scanned exactly (``distance + 0`` keeps the planner off the
    index). The way that worked is remembered for the scope for five minutes, so the next
    search starts there.
    """
    distance = CosineDistance("embedding", vector)
    light = base.defer(*UNSERVED_COLUMNS)
    sql, params = base.values("pk").query.sql_with_params()
    key = (sql, tuple(map(str, params)))
    with _scan_lock:
        start = _scan_starts.get(key)
    if start is None:
        bound = settings.MEMORY_EXACT_SCAN_MAX_ROWS
        start = EXACT if base.values("pk")[:bound].count() < bound else _ef_search(limit)
    rows: list[Memory] = []
    if start != EXACT and connection.in_atomic_block:
        ef_search, widest = start, _ef_search(limit, widest=True)
        while True:
            _set_ef_search(ef_search)
            rows = list(light.annotate(distance=distance).order_by("distance")[:limit])
            if len(rows) >= limit:
                start = ef_search
                break
            if ef_search >= widest:
                break
            ef_search = widened(ef_search, len(rows), limit, widest)
    if len(rows) < limit:
        start = EXACT
        exact = ExpressionWrapper(distance + Value(0.0), output_field=FloatField())
        rows = list(light.annotate(distance=exact).order_by("distance")[:limit])
    with _scan_lock:
        _scan_starts[key] = start
    return sorted(rows, key=lambda m: (cast(Any, m).distance, str(m.pk)))


def semantic_list(base: QuerySet[Memory], vector: np.ndarray, limit: int, threshold: float
                  ) -> list[Memory]:
    """The semantic list of ``base``: at most ``limit`` memories, nearest first, each with
    ``distance`` set and cosine similarity (1 − distance) ≥ ``threshold``."""
    return [m for m in nearest(base, vector, limit)
            if 1.0 - float(cast(Any, m).distance) >= threshold]


def widened(ef_search: int, found: int, limit: int, widest: int) -> int:
    """The candidate list length to try after an HNSW scan of ``ef_search`` candidates kept
    only ``found`` < ``limit`` rows.

    pgvector 0.6 hands over at most ``ef_search`` candidates, so a starved scan read all of
    them, and about ``found / ef_search`` of the index passes the scope's filters:
    ``WIDEN_MARGIN · limit · ef_search / found`` candidates should hold ``limit`` of them.
    At least twice ``ef_search``, at most ``widest``; ``widest`` when nothing passed. Widening
    by the estimate instead of jumping to ``widest`` keeps most of the exact top 10 at a
    fraction of the time (``docs/performance.md``, "Semantic search").
    """
    if found <= 0:
        return widest
    wanted = math.ceil(WIDEN_MARGIN * limit * ef_search / found)
    return min(widest, max(2 * ef_search, wanted))


def _ef_search(limit: int, *, widest: bool = False) -> int:
    """The HNSW candidate list length for ``limit`` results: ``MEMORY_HNSW_EF_SEARCH`` and at
    least ``2 × limit``; ``widest``: ``MEMORY_HNSW_EF_SEARCH_MAX`` (pgvector caps it at 1000)."""
    ef_search = max(settings.MEMORY_HNSW_EF_SEARCH, 2 * limit)
    return max(settings.MEMORY_HNSW_EF_SEARCH_MAX, ef_search) if widest else ef_search


def _set_ef_search(ef_search: int) -> None:
    """``SET LOCAL hnsw.ef_search`` (only inside a transaction, where ``SET LOCAL`` lasts)."""
    if connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
