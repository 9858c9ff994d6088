"""Fresh planner statistics for tenants that grew since the memory table was last analyzed.

Every tenant's memories share one table, and PostgreSQL's planner estimates how many rows
``tenant_id = …`` selects from that table's statistics (``pg_stats``: the most common values
and, for the others, an even share of what is left). A tenant that was empty or absent at the
last ``ANALYZE`` is believed to hold about no rows, however many it holds now, and autovacuum
analyzes the table again only after 10% of it changed (``autovacuum_analyze_scale_factor``):
on the bench database, 129k rows. Believing a tenant empty, the planner reads a memory's
neighbours (``memories.retrieval.neighbours``) through the plain ``tenant_id`` index, every
row of the tenant per neighbour, where the scope's index finds it in one probe: a tenant that
had just imported the LoCoMo dev conversations (788 turns) into the bench database searched
at p50 / p95 68.4 / 81.9 ms in-process, and at 22.6 / 27.6 ms after one ``ANALYZE``
(``docs/performance.md``, "Planner statistics").

:func:`statistics_refresh` analyzes the table when some tenant holds at least
``MEMORY_STATISTICS_MIN_ROWS`` memories and more than ``STALE_RATIO`` times what the planner
estimates. It runs every minute (beat: "planner statistics") and at the end of
``import_locomo``; it first reads how many rows changed since the last analyze
(``pg_stat_user_tables``), so an idle table costs one catalog read. ``ANALYZE`` samples a
fixed number of rows whatever the table's size (``default_statistics_target``): ~3.5 s for
the 1.29M memories of the bench database, 0.4–0.6 s for the 15k of a development one.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, connections

from memories.models import Memory
from memories.services.vector_index import OWNER
from tenants.entry import each_tenant, tenant_job

#: A tenant holding more than this many times the rows the planner estimates is stale.
STALE_RATIO = 4.0
#: Rows of the tenant an ``ANALYZE`` sample must be expected to hold for the analysis to see
#: it (the sample is 300 × ``default_statistics_target`` rows of the whole table): a tenant
#: too small for the sample to find is left alone, or every run would analyze in vain.
MIN_SAMPLED = 5.0
#: ``pg_try_advisory_lock`` key of a run: two analyses at once would only repeat each other.
LOCK_KEY = 0x6D656D5F737461  # "mem_sta"

_CHANGES_SQL = """
SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relid = %s::regclass
"""

_TABLE_SQL = """
SELECT reltuples, current_setting('default_statistics_target')::int
FROM pg_class WHERE oid = %s::regclass
"""


@dataclass(frozen=True)
class TenantEstimate:
    """One tenant's memories (``rows``, every state) and the planner's ``estimate`` of them."""

    tenant_id: uuid.UUID
    rows: int
    estimate: float


@dataclass
class StatisticsRun:
    """What :func:`statistics_refresh` did: ``analyzed`` the table (in ``seconds``) for the
    ``stale`` tenants, or ``skipped`` it and why."""

    analyzed: bool = False
    seconds: float = 0.0
    stale: list[TenantEstimate] = field(default_factory=list)
    skipped: str = ""


def _planned_rows(sql: str, params: list[Any]) -> float:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    return float((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"])


def tenant_estimates() -> list[TenantEstimate]:
    """Each active tenant's memories (every state) and the rows the planner expects
    ``tenant_id = …`` to select from the memory table, read in the tenant's own scope.

    ``pg_stats`` hides the statistics of a table under row-level security from every role
    the policies apply to (its most common values would name other tenants), so the estimate
    comes from the planner itself: ``EXPLAIN`` of the tenant's rows over ``EXPLAIN`` of all
    rows the policy lets through (the planner multiplies the two conditions' selectivities,
    so the policy's share cancels out), times the table's ``reltuples``."""
    table = Memory._meta.db_table
    reltuples, _ = _table()
    estimates = []
    for tenant in each_tenant():
        with tenant_job(tenant, "planner-statistics"):
            rows = Memory.objects.count()
            visible = _planned_rows(f"SELECT 1 FROM {table}", [])
            own = _planned_rows(f"SELECT 1 FROM {table} WHERE tenant_id = %s", [tenant.id])
        estimates.append(TenantEstimate(tenant.id, rows, own / max(visible, 1.0) * reltuples))
    return estimates


def sample_share() -> float:
    """The share of the memory table an ``ANALYZE`` samples: 300 ×
    ``default_statistics_target`` rows (PostgreSQL's ``std_typanalyze``) of ``reltuples``."""
    reltuples, target = _table()
    return min(300 * target / max(reltuples, 1.0), 1.0)


def _table() -> tuple[float, int]:
    """The memory table's ``reltuples`` (-1 before its first ``ANALYZE``, read as 0) and
    ``default_statistics_target``."""
    with connection.cursor() as cursor:
        cursor.execute(_TABLE_SQL, [Memory._meta.db_table])
        reltuples, target = cursor.fetchone()
    return max(float(reltuples), 0.0), int(target)


def stale_tenants(estimates: list[TenantEstimate], sampled: float, *, min_rows: int,
                  ratio: float = STALE_RATIO) -> list[TenantEstimate]:
    """The tenants of ``estimates`` with at least ``min_rows`` memories and more than
    ``ratio`` times the planner's estimate, that an ``ANALYZE`` sampling ``sampled`` of the
    table (:func:`sample_share`) would see (``MIN_SAMPLED``), the largest first."""
    return sorted((e for e in estimates
                   if e.rows >= min_rows and e.rows > ratio * e.estimate
                   and e.rows * sampled >= MIN_SAMPLED),
                  key=lambda e: (-e.rows, str(e.tenant_id)))


def statistics_refresh(*, using: str = OWNER, min_rows: int | None = None) -> StatisticsRun:
    """``ANALYZE`` the memory table if a tenant outgrew the planner's statistics
    (:func:`stale_tenants`; ``min_rows`` defaults to ``MEMORY_STATISTICS_MIN_ROWS``). One run
    at a time (a PostgreSQL advisory lock); the analysis runs as ``using``, the owner role:
    PostgreSQL lets only a table's owner analyze it, and answers another role with a warning
    and no analysis, which the returned run cannot tell from one that analyzed.
    """
    min_rows = settings.MEMORY_STATISTICS_MIN_ROWS if min_rows is None else min_rows
    with connection.cursor() as cursor:
        cursor.execute(_CHANGES_SQL, [Memory._meta.db_table])
        row = cursor.fetchone()
    if row is not None and row[0] is not None and row[0] < min_rows:
        return StatisticsRun(skipped=f"{row[0]} rows changed since the last analyze")
    owner = connections[using]
    with owner.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        if not cursor.fetchone()[0]:
            return StatisticsRun(skipped="another run holds the lock")
    try:
        stale = stale_tenants(tenant_estimates(), sample_share(), min_rows=min_rows)
        if not stale:
            return StatisticsRun(skipped="the planner's estimates hold")
        started = time.perf_counter()
        with owner.cursor() as cursor:
            cursor.execute(f"ANALYZE {owner.ops.quote_name(Memory._meta.db_table)}")
        return StatisticsRun(analyzed=True, seconds=time.perf_counter() - started, stale=stale)
    finally:
        with owner.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
