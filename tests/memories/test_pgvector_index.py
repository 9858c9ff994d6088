"""pgvector's configured index type and metric: semantic search orders by the metric's
operator, ``manage.py pgvector_index`` builds the index that serves it, and the default
(cosine over the migration's HNSW index) is unchanged.

The index is built by the owner role on its own connection and searched by the application
role on another, so those tests commit (``transaction=True``): an index or rows left
uncommitted on one connection are invisible to the other. ``_restored`` drops the indexes a
test built and rebuilds the ones it dropped; the owner then empties the tables.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from pgvector.django import CosineDistance

from memories.models import Memory
from memories.retrieval.search import SearchRequest, memory_search
from memories.retrieval.semantic import nearest, semantic_list
from memories.services.vector_index import MIGRATION_INDEX, embedding_indexes
from tenants.context import tenant_scope
from tenants.layers import LayerIdentifiers
from tests.retrieval_helpers import add_unit_vectors
from vectors import registry
from vectors.config import PgvectorSettings, VectorConfig

USER = LayerIdentifiers.from_mapping({"userId": "u1"})
COMMITTED = pytest.mark.django_db(transaction=True, databases=["default", "owner"])
ROWS, LIMIT = 24, 6


@pytest.fixture
def configure() -> Iterator[Any]:
    """``configure(**pgvector settings)`` makes them the process's vector configuration; the
    previous one comes back afterwards."""
    previous = registry.configured()

    def set_to(**settings: Any) -> None:
        registry.reset(VectorConfig("pgvector", PgvectorSettings(**settings)))

    set_to()
    try:
        yield set_to
    finally:
        registry.reset(previous)


@pytest.fixture
def _restored(owner_flushes: None) -> Iterator[None]:
    """The vector indexes of the memories table as they were before the test."""
    before = {index.name: index.definition for index in embedding_indexes()}
    try:
        yield
    finally:
        after = {index.name for index in embedding_indexes()}
        with connections["owner"].cursor() as cursor:
            for name in sorted(after - set(before)):
                cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
            for name in sorted(set(before) - after):
                cursor.execute(before[name])


def cosine_order(tenant: Any, query: np.ndarray, limit: int) -> list[str]:
    """The exact cosine ranking, computed here."""
    with tenant_scope(tenant.ctx):
        rows = list(Memory.objects.filter(layer="user").values_list("content", "embedding"))
    ranked = sorted(rows, key=lambda r: -float(np.dot(query, r[1]) / np.linalg.norm(r[1])))
    return [content for content, _ in ranked[:limit]]


def assert_cosine_distances(tenant: Any, query: np.ndarray, found: list[Memory]) -> None:
    """Each memory's ``distance`` is its cosine distance to ``query``, whatever the order."""
    with tenant_scope(tenant.ctx):
        stored = dict(Memory.objects.filter(layer="user").values_list("content", "embedding"))
    for memory in found:
        cosine = float(np.dot(query, stored[memory.content]))
        assert abs(float(cast(Any, memory).distance) - (1.0 - cosine)) < 1e-5


def ranked(tenant: Any, query: np.ndarray) -> tuple[list[Memory], list[str]]:
    """``nearest`` over the index path (in a transaction): its memories and the SQL it ran."""
    with transaction.atomic(), tenant_scope(tenant.ctx), \
            CaptureQueriesContext(connection) as captured:
        found = nearest(Memory.objects.filter(layer="user"), query, LIMIT)
    return found, [q["sql"] for q in captured.captured_queries]


def ranking_query(queries: list[str], operator: str) -> str:
    ranking = [sql for sql in queries if f"{operator} " in sql and "ORDER BY" in sql
               and "LIMIT" in sql]
    assert ranking, f"no ranking query with {operator} ran"
    return ranking[0]


def plan(sql: str) -> str:
    """``EXPLAIN`` of ``sql`` as the app role, sequential scans and sorts discouraged, so an
    index that can order the rows shows up (one that cannot never does)."""
    with transaction.atomic(), connection.cursor() as cursor:
        for knob in ("enable_seqscan", "enable_sort", "enable_incremental_sort"):
            cursor.execute(f"SET LOCAL {knob} = off")
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def build(*args: str) -> str:
    out = io.StringIO()
    call_command("pgvector_index", *args, stdout=out)
    return out.getvalue()


def index_names() -> set[str]:
    """The vector indexes on ``memories_memory`` as ``pg_indexes`` lists them."""
    with connections["owner"].cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memories_memory' "
                       "AND (indexdef LIKE '%USING hnsw%' OR indexdef LIKE '%USING ivfflat%')")
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db
def test_the_default_is_todays_query_over_the_migrations_hnsw_index(
        tenant_a: Any, settings: Any, configure: Any) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1  # every scope counts as large: the index path
    query = add_unit_vectors(tenant_a, ROWS)
    found, queries = ranked(tenant_a, query)
    sql = ranking_query(queries, "<=>")
    with transaction.atomic(), tenant_scope(tenant_a.ctx), \
            CaptureQueriesContext(connection) as captured:  # ids and distances, then the rows
        base = Memory.objects.filter(layer="user")
        distance = CosineDistance("embedding", query)
        list(base.annotate(distance=distance).order_by("distance")
             .values_list("pk", "distance")[:LIMIT])
    assert sql == captured.captured_queries[-1]["sql"]
    assert not any("'hnsw.ef_search'" in q for q in queries)  # the connection's own width
    assert not any("ivfflat.probes" in q for q in queries)
    assert f"Index Scan using {MIGRATION_INDEX}" in plan(sql)
    assert [m.content for m in found] == cosine_order(tenant_a, query, LIMIT)
    assert_cosine_distances(tenant_a, query, found)


@pytest.mark.django_db
def test_the_semantic_list_reads_only_the_rows_that_pass_its_threshold(tenant_a: Any) -> None:
    """Ids and distances first, then the rows above the threshold; none when nothing passes."""
    query = add_unit_vectors(tenant_a, ROWS)
    order = cosine_order(tenant_a, query, ROWS)
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        base = Memory.objects.filter(layer="user")
        with CaptureQueriesContext(connection) as captured:
            assert semantic_list(base, query, LIMIT, threshold=1.01) == []
        assert not any('"memories_memory"."content"' in q["sql"]
                       for q in captured.captured_queries)
        distances = sorted(1.0 - float(np.dot(query, v)) for v in
                           base.values_list("embedding", flat=True))
        cut = 1.0 - (distances[2] + distances[3]) / 2  # between the third and fourth nearest
        found = semantic_list(base, query, LIMIT, threshold=cut)
        everything = semantic_list(base, query, LIMIT, threshold=-1.0)
    assert [m.content for m in found] == order[:3]
    assert [m.content for m in everything] == order[:LIMIT]
    assert_cosine_distances(tenant_a, query, found + everything)


@COMMITTED
@pytest.mark.usefixtures("_restored")
def test_an_ivfflat_index_built_by_the_command_serves_semantic_search(
        tenant_a: Any, settings: Any, configure: Any) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1
    query = add_unit_vectors(tenant_a, ROWS)
    configure(index_type="ivfflat", ivfflat_lists=2, ivfflat_probes=2)
    out = build("--no-concurrently", "--drop-others")
    index = "mem_embedding_ivfflat_cosine_lists2"
    assert f"built {index}" in out and f"dropping {MIGRATION_INDEX}" in out
    tenant_a.add("Tomatoes need water every morning")
    request = SearchRequest(query="tomatoes water", identifiers=USER, mode="semantic",
                            threshold=0.0, layers=("user",))
    with transaction.atomic(), tenant_scope(tenant_a.ctx), \
            CaptureQueriesContext(connection) as captured:
        results = memory_search(tenant_a.ctx, request).results
    queries = [q["sql"] for q in captured.captured_queries]
    assert results[0].memory.content == "Tomatoes need water every morning"
    assert any("'ivfflat.probes', '2'" in q for q in queries)
    assert not any("hnsw.ef_search" in q for q in queries)
    assert f"Index Scan using {index}" in plan(ranking_query(queries, "<=>"))
    found, _ = ranked(tenant_a, query)
    assert [m.content for m in found] == cosine_order(tenant_a, query, LIMIT)


@COMMITTED
@pytest.mark.usefixtures("_restored")
@pytest.mark.parametrize(("metric", "operator", "index"), [
    ("l2", "<->", "mem_embedding_hnsw_l2_m16_ef64"),
    ("inner_product", "<#>", "mem_embedding_hnsw_inner_product_m16_ef64"),
])
def test_another_metric_orders_by_its_operator_and_ranks_unit_vectors_as_cosine(
        tenant_a: Any, settings: Any, configure: Any, metric: str, operator: str,
        index: str) -> None:
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1
    query = add_unit_vectors(tenant_a, ROWS)
    configure(distance=metric)
    assert f"built {index}" in build("--no-concurrently")
    found, queries = ranked(tenant_a, query)
    sql = ranking_query(queries, operator)
    shown = plan(sql)
    assert f"Index Scan using {index}" in shown
    assert f"Order By: (embedding {operator} " in shown
    assert [m.content for m in found] == cosine_order(tenant_a, query, LIMIT)
    assert_cosine_distances(tenant_a, query, found)
    configure()  # the cosine default ranks the same memories the same way
    assert [m.content for m in ranked(tenant_a, query)[0]] == [m.content for m in found]


@COMMITTED
@pytest.mark.usefixtures("_restored")
def test_the_command_is_idempotent_and_drops_the_others(tenant_a: Any, configure: Any
                                                        ) -> None:
    add_unit_vectors(tenant_a, ROWS)
    assert MIGRATION_INDEX in index_names()
    out = build()  # the default: the migration's index
    assert f"{MIGRATION_INDEX} exists" in out and "building" not in out
    configure(distance="l2", hnsw_m=8, hnsw_ef_construction=32)
    index = "mem_embedding_hnsw_l2_m8_ef32"
    assert f"built {index}" in build()  # concurrently
    assert f"{index} exists" in build()
    assert index_names() >= {MIGRATION_INDEX, index}
    out = build("--drop-others")
    assert f"{index} exists" in out and f"dropping {MIGRATION_INDEX}" in out
    assert index_names() == {index}
    assert f"{index}: exists" in build("--drop-others")
    assert index_names() == {index}


@COMMITTED
@pytest.mark.usefixtures("_restored")
def test_it_refuses_what_postgresql_or_the_configuration_refuses(
        configure: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(hnsw_m=1)  # pgvector's m is at least 2
    with pytest.raises(CommandError, match="PostgreSQL refused"):
        build("--no-concurrently")
    with transaction.atomic(using="owner"), \
            pytest.raises(CommandError, match="cannot run inside a transaction"):
        build()
    monkeypatch.setenv("VECTOR_BACKEND", "pgvector")
    monkeypatch.setenv("PGVECTOR_INDEX_TYPE", "ivfpq")
    registry.reset()  # read the environment again
    with pytest.raises(CommandError, match="INVALID_BACKEND_CONFIG"):
        build()
