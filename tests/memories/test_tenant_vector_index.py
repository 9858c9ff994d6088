"""Large tenants' own HNSW indexes (``memories.services.tenant_vector_index``): which tenants
get one, that the planner takes it for their searches only, that searches rank the same, and
that the indexes go once their tenant is small or gone.

The indexes are built by the owner role and searched by the application role on another
connection, so the database tests commit (``transaction=True``) and drop what they built.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from memories.models import Memory
from memories.retrieval.semantic import nearest
from memories.services.tenant_vector_index import (
    LOCK_KEY,
    index_plan,
    tenant_index_spec,
    tenant_indexes_refresh,
)
from memories.services.vector_index import MIGRATION_INDEX, index_build
from memories.tasks import tenant_vector_indexes
from memory_project.schedule import BEAT_SCHEDULE
from tenants.context import tenant_scope
from tests.retrieval_helpers import add_unit_vectors
from vectors.config import PgvectorSettings

COMMITTED = pytest.mark.django_db(transaction=True, databases=["default", "owner"])
HNSW = PgvectorSettings()
A, B, C = (uuid.UUID(int=n) for n in (1, 2, 3))


def name(tenant: uuid.UUID, pg: PgvectorSettings = HNSW) -> str:
    return tenant_index_spec(pg, tenant).name


def test_a_tenant_between_the_minimum_and_half_the_table_gets_an_index_largest_first() -> None:
    counts = {A: 400, B: 300, C: 99}
    plan = index_plan(HNSW, counts, 1000, [], min_rows=100, max_indexes=8)
    assert plan.build == [A, B] and plan.drop == [] and plan.kept == []
    # A is over half of a smaller table: the shared index serves it
    assert index_plan(HNSW, counts, 700, [], min_rows=100, max_indexes=8).build == [B]
    assert index_plan(HNSW, counts, 1000, [], min_rows=100, max_indexes=1).build == [A]
    assert index_plan(HNSW, counts, 1000, [name(A)], min_rows=100, max_indexes=8).build == [B]


def test_an_index_goes_with_its_tenant_below_half_the_minimum_or_over_the_maximum() -> None:
    existing = [name(A), name(B), name(C)]
    plan = index_plan(HNSW, {A: 400, B: 60, C: 40}, 1000, existing, min_rows=100,
                      max_indexes=8)
    assert plan.kept == sorted([name(A), name(B)])  # B: below the minimum, above half of it
    assert plan.drop == [name(C)] and plan.build == []
    gone = index_plan(HNSW, {B: 300}, 1000, existing, min_rows=100, max_indexes=8)
    assert gone.drop == sorted([name(A), name(C)]) and gone.kept == [name(B)]
    fewer = index_plan(HNSW, {A: 400, B: 300}, 1000, [name(A), name(B)], min_rows=100,
                       max_indexes=1)
    assert fewer.kept == [name(A)] and fewer.drop == [name(B)] and fewer.build == []


def test_another_metric_or_ivfflat_replaces_or_drops_the_indexes() -> None:
    l2 = PgvectorSettings(distance="l2")
    plan = index_plan(l2, {A: 400}, 1000, [name(A)], min_rows=100, max_indexes=8)
    assert plan.drop == [name(A)] and plan.build == [A]
    assert name(A, l2) == f"mem_tenant_l2_{A.hex}" and len(name(A, l2)) <= 63
    spec = tenant_index_spec(HNSW, A)
    assert spec.predicate == f"tenant_id = '{A}'::uuid"
    assert spec.create_sql(concurrently=True).endswith(f"WHERE tenant_id = '{A}'::uuid")
    ivfflat = PgvectorSettings(index_type="ivfflat")
    assert index_plan(ivfflat, {A: 400}, 1000, [name(A)], min_rows=100,
                      max_indexes=8) == index_plan(ivfflat, {}, 0, [name(A)], min_rows=1,
                                                   max_indexes=1)
    assert index_plan(ivfflat, {A: 400}, 1000, [name(A)], min_rows=100,
                      max_indexes=8).drop == [name(A)]


@pytest.fixture
def _dropped_after(owner_flushes: None) -> Iterator[None]:
    """Tenant indexes the test built are dropped afterwards."""
    yield
    with connections["owner"].cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memories_memory' "
                       "AND indexname LIKE 'mem\\_tenant\\_%'")
        for (index,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX IF EXISTS "{index}"')


def ranking(tenant: Any, query: np.ndarray) -> tuple[list[str], str]:
    """The 6 nearest of ``tenant`` through the index path, and the plan of its ranking query
    (sequential scans and sorts discouraged, so that only an index can order the rows)."""
    with transaction.atomic(), tenant_scope(tenant.ctx), \
            CaptureQueriesContext(connection) as captured:
        found = nearest(Memory.objects.filter(layer="user"), query, 6)
    sql = next(q["sql"] for q in captured.captured_queries
               if "<=> " in q["sql"] and "ORDER BY" in q["sql"] and "LIMIT" in q["sql"])
    with transaction.atomic(), connection.cursor() as cursor:
        for knob in ("enable_seqscan", "enable_sort", "enable_incremental_sort"):
            cursor.execute(f"SET LOCAL {knob} = off")
        cursor.execute("EXPLAIN " + sql)
        shown = "\n".join(row[0] for row in cursor.fetchall())
    return [m.content for m in found], shown


def exact(tenant: Any, query: np.ndarray) -> list[str]:
    with tenant_scope(tenant.ctx):
        rows = list(Memory.objects.filter(layer="user").values_list("content", "embedding"))
    return [c for c, _ in sorted(rows, key=lambda r: -float(np.dot(query, r[1])))[:6]]


def refresh(*args: str) -> str:
    out = io.StringIO()
    call_command("pgvector_index", "--tenants", "--no-concurrently", *args, stdout=out)
    return out.getvalue()


@COMMITTED
@pytest.mark.usefixtures("_dropped_after")
def test_a_large_tenants_searches_use_its_own_index_and_rank_the_same(
        tenant_a: Any, tenant_b: Any, settings: Any) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1  # every scope counts as large: the index path
    settings.MEMORY_TENANT_INDEX_MIN_ROWS = 20
    query_a, query_b = add_unit_vectors(tenant_a, 24, 7), add_unit_vectors(tenant_b, 30, 8)
    before = ranking(tenant_a, query_a)[0]
    own = name(tenant_a.tenant.id)
    out = refresh()  # B holds 30 of 54 rows: over half the table
    assert f"built {own}" in out and "1 built, 0 dropped, 0 kept" in out
    found, shown = ranking(tenant_a, query_a)
    assert f"Index Scan using {own}" in shown
    assert found == before == exact(tenant_a, query_a)
    found_b, shown_b = ranking(tenant_b, query_b)
    assert f"Index Scan using {MIGRATION_INDEX}" in shown_b and "mem_tenant_" not in shown_b
    assert found_b == exact(tenant_b, query_b)
    assert "0 built, 0 dropped, 1 kept" in refresh()  # idempotent
    assert BEAT_SCHEDULE["tenant vector indexes"]["task"] == tenant_vector_indexes.name
    assert tenant_vector_indexes.apply().get() == {  # the hourly job, concurrently
        "built": [], "dropped": [], "kept": [own], "skipped": ""}
    # the shared index's own command leaves tenant indexes alone, even with --drop-others
    index_build(HNSW, concurrently=False, drop_others=True)
    settings.MEMORY_TENANT_INDEX_MIN_ROWS = 50  # A (24) is now below half of it (25)
    assert f"dropping {own}" in refresh()
    assert f"Index Scan using {MIGRATION_INDEX}" in ranking(tenant_a, query_a)[1]


@COMMITTED
@pytest.mark.usefixtures("_dropped_after")
def test_a_second_run_while_one_holds_the_lock_does_nothing(tenant_a: Any, settings: Any
                                                            ) -> None:
    settings.MEMORY_TENANT_INDEX_MIN_ROWS = 1
    add_unit_vectors(tenant_a, 3, 9)
    holder = connections.create_connection("owner")
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        run = tenant_indexes_refresh(HNSW, concurrently=False, max_share=1.0)
        assert run.skipped and run.built == []
    finally:
        with holder.cursor() as cursor:  # released now: a closed session's lock is released
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])  # only once it ends
        holder.close()
    assert tenant_indexes_refresh(HNSW, concurrently=False, max_share=1.0).built == [
        name(tenant_a.tenant.id)]
