"""``/health/graph`` and ``/ready/graph`` (seed 001 "Graph Health Checks"), in the style of
``memory_project.health``: plain views, no API key, no rate limit, and a failing check names
only the type of its error (the text, which may name hosts or paths, goes to the log).

- ``/health/graph``: DuckDB answers (``SELECT 1`` in memory), the object store answers
  (``ObjectStore.ping``), and the writer's file is at the current schema version — read only
  when the file exists and the writer lock is free at once (the check never waits for the
  writer, and no writer opens the file while it reads).
- ``/ready/graph``: the graph can answer a query — a synthetic graph in an in-memory DuckDB
  with the migrated schema, indexed as readers index theirs, answers a traversal through
  ``graph.traversal`` — and the object store, where readers load snapshots from, answers.

Each answers ``{"status", "components": {name: {"status", "latencyMs", ...}}}``: 200 when
nothing is ``unhealthy``, else 503.

The routes are at the end (``urlpatterns``): the project's URL configuration includes this
module by name.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import duckdb
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.http import require_GET

from graph import store
from graph.adjacency import build as build_adjacency
from graph.objects import ObjectStore, S3Store, object_store, s3_client
from graph.ops import ENTITY, MENTIONS
from graph.schema import MIGRATIONS, migrate
from graph.tenant_sql import tenant_execute
from graph.traversal import find_related
from graph.writer import writer_lock

logger = logging.getLogger(__name__)

#: Seconds an object-store probe may wait for S3 (one attempt, no retries).
PROBE_TIMEOUT_SECONDS = 2.0
#: The synthetic graph of the readiness probe: a tenant no real one has, a memory, an entity.
_PROBE_TENANT = uuid.UUID(int=1)
_PROBE_MEMORY = uuid.UUID(int=2)
_PROBE_ENTITY = uuid.UUID(int=3)

Outcome = dict[str, Any]


def _check(name: str, probe: Callable[[], Outcome | None]) -> Outcome:
    """Run ``probe``: ``{"status": "healthy", "latencyMs"}`` plus what it returns (it may
    lower the status to ``degraded``), or ``unhealthy`` with the error's type name."""
    start = time.perf_counter()
    try:
        outcome: Outcome = {"status": "healthy", **(probe() or {})}
    except Exception as exc:
        logger.warning("graph probe %s failed: %s", name, exc)
        outcome = {"status": "unhealthy", "error": type(exc).__name__}
    outcome["latencyMs"] = round((time.perf_counter() - start) * 1000, 2)
    return outcome


def duckdb_alive() -> None:
    """An in-memory DuckDB answers ``SELECT 1``."""
    conn = duckdb.connect(":memory:")
    try:
        if conn.execute("SELECT 1").fetchall() != [(1,)]:
            raise RuntimeError("DuckDB did not answer SELECT 1 with 1")
    finally:
        conn.close()


@functools.lru_cache(maxsize=4)
def _s3_probe_store(endpoint: str, bucket: str, key_id: str, secret: str,
                    region: str) -> S3Store:
    client = s3_client(endpoint_url=endpoint, access_key_id=key_id, secret_access_key=secret,
                       region=region, timeout_seconds=PROBE_TIMEOUT_SECONDS, max_attempts=1)
    return S3Store(bucket, client)


def probe_store() -> ObjectStore:
    """The configured object store, with at most :data:`PROBE_TIMEOUT_SECONDS` per S3 call
    and no retries, so an unreachable endpoint fails the probe quickly."""
    if not settings.S3_ENDPOINT_URL:
        return object_store()
    return _s3_probe_store(settings.S3_ENDPOINT_URL, settings.S3_BUCKET,
                           settings.S3_ACCESS_KEY_ID, settings.S3_SECRET_ACCESS_KEY,
                           settings.S3_REGION)


def object_store_reachable() -> None:
    """``ObjectStore.ping``: the bucket answers (S3) or the directory is writable.

    Raises:
        graph.objects.ObjectStoreUnavailable: it does not.
    """
    probe_store().ping()


def writer_schema() -> Outcome:
    """The schema version of the writer's file against the newest migration.

    ``state``: ``absent`` (no file yet), ``busy`` (the writer holds it: not read), or
    ``current``; ``degraded`` with ``state: behind`` when migrations are pending (the writer
    applies them when it next opens the file).

    Raises:
        redis.RedisError: the writer lock cannot be asked for. duckdb.Error: unreadable file.
    """
    expected = max(m.version for m in MIGRATIONS)
    found: Outcome = {"expectedVersion": expected}
    path_ = store.writer_path()
    if not path_.exists():
        return {**found, "state": "absent"}
    with writer_lock(block=False) as held:
        if not held:
            return {**found, "state": "busy"}
        conn = duckdb.connect(str(path_), read_only=True)
        try:
            tables = {row[0] for row in conn.execute(
                "SELECT table_name FROM information_schema.tables").fetchall()}
            version = int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_version"
                                       ).fetchall()[0][0]) if "schema_version" in tables else 0
        finally:
            conn.close()
    if version < expected:
        return {**found, "status": "degraded", "state": "behind", "version": version}
    return {**found, "state": "current", "version": version}


_PROBE_ROWS = (
    "INSERT INTO memory_nodes VALUES ($tenant_id, $node_memory, $layer, $hash, now(), now(), "
    "NULL)",
    "INSERT INTO entities VALUES ($tenant_id, $node_entity, $name, $name, $type, $aliases, "
    "now(), NULL)",
    "INSERT INTO memory_edges VALUES ($tenant_id, $node_memory, $node_entity, $kind_entity, "
    "$relation, now(), NULL)",
)


def graph_queryable() -> None:
    """A synthetic graph (one memory mentioning one entity) in an in-memory DuckDB with the
    migrated schema (``graph.schema.migrate``), indexed as readers index theirs
    (``graph.store``, ``graph.adjacency``), answers a two-hop traversal
    (``graph.traversal.find_related``) with the entity. Touches no stored graph.

    Raises:
        RuntimeError: the traversal answered something else. duckdb.Error: it failed.
    """
    tenant = str(_PROBE_TENANT)
    conn = duckdb.connect(":memory:")
    try:
        migrate(conn)
        # a statement binds the parameters whose names its text holds: none is the start of
        # another
        rows = {"tenant_id": tenant, "node_memory": _PROBE_MEMORY, "node_entity": _PROBE_ENTITY,
                "layer": "user", "hash": "probe", "name": "probe", "type": "PROBE",
                "aliases": ["probe"], "kind_entity": ENTITY, "relation": MENTIONS}
        for sql in _PROBE_ROWS:
            tenant_execute(conn, sql, rows)
        store.traversal_tables(conn, tenant)
        index = build_adjacency(conn.cursor(), tenant)
        hops = find_related(index, tenant, start=_PROBE_MEMORY, depth=2, limit=10)
    finally:
        conn.close()
    if [(hop.node, hop.kind) for hop in hops] != [(_PROBE_ENTITY, ENTITY)]:
        raise RuntimeError(f"the probe traversal answered {hops!r}")


def _answer(components: dict[str, Outcome], *, ok: str, degraded: str, failed: str
            ) -> JsonResponse:
    statuses = {c["status"] for c in components.values()}
    status = failed if "unhealthy" in statuses else degraded if "degraded" in statuses else ok
    return JsonResponse({"status": status, "components": components},
                        status=503 if status == failed else 200)


@require_GET
def graph_health(request: HttpRequest) -> JsonResponse:
    """``/health/graph``: ``{"status": "healthy" | "degraded" | "unhealthy", "components":
    {"duckdb", "objectStore", "schema"}}``, each with ``status`` and ``latencyMs``
    (``schema`` also ``state``, ``version``, ``expectedVersion``); 503 when one is
    unhealthy."""
    return _answer({"duckdb": _check("duckdb", duckdb_alive),
                    "objectStore": _check("objectStore", object_store_reachable),
                    "schema": _check("schema", writer_schema)},
                   ok="healthy", degraded="degraded", failed="unhealthy")


@require_GET
def graph_ready(request: HttpRequest) -> JsonResponse:
    """``/ready/graph``: ``{"status": "ready" | "not_ready", "components": {"query",
    "objectStore"}}``, each with ``status`` and ``latencyMs``; 503 unless both are
    healthy."""
    return _answer({"query": _check("query", graph_queryable),
                    "objectStore": _check("objectStore", object_store_reachable)},
                   ok="ready", degraded="ready", failed="not_ready")


urlpatterns = [
    path("health/graph", graph_health, name="health-graph"),
    path("ready/graph", graph_ready, name="ready-graph"),
]
