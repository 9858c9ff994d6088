"""Semantic ranking: the memories of a scope nearest to a query vector (seed 001 "Search
Memory", seed 002 hybrid search).

pgvector, top ``limit``, in the order of the configured metric (``PGVECTOR_DISTANCE``:
cosine ``<=>`` by default, ``l2`` ``<->``, ``inner_product`` ``<#>``), so that an index of
that operator class (``manage.py pgvector_index``) can serve it; ``distance`` is always the
cosine distance, and cosine similarity = 1 − distance is kept when ≥ ``threshold``. For
unit-length vectors (the bundled model's are normalised) the three orders agree:
``‖a − b‖² = 2 − 2 a·b`` and ``a·b`` is the cosine similarity.

Small scopes are scanned exactly. Larger ones go through the index the configuration names
(``PGVECTOR_INDEX_TYPE``): HNSW by default, with ``hnsw.ef_search`` set for the transaction
first; when a filtered HNSW scan returns fewer than ``limit`` rows (the filter starved it;
pgvector before 0.8 has no iterative scans), it is widened in proportion to the share of
candidates that passed, up to ``MEMORY_HNSW_EF_SEARCH_MAX``, then the scope is searched
exactly. IVFFlat sets ``ivfflat.probes`` (``PGVECTOR_IVFFLAT_PROBES``) instead; a starved
IVFFlat scan is not widened: the scope is searched exactly (it has too few rows in the probed
lists, and an exact scan of it reads it through the tenant's btree indexes, while more probes
read more of every tenant's vectors). With another vector backend configured, the defaults
(cosine, HNSW) apply.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from cachetools import TTLCache
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import FloatField, QuerySet
from django.db.models.expressions import ExpressionWrapper, Func, Value
from pgvector.django import CosineDistance, L2Distance, MaxInnerProduct
from psycopg.errors import QueryCanceled

from memories.models import UNSERVED_COLUMNS, Memory
from memories.retrieval.hits import in_order
from vectors import registry
from vectors.base import DistanceMetric
from vectors.config import PgvectorSettings

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Per scope (index type and its SQL), how the last semantic ranking succeeded: the
#: ``hnsw.ef_search`` or ``ivfflat.probes`` to start from, or ``EXACT``. A scope that
#: starved the index last time starts wider.
_scan_starts: TTLCache[tuple[str, str, tuple[str, ...]], int] = TTLCache(
    maxsize=4096, ttl=300)
_scan_lock = threading.Lock()
EXACT = 0
#: A scope below this many memories that starves even the widest index scan is scanned
#: exactly from then on (~2 µs a row: ~40 ms); a larger one only for the query that starved.
EXACT_CHEAP_ROWS = 20_000
#: Safety factor of :func:`widened` on the candidates a starved scan's share calls for.
WIDEN_MARGIN = 1.5
#: The pgvector expression each metric orders by (its operator: ``<=>``, ``<->``, ``<#>``;
#: ``<#>`` is the negative inner product, so ascending is nearest first).
ORDER_BY: dict[DistanceMetric, type[Func]] = {
    DistanceMetric.COSINE: CosineDistance,
    DistanceMetric.L2: L2Distance,
    DistanceMetric.INNER_PRODUCT: MaxInnerProduct,
}


def pgvector_settings() -> PgvectorSettings:
    """The configured pgvector settings (``vectors.registry.configured()``), or the defaults
    (HNSW, cosine) when another backend is configured.

    Raises:
        InvalidBackendConfig: the configuration cannot be read (normally caught at start-up).
    """
    config = registry.configured()
    if config.backend == "pgvector" and isinstance(config.settings, PgvectorSettings):
        return config.settings
    return PgvectorSettings()


def nearest(base: QuerySet[Memory], vector: np.ndarray, limit: int) -> list[Memory]:
    """The ``limit`` memories of ``base`` nearest to ``vector``, nearest first, each with
    ``distance`` (cosine) set: :func:`nearest_distances`, then the rows (:func:`rows_at`)."""
    return rows_at(base, nearest_distances(base, vector, limit))


def nearest_distances(base: QuerySet[Memory], vector: np.ndarray, limit: int
                      ) -> list[tuple[Any, float]]:
    """``[(id, cosine distance)]`` of the ``limit`` memories of ``base`` nearest to ``vector``,
    nearest first (ids and distances only: a list whose rows the threshold drops costs no
    rows; ``docs/performance.md``, "Semantic search").

    A scope of fewer than ``MEMORY_EXACT_SCAN_MAX_ROWS`` memories (counted up to that bound)
    is scanned exactly: exact, and cheaper than an index scan. A larger one goes through the
    index, ordered by the metric's distance alone in SQL (a second sort key would keep the
    planner off the index); equal distances are then ordered by id here. pgvector 0.6 has no
    iterative index scans, so a scan whose rows the filters mostly drop (a small tenant or
    layer in a big table) can return fewer than ``limit``: an HNSW scan is then widened by
    the share of candidates that passed (:func:`widened`), up to ``MEMORY_HNSW_EF_SEARCH_MAX``
    candidates, and if that still starves (an IVFFlat scan: at once), the scope is scanned
    exactly (``distance + 0`` keeps the planner off the index). The way that worked is
    remembered for the scope for five minutes from when it was learned, so the next
    searches start there; an exact scan only for a scope of fewer than ``EXACT_CHEAP_ROWS``:
    in a larger one, one query whose neighbourhood other tenants fill must not make every
    later search of the scope read all of it. Such a query is answered exactly when that
    takes at most ``MEMORY_EXACT_SCAN_TIMEOUT_MS`` (:func:`_bounded_exact`), else from the
    rows the widest index scan found.
    """
    pg = pgvector_settings()
    sql, params = base.values("pk").query.sql_with_params()
    key = (pg.index_type, sql, tuple(map(str, params)))
    with _scan_lock:
        start = _scan_starts.get(key)
    if start is None:
        start = (EXACT if _fewer_than(base, settings.MEMORY_EXACT_SCAN_MAX_ROWS)
                 else _first(pg, limit))
    rows: list[tuple[Any, float, float]] = []
    if start != EXACT and connection.in_atomic_block:
        ivfflat = pg.index_type == "ivfflat"
        name = "ivfflat.probes" if ivfflat else "hnsw.ef_search"
        # A connection opens at MEMORY_HNSW_EF_SEARCH (``session_ef_search``): a scan at that
        # width needs no SET LOCAL of its own, and one at another width restores it after.
        session = None if ivfflat else getattr(connection, SESSION_EF_SEARCH, None)
        knob, widest = start, (start if ivfflat else _ef_search(limit, widest=True))
        while True:
            if knob != session:
                _set_local(name, knob)
            rows = _ranked(base, vector, pg.metric, limit, exact=False)
            if len(rows) >= limit:
                start = knob
                break
            if knob >= widest:
                break
            knob = widened(knob, len(rows), limit, widest)
        if session is not None and knob != session:
            _set_local(name, session)
    if len(rows) < limit:
        counted = None if start == EXACT else _count_up_to(base, EXACT_CHEAP_ROWS)
        if start == EXACT or (counted is not None and counted < EXACT_CHEAP_ROWS):
            rows, start = _ranked(base, vector, pg.metric, limit, exact=True), EXACT
        elif counted is not None:
            # Not remembered: in a large scope the index starved on this query, not on the
            # scope; its exact scan is bounded in time (2.5 s for the 1M bench tenant).
            rows = _bounded_exact(base, vector, pg.metric, limit) or rows
        else:  # counting ran out of time: so would the exact scan, which reads as much
            logger.warning("semantic scope too large to count in %d ms: answered from the "
                           "index scan's rows", settings.MEMORY_EXACT_SCAN_TIMEOUT_MS)
    with _scan_lock:
        if _scan_starts.get(key) != start:  # written again, the entry would never expire
            _scan_starts[key] = start
    return [(pk, distance) for pk, distance, _ in sorted(rows, key=lambda r: (r[2], str(r[0])))]


def _bounded_exact(base: QuerySet[Memory], vector: np.ndarray, metric: DistanceMetric,
                   limit: int) -> list[tuple[Any, float, float]] | None:
    """:func:`_ranked` exactly, within ``MEMORY_EXACT_SCAN_TIMEOUT_MS`` (:func:`_within`);
    ``None`` when the scan ran out of time (logged), so a search of a large scope whose
    index scan starved costs bounded CPU."""
    rows = _within(lambda: _ranked(base, vector, metric, limit, exact=True))
    if rows is None:
        logger.warning("exact semantic scan over %d ms: answered from the index scan's rows",
                       settings.MEMORY_EXACT_SCAN_TIMEOUT_MS)
    return rows


def _fewer_than(base: QuerySet[Memory], bound: int) -> bool:
    """Whether ``base`` holds fewer than ``bound`` memories (:func:`_count_up_to`); "no" when
    the count ran out of time, as an exact scan of ``base`` would take as long."""
    counted = _count_up_to(base, bound)
    return counted is not None and counted < bound


def _count_up_to(base: QuerySet[Memory], bound: int) -> int | None:
    """``base``'s memories counted up to ``bound``, within ``MEMORY_EXACT_SCAN_TIMEOUT_MS``;
    ``None`` past it: the count has walked a large scope whose filter keeps few of its
    memories (a range filter of the 1M bench tenant: seconds)."""
    return _within(lambda: base.values("pk")[:bound].count())


def _within(work: Callable[[], T]) -> T | None:
    """``work()`` (reads only) with PostgreSQL's ``statement_timeout`` at
    ``MEMORY_EXACT_SCAN_TIMEOUT_MS``, in a savepoint rolled back afterwards, which also ends
    the setting; ``None`` when a statement of it ran out of time. 0 ms: no bound."""
    budget = settings.MEMORY_EXACT_SCAN_TIMEOUT_MS
    if budget <= 0:
        return work()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)",
                               [str(budget)])
            done = work()
            transaction.set_rollback(True)
            return done
    except OperationalError as exc:
        if not isinstance(exc.__cause__, QueryCanceled):
            raise
        return None


def rows_at(base: QuerySet[Memory], found: list[tuple[Any, float]]) -> list[Memory]:
    """The memories ``found`` names (``[(id, cosine distance)]``), in that order, each with
    ``distance`` set; one query, none for an empty list. A memory that left ``base`` since
    (deleted or changed by another request) is left out."""
    if not found:
        return []
    return in_order(base.defer(*UNSERVED_COLUMNS).in_bulk([pk for pk, _ in found]), found,
                    "distance")


def semantic_list(base: QuerySet[Memory], vector: np.ndarray, limit: int, threshold: float
                  ) -> list[Memory]:
    """The semantic list of ``base``: at most ``limit`` memories, nearest first, each with
    ``distance`` set and cosine similarity (1 − distance) ≥ ``threshold``. Only those rows
    are read (:func:`nearest_distances`, then :func:`rows_at`)."""
    return rows_at(base, [(pk, distance) for pk, distance in nearest_distances(
        base, vector, limit) if 1.0 - distance >= threshold])


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


def _ranked(base: QuerySet[Memory], vector: np.ndarray, metric: DistanceMetric, limit: int,
            *, exact: bool) -> list[tuple[Any, float, float]]:
    """``[(id, cosine distance, rank key)]`` of the first ``limit`` memories of ``base`` in
    the order of ``metric``'s distance (the rank key); ``exact``: through an expression no
    index serves. Cosine orders by ``distance`` itself (the SQL of the default); another
    metric by a second annotation, ``ranked_by``."""
    cosine = CosineDistance("embedding", vector)
    if metric == DistanceMetric.COSINE:
        rows = base.annotate(distance=_unindexed(cosine) if exact else cosine
                             ).order_by("distance").values_list("pk", "distance")[:limit]
        return [(pk, float(distance), float(distance)) for pk, distance in rows]
    ranked_by = ORDER_BY[metric]("embedding", vector)
    rows3 = base.annotate(distance=cosine, ranked_by=_unindexed(ranked_by) if exact
                          else ranked_by).order_by("ranked_by").values_list(
        "pk", "distance", "ranked_by")[:limit]
    return [(pk, float(distance), float(key)) for pk, distance, key in rows3]


def _unindexed(distance: Func) -> ExpressionWrapper:
    """``distance + 0``: the same value, but no index orders by it."""
    return ExpressionWrapper(distance + Value(0.0), output_field=FloatField())


def _first(pg: PgvectorSettings, limit: int) -> int:
    """The first index scan's width: ``ivfflat.probes`` for IVFFlat, else ``ef_search``."""
    return pg.ivfflat_probes if pg.index_type == "ivfflat" else _ef_search(limit)


def _ef_search(limit: int, *, widest: bool = False) -> int:
    """The HNSW candidate list length for ``limit`` results: ``MEMORY_HNSW_EF_SEARCH`` and at
    least ``2 × limit``; ``widest``: ``MEMORY_HNSW_EF_SEARCH_MAX`` (pgvector caps it at 1000)."""
    ef_search = max(settings.MEMORY_HNSW_EF_SEARCH, 2 * limit)
    return max(settings.MEMORY_HNSW_EF_SEARCH_MAX, ef_search) if widest else ef_search


#: The attribute of a database connection holding the ``hnsw.ef_search`` it was opened with.
SESSION_EF_SEARCH = "memory_hnsw_ef_search"


def session_ef_search(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: a new database connection starts with
    ``hnsw.ef_search = MEMORY_HNSW_EF_SEARCH`` (a session setting; pgvector's own default is
    40), one round trip per connection, so that :func:`nearest`'s usual scan needs no
    ``SET LOCAL`` round trip per search. Behind a pooler that shares server connections
    between clients (PgBouncer's transaction mode) a session setting does not stay with the
    client: such a deployment sets ``hnsw.ef_search`` on the database or role instead."""
    value = settings.MEMORY_HNSW_EF_SEARCH
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, false)", [str(value)])
    setattr(connection, SESSION_EF_SEARCH, value)


def _set_local(name: str, value: int) -> None:
    """``SET LOCAL name = value`` (``hnsw.ef_search`` or ``ivfflat.probes``; only inside a
    transaction, where ``SET LOCAL`` lasts)."""
    if connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config(%s, %s, true)", [name, str(value)])
