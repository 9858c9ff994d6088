"""Where the graph lives: the writer's DuckDB file, the published snapshots, and each
process's read-only copy of a tenant's graph (seed 001 "Embedded Graph Storage").

- **Writer**: ``GRAPH_DIR/graph.duckdb``, one file for all tenants (``tenant_id`` on every
  row), opened only by the process holding the writer lock (``graph.writer``), migrated on
  open (:func:`graph.schema.migrate`: a failed migration refuses to open it).
- **Snapshots**: after each drain the writer exports every partition a write touched
  (``graph.partitions``) to Parquet and publishes them under ``{tenant}/graph/`` in the object
  store (``graph.snapshots``: two-phase commit), then sets ``<prefix>version:<tenant>``.
- **Readers**: a process answers graph queries from an in-memory DuckDB per tenant, loaded
  lazily from the tenant's latest snapshot (its own prefix only) and reloaded when the
  version in Redis moves on: a reader sees every write that has been acknowledged, because a
  write is acknowledged after its snapshot is published. Part files are cached on disk by
  their (immutable) key, so a reload fetches only the partitions that changed.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import redis
from django.conf import settings
from prometheus_client import Gauge

from graph import snapshots
from graph.adjacency import REVERSED, Adjacency
from graph.adjacency import build as build_adjacency
from graph.coordination import key, redis_client
from graph.partitions import BUCKET_SQL, parse_partition
from graph.schema import TABLES, migrate
from graph.tenant_sql import tenant_execute, tenant_relation

logger = logging.getLogger(__name__)

CACHE_HIT_RATIO = Gauge("graph_cache_hit_ratio",
                        "Share of graph reads served without loading a snapshot")
#: The readers' traversal tables: ``node_index`` numbers every live node (in id order, so
#: ordering by number is ordering by id) and ``adjacency`` holds every live memory → entity
#: mention and entity → entity relation in both directions, by number (``graph.traversal``);
#: a row walking an edge against its stored direction has the relation marked with
#: :data:`graph.adjacency.REVERSED`.
NODE_INDEX_SQL = """CREATE OR REPLACE TABLE node_index AS
    SELECT tenant_id, CAST(row_number() OVER (ORDER BY id) AS INTEGER) AS idx, id, kind FROM (
        SELECT n.tenant_id, n.id, CAST($memory AS VARCHAR) AS kind FROM memory_nodes n
         WHERE n.tenant_id = $tenant_id AND n.deleted_at IS NULL
        UNION ALL
        SELECT e.tenant_id, e.id, CAST($entity AS VARCHAR) FROM entities e
         WHERE e.tenant_id = $tenant_id AND e.deleted_at IS NULL)"""
ADJACENCY_SQL = """CREATE OR REPLACE TABLE adjacency AS
    SELECT s.tenant_id, s.idx AS node, t.idx AS neighbour, pairs.relation FROM (
        SELECT m.source_id AS a, m.target_id AS b, m.relation FROM memory_edges m
         WHERE m.tenant_id = $tenant_id AND m.deleted_at IS NULL
        UNION ALL
        SELECT m.target_id, m.source_id, $reverse || m.relation FROM memory_edges m
         WHERE m.tenant_id = $tenant_id AND m.deleted_at IS NULL
        UNION ALL
        SELECT e.source_id, e.target_id, e.relation FROM entity_edges e
         WHERE e.tenant_id = $tenant_id AND e.deleted_at IS NULL
        UNION ALL
        SELECT e.target_id, e.source_id, $reverse || e.relation FROM entity_edges e
         WHERE e.tenant_id = $tenant_id AND e.deleted_at IS NULL) pairs
    JOIN node_index s ON s.id = pairs.a AND s.tenant_id = $tenant_id
    JOIN node_index t ON t.id = pairs.b AND t.tenant_id = $tenant_id"""


def traversal_tables(conn: Any, tenant: str) -> None:
    """(Re)build ``node_index`` and ``adjacency`` from the four graph tables of ``conn``."""
    names = {"tenant_id": tenant, "memory": "memory", "entity": "entity", "reverse": REVERSED}
    tenant_execute(conn, NODE_INDEX_SQL, names)
    tenant_execute(conn, ADJACENCY_SQL, names)


def writer_path() -> Path:
    """The writer's database file."""
    return Path(settings.GRAPH_DIR) / "graph.duckdb"


@contextmanager
def writer_connection() -> Iterator[Any]:
    """Open (and migrate) the writer's file; the caller holds the writer lock.

    Raises:
        graph.schema.SchemaMigrationFailed: the schema could not be brought up to date.
    """
    path = writer_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = duckdb.connect(str(path))
    try:
        migrate(conn)
        yield conn
    finally:
        conn.close()


def mark_dirty(tenant: str, partitions: set[str]) -> None:
    """Remember partitions changed since the tenant's last published snapshot."""
    if partitions:
        redis_client().sadd(key(f"dirty:{tenant}"), *sorted(partitions))


def publish(conn: Any, tenant: str) -> int | None:
    """Export the tenant's dirty partitions and publish them as its next snapshot.

    Returns:
        The new snapshot version, the current one when nothing was dirty, or ``None`` when
        publishing failed (logged; the partitions stay dirty for the next attempt).
    """
    client = redis_client()
    dirty = sorted(p.decode() if isinstance(p, bytes) else p
                   for p in client.smembers(key(f"dirty:{tenant}")))
    if not dirty:
        version = client.get(key(f"version:{tenant}"))
        return int(version) if version is not None else None
    try:
        changed = {name: export_partition(conn, tenant, name) for name in dirty}
        manifest = snapshots.snapshot_publish(uuid.UUID(tenant), changed)
    except Exception as exc:
        logger.error("graph snapshot of tenant %s not published (%d partitions stay dirty): %s",
                     tenant, len(dirty), exc)
        return None
    client.srem(key(f"dirty:{tenant}"), *dirty)
    client.set(key(f"version:{tenant}"), manifest.version)
    return int(manifest.version)


def export_partition(conn: Any, tenant: str, name: str) -> tuple[bytes, int]:
    """One partition of a tenant as Parquet bytes and its row count."""
    table, bucket = parse_partition(name)
    relation = tenant_relation(conn, f"SELECT * FROM {table} WHERE tenant_id = $tenant_id "
                               f"AND {BUCKET_SQL[table]} = $bucket",
                               {"tenant_id": tenant, "bucket": bucket})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part.parquet"
        relation.write_parquet(str(path))
        rows = int(tenant_execute(conn, f"SELECT count(*) FROM {table} WHERE tenant_id = "
                                  f"$tenant_id AND {BUCKET_SQL[table]} = $bucket",
                                  {"tenant_id": tenant, "bucket": bucket})[0][0])
        return path.read_bytes(), rows


class ReaderGraph:
    """One tenant's graph, read-only, in an in-memory DuckDB of this process."""

    def __init__(self, tenant: str, version: int | None) -> None:
        self.tenant = tenant
        self.version = version
        self.conn = duckdb.connect(":memory:")
        migrate(self.conn)
        self.loaded_at = time.time()
        self.fell_back = False
        self._snapshot: Any = None
        self._loaded: set[str] = set()
        self._parts: dict[str, str] = {}  # partition name → checksum of the rows loaded
        self._adjacency: Adjacency | None = None
        self._types: dict[str, str] | None = None
        self._lock = threading.Lock()

    def cursor(self, tables: tuple[str, ...] = (*TABLES, "adjacency")) -> Any:
        """A cursor on the tenant's graph with ``tables`` loaded (lazily, on first use)."""
        with self._lock:
            missing = [t for t in tables if t not in self._loaded]
            if missing:
                self._load(missing)
        return self.conn.cursor()

    def adjacency(self) -> Adjacency:
        """The tenant's traversal index (``graph.adjacency``), built on first use."""
        cursor = self.cursor()
        with self._lock:
            if self._adjacency is None:
                self._adjacency = build_adjacency(cursor, self.tenant)
            return self._adjacency

    def entity_types(self) -> dict[str, str]:
        """Canonical name → type of every live entity, read once per loaded version."""
        cursor = self.cursor(("entities",))
        with self._lock:
            if self._types is None:
                rows = tenant_execute(cursor, "SELECT canonical, type FROM entities WHERE "
                                      "tenant_id = $tenant_id AND deleted_at IS NULL",
                                      {"tenant_id": self.tenant})
                self._types = {row[0]: row[1] for row in rows}
            return self._types

    def _load(self, tables: list[str]) -> None:
        started = time.monotonic()
        if self._snapshot is None and not self._loaded:
            self._snapshot = snapshots.snapshot_load(uuid.UUID(self.tenant))
            self.fell_back = bool(self._snapshot is not None and self._snapshot.fell_back)
        served = self._snapshot.manifest.key if self._snapshot is not None else None
        base = [t for t in tables if t != "adjacency"]
        if "adjacency" in tables:
            base = sorted(set(base) | set(TABLES) - self._loaded)
        parts = 0
        for table in base:
            files = self._files(table)
            parts += len(files)
            self.conn.execute(f"DELETE FROM {table}").fetchall()
            if files:
                self.conn.execute(f"INSERT INTO {table} SELECT * FROM read_parquet($files)",
                                  {"files": [path for _, _, path in files]}).fetchall()
            self._parts.update({name: digest for name, digest, _ in files})
            self._loaded.add(table)
        if "adjacency" in tables:
            traversal_tables(self.conn, self.tenant)
            self._loaded.add("adjacency")
        logger.info("graph of tenant %s: loaded %s (%d partitions) in %.0f ms", self.tenant,
                    ",".join(tables), parts, (time.monotonic() - started) * 1000)
        if self._snapshot is not None and self._snapshot.manifest.key != served:
            # A corrupted partition made the snapshot fall back to an older one: every table
            # loaded so far is reloaded from the snapshot now served, so none mixes versions.
            self.fell_back = True
            reload, self._loaded = sorted(self._loaded | set(tables)), set()
            self._adjacency = self._types = None
            self._load(reload)

    def refresh(self, version: int | None) -> None:
        """Move to the tenant's snapshot ``version``, reloading only the partitions whose
        content changed (in one transaction: a query sees the old rows or the new ones).

        Raises:
            graph.snapshots.SnapshotCorrupted, ObjectStoreUnavailable: the new snapshot cannot
                be read (the caller then loads the tenant afresh).
        """
        with self._lock:
            snapshot = snapshots.snapshot_load(uuid.UUID(self.tenant))
            if snapshot is None or snapshot.fell_back:
                raise snapshots.SnapshotCorrupted("the newest graph snapshot is not readable")
            self._snapshot, self.version = snapshot, version
            tables = self._loaded - {"adjacency"}
            wanted = {name: ref.sha256 for name, ref in snapshot.manifest.partitions.items()
                      if parse_partition(name)[0] in tables}
            stale = sorted({*self._parts} - {*wanted} | {name for name, digest in wanted.items()
                                                         if self._parts.get(name) != digest})
            if not stale:
                return
            self.conn.execute("BEGIN TRANSACTION").fetchall()
            for name in stale:
                table, bucket = parse_partition(name)
                tenant_execute(self.conn, f"DELETE FROM {table} WHERE tenant_id = $tenant_id "
                               f"AND {BUCKET_SQL[table]} = $bucket",
                               {"tenant_id": self.tenant, "bucket": bucket})
                self._parts.pop(name, None)
                if name in wanted:
                    path = self._cached(name, wanted[name])
                    self.conn.execute(f"INSERT INTO {table} SELECT * FROM read_parquet($file)",
                                      {"file": path}).fetchall()
                    self._parts[name] = wanted[name]
            if "adjacency" in self._loaded:
                traversal_tables(self.conn, self.tenant)
            self.conn.execute("COMMIT").fetchall()
            self._adjacency = self._types = None
            logger.info("graph of tenant %s: version %s, %d partitions reloaded", self.tenant,
                        version, len(stale))

    def _cached(self, name: str, digest: str) -> str:
        """The local file of a partition's payload (downloaded once: named by checksum)."""
        cache = Path(settings.GRAPH_DIR) / "cache" / self.tenant
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / (digest + ".parquet")
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(self._snapshot.partition(name))
            tmp.replace(path)
        return str(path)

    def _files(self, table: str) -> list[tuple[str, str, str]]:
        """``(partition, checksum, local file)`` of the table's partitions in the snapshot."""
        if self._snapshot is None:
            return []
        files = []
        cache = Path(settings.GRAPH_DIR) / "cache" / self.tenant
        cache.mkdir(parents=True, exist_ok=True)
        for name, entry in sorted(self._snapshot.manifest.partitions.items()):
            if parse_partition(name)[0] != table:
                continue
            try:
                files.append((name, entry.sha256, self._cached(name, entry.sha256)))
            except KeyError:  # gone from the snapshot it fell back to
                continue
        return files


_readers: dict[str, ReaderGraph] = {}
_readers_lock = threading.Lock()
_reads = {"hits": 0, "total": 0}


def reader(tenant_id: uuid.UUID | str) -> ReaderGraph:
    """This process's read-only graph of a tenant, at the latest published version (see the
    module doc); reloaded when a newer snapshot was published. Redis unreachable: the copy
    already loaded is used."""
    tenant = str(uuid.UUID(str(tenant_id)))
    try:
        raw = redis_client().get(key(f"version:{tenant}"))
        version: int | None = int(raw) if raw is not None else None
        known = True
    except redis.RedisError as exc:
        logger.warning("graph version of tenant %s unknown (%s): serving the loaded copy",
                       tenant, exc)
        version, known = None, False
    with _readers_lock:
        current = _readers.get(tenant)
        _reads["total"] += 1
        fresh = current is not None and (not known or current.version == version)
        _reads["hits"] += fresh
        CACHE_HIT_RATIO.set(_reads["hits"] / _reads["total"])
    if fresh:
        assert current is not None
        return current
    if current is not None:
        try:
            current.refresh(version)
            return current
        except Exception as exc:  # unreadable newest snapshot: load afresh (falls back)
            logger.warning("graph of tenant %s not refreshed (%s): loading it afresh",
                           tenant, exc)
    loaded = ReaderGraph(tenant, version)
    with _readers_lock:
        _readers[tenant] = loaded
    return loaded


def forget_readers() -> None:
    """Drop every loaded reader (tests, restores)."""
    with _readers_lock:
        _readers.clear()
