"""A vector index of its own for each large tenant: a partial HNSW index ``WHERE tenant_id =``.

pgvector 0.6 filters an HNSW scan's candidates after the scan, so a tenant holding a small
share of a big memories table gets few of the ``ef_search`` candidates it reads: the scan is
widened (``memories.retrieval.semantic.widened``) and walks a graph built over every tenant's
vectors. With a partial index over the tenant's own rows, the planner takes that index for
the tenant's searches (their ``tenant_id = …`` predicate implies the index's), and its scan
reads only the tenant's vectors. On the bench database (a 100k tenant among 1.29M
memories), one scan of 30 nearest took 11.2 ms at p50 through the shared index and 3.8 ms
through the tenant's own (``docs/performance.md``, "Semantic search"; pgvector's README
recommends partial indexes for filtering on a few values).

Which tenants (:func:`index_plan`): at least ``MEMORY_TENANT_INDEX_MIN_ROWS`` memories (any
state: the index covers every row) and at most ``MAX_SHARE`` of the table (a tenant that is
most of the table is what the shared index already serves), the largest first, at most
``MEMORY_TENANT_INDEX_MAX`` of them (every index is one more the planner considers and one
more predicate each insert checks). An index is dropped once its tenant is gone or below
half the minimum (the margin keeps a tenant near the line from being built and dropped in
turn), or when the configured metric changes (its name holds the metric's operator class).
The indexes use the configured HNSW parameters; with IVFFlat configured there are none.

Cost: a tenant's inserts also go into its own index, ~3 ms a row on the bench database
(``docs/performance.md``, "Semantic search"). Runs hourly (beat: "tenant vector indexes") and from
``manage.py pgvector_index --tenants``; DDL as the owner role, ``CONCURRENTLY`` by default
(writes go on), one run at a time (a PostgreSQL advisory lock).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connections

from memories.models import Memory
from memories.services.vector_index import (
    OWNER,
    TENANT_INDEX_PREFIX,
    IndexBuildError,
    IndexSpec,
    Say,
    build_progress,
    drop_index,
    embedding_indexes,
    index_spec,
)
from tenants.entry import each_tenant, tenant_job
from vectors.config import PgvectorSettings

#: A tenant with more than this share of the table's rows keeps to the shared index.
MAX_SHARE = 0.5
#: ``pg_try_advisory_lock`` key of a run (two runs would build the same index twice).
LOCK_KEY = 0x6D656D5F74656E  # "mem_ten"


@dataclass(frozen=True)
class IndexPlan:
    """What a run does: the tenants whose index to ``build`` (largest first) and the index
    names to ``drop``; ``kept``: tenant indexes that stay."""

    build: list[uuid.UUID]
    drop: list[str]
    kept: list[str] = field(default_factory=list)


@dataclass
class IndexRun:
    """What :func:`tenant_indexes_refresh` did: indexes ``built`` and ``dropped`` (names);
    ``skipped``: another run held the lock, or the configuration has no tenant indexes."""

    built: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: str = ""


def tenant_index_spec(pg: PgvectorSettings, tenant_id: uuid.UUID) -> IndexSpec:
    """The partial HNSW index of ``tenant_id``: the configured index's method, operator class
    and options, named ``mem_tenant_<metric>_<tenant id hex>`` (at most 57 characters, under
    PostgreSQL's 63)."""
    shared = index_spec(pg)
    return IndexSpec(name=f"{TENANT_INDEX_PREFIX}{pg.metric.value}_{tenant_id.hex}",
                     method=shared.method, opclass=shared.opclass, options=shared.options,
                     predicate=f"tenant_id = '{tenant_id}'::uuid")


def index_plan(pg: PgvectorSettings, counts: dict[uuid.UUID, int], table_rows: int,
               existing: list[str], *, min_rows: int, max_indexes: int,
               max_share: float = MAX_SHARE) -> IndexPlan:
    """Which tenant indexes to build and drop (rules in the module docstring; ``max_share``:
    ``MAX_SHARE``).

    ``counts``: memories per tenant (tenants absent from it are gone); ``table_rows``: rows
    of the memories table (every tenant's); ``existing``: the tenant index names there are.
    """
    if pg.index_type != "hnsw":
        return IndexPlan(build=[], drop=sorted(existing))
    name_of = {t: tenant_index_spec(pg, t).name for t in counts}
    by_size = sorted(counts, key=lambda t: (-counts[t], str(t)))
    kept = [name_of[t] for t in by_size
            if name_of[t] in existing and counts[t] >= min_rows // 2]
    drop = [n for n in existing if n not in kept] + kept[max_indexes:]
    kept = kept[:max_indexes]
    eligible = [t for t in by_size
                if min_rows <= counts[t] <= max_share * table_rows
                and name_of[t] not in existing]
    return IndexPlan(build=eligible[:max(max_indexes - len(kept), 0)], drop=sorted(drop),
                     kept=sorted(kept))


def tenant_row_counts() -> dict[uuid.UUID, int]:
    """Memories per active tenant, every state (each counted in its own scope: row-level
    security applies to the owner role too)."""
    counts = {}
    for tenant in each_tenant():
        with tenant_job(tenant, "tenant-vector-index"):
            counts[tenant.id] = Memory.objects.count()
    return counts


def tenant_indexes_refresh(pg: PgvectorSettings, *, concurrently: bool = True,
                           using: str = OWNER, min_rows: int | None = None,
                           max_indexes: int | None = None, max_share: float = MAX_SHARE,
                           say: Say = lambda _: None) -> IndexRun:
    """Build and drop tenant indexes as :func:`index_plan` says; an interrupted build's
    invalid index is dropped and built again. ``say`` gets a line per step and progress lines
    of long builds. ``min_rows`` / ``max_indexes`` default to ``MEMORY_TENANT_INDEX_MIN_ROWS``
    / ``MEMORY_TENANT_INDEX_MAX``.

    Raises:
        IndexBuildError: ``concurrently`` inside a transaction of ``using``.
        django.db.DatabaseError: PostgreSQL refused (e.g. a role that does not own the table).
    """
    connection = connections[using]
    if concurrently and connection.in_atomic_block:
        raise IndexBuildError("CREATE INDEX CONCURRENTLY cannot run inside a transaction; "
                              "build without it (--no-concurrently).")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        if not cursor.fetchone()[0]:
            return IndexRun(skipped="another run holds the lock")
    try:
        return _refresh(pg, concurrently, using,
                        settings.MEMORY_TENANT_INDEX_MIN_ROWS if min_rows is None else min_rows,
                        settings.MEMORY_TENANT_INDEX_MAX if max_indexes is None else max_indexes,
                        max_share, say)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def _refresh(pg: PgvectorSettings, concurrently: bool, using: str, min_rows: int,
             max_indexes: int, max_share: float, say: Say) -> IndexRun:
    indexes = {i.name: i for i in embedding_indexes(using)
               if i.name.startswith(TENANT_INDEX_PREFIX)}
    run = IndexRun()
    for name in [n for n, index in indexes.items() if not index.valid]:
        say(f"{name} is invalid (an interrupted build): dropping it")
        drop_index(using, name, concurrently=concurrently)
        del indexes[name]
    counts = tenant_row_counts()
    plan = index_plan(pg, counts, max(_table_rows(using), sum(counts.values())),
                      list(indexes), min_rows=min_rows, max_indexes=max_indexes,
                      max_share=max_share)
    for name in plan.drop:
        say(f"dropping {name}")
        drop_index(using, name, concurrently=concurrently)
        run.dropped.append(name)
    for tenant_id in plan.build:
        spec = tenant_index_spec(pg, tenant_id)
        say(f"building {spec.name} ({counts[tenant_id]} memories): {spec.describe()}")
        started = time.perf_counter()
        with build_progress(using, say), connections[using].cursor() as cursor:
            cursor.execute(spec.create_sql(concurrently=concurrently))
        say(f"built {spec.name} in {time.perf_counter() - started:.1f} s")
        run.built.append(spec.name)
    run.kept = plan.kept
    return run


def _table_rows(using: str) -> int:
    """The planner's estimate of the memories table's rows (``pg_class.reltuples``; -1, read
    as 0, before its first ``ANALYZE``)."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                       [Memory._meta.db_table])
        row = cursor.fetchone()
    return max(int(row[0]), 0) if row else 0
