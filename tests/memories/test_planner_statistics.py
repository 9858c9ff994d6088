"""The memory table is analyzed again when a tenant outgrew the planner's statistics
(``memories.services.planner_statistics``): which tenants count as stale, that a run analyzes
for them and then holds, and that two runs never analyze at once.

``ANALYZE`` runs as the owner role on another connection, so the database tests commit
(``transaction=True``)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.db import connection, connections

from memories.services.planner_statistics import (
    LOCK_KEY,
    TenantEstimate,
    sample_share,
    stale_tenants,
    statistics_refresh,
    tenant_estimates,
)
from memories.tasks import planner_statistics
from memory_project.schedule import BEAT_SCHEDULE
from tests.retrieval_helpers import add_unit_vectors

COMMITTED = pytest.mark.django_db(transaction=True, databases=["default", "owner"])
A, B, C, D = (uuid.UUID(int=n) for n in (1, 2, 3, 4))


def test_a_tenant_is_stale_with_enough_rows_several_times_the_estimate_and_in_the_sample(
        ) -> None:
    estimates = [TenantEstimate(A, 800, 0.0), TenantEstimate(B, 2000, 400.0),
                 TenantEstimate(C, 400, 1.0), TenantEstimate(D, 100_000, 90_000.0)]
    assert stale_tenants(estimates, 1.0, min_rows=500) == [estimates[1], estimates[0]]
    assert stale_tenants(estimates, 1.0, min_rows=500, ratio=1.0) == [
        estimates[3], estimates[1], estimates[0]]
    assert stale_tenants(estimates, 1.0, min_rows=300)[-1] == estimates[2]
    # a sample of 0.5% of the table would hold ~4 of A's rows: an analysis may not see A
    assert stale_tenants(estimates, 0.005, min_rows=500) == [estimates[1]]


def _analyze_as_owner() -> None:
    with connections["owner"].cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")


def _changes_counted(rows: int) -> int:
    """Wait until the statistics views count at least ``rows`` changes since the last
    analyze (backends report their counters once idle, at most every second); the count."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT n_mod_since_analyze FROM pg_stat_user_tables "
                           "WHERE relname = 'memories_memory'")
            counted = cursor.fetchone()[0]
            if counted >= rows:
                return int(counted)
        time.sleep(0.2)
    raise AssertionError(f"fewer than {rows} changes counted")


def _estimate(tenant: Any) -> float:
    return next(e.estimate for e in tenant_estimates() if e.tenant_id == tenant.tenant.id)


@COMMITTED
@pytest.mark.usefixtures("owner_flushes")
def test_a_tenant_that_outgrew_the_statistics_gets_the_table_analyzed_once(
        tenant_a: Any, tenant_b: Any) -> None:
    add_unit_vectors(tenant_b, 10, 3)
    _changes_counted(20)  # 10 inserts, then 10 updates of their embeddings
    _analyze_as_owner()  # the planner now knows B's 10 rows and believes A holds none
    add_unit_vectors(tenant_a, 40, 4)
    changed = _changes_counted(80)
    assert _estimate(tenant_a) < 10 and sample_share() == 1.0
    assert statistics_refresh(min_rows=changed + 1000).skipped.endswith(
        " rows changed since the last analyze")  # too few changes: no tenant counted
    run = statistics_refresh(min_rows=20)
    assert run.analyzed and [(e.tenant_id, e.rows) for e in run.stale] == [
        (tenant_a.tenant.id, 40)]
    assert 30 <= _estimate(tenant_a) <= 50  # the analysis read every row of a small table
    again = statistics_refresh(min_rows=0)
    assert not again.analyzed and again.skipped == "the planner's estimates hold"


@COMMITTED
@pytest.mark.usefixtures("owner_flushes")
def test_a_run_while_another_holds_the_lock_does_nothing(tenant_a: Any) -> None:
    holder = connections.create_connection("owner")
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        assert statistics_refresh(min_rows=0).skipped == "another run holds the lock"
    finally:
        holder.close()  # its session's lock goes with it
    assert statistics_refresh(min_rows=0).skipped == "the planner's estimates hold"


@COMMITTED
@pytest.mark.usefixtures("owner_flushes")
def test_the_periodic_job_runs_every_minute_and_reports(tenant_a: Any, settings: Any) -> None:
    assert BEAT_SCHEDULE["planner statistics"] == {
        "task": planner_statistics.name, "every_seconds": 60}
    settings.MEMORY_STATISTICS_MIN_ROWS = 0
    assert planner_statistics.apply().get() == {
        "analyzed": False, "seconds": 0.0, "skipped": "the planner's estimates hold",
        "stale": []}
