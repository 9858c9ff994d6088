"""The graph store's tables and their versioned, additive migrations (seed 001 "Schema
Migration Support", "Composite Index Optimization").

Four tenant-owned tables (seed 001 names):

- ``memory_nodes``: one row per memory that has been through extraction (no content: the
  memory itself stays in PostgreSQL);
- ``entities``: one row per resolved entity of a tenant (``canonical`` is the resolution key,
  ``aliases`` the surface forms seen);
- ``memory_edges``: memory → entity (``MENTIONS``) and memory → memory edges;
- ``entity_edges``: typed relations between entities (``WORKS_ON``, ``CAUSED_BY``, …), each
  derived from one memory (``memory_id``), so that deleting the memory removes them.

Every row carries ``tenant_id``; soft deletion sets ``deleted_at`` on the rows derived from a
soft-deleted memory (seed 001 "Soft delete with deferred cleanup").

:func:`migrate` applies the pending entries of :data:`MIGRATIONS` in order, each in its own
transaction with its ``schema_version`` row; a failing step rolls back and raises
:class:`SchemaMigrationFailed`, which stops the store from opening (and so the process from
serving graph writes) until the migration is fixed. Migrations only add (tables, columns,
indexes), so processes on the previous version keep working during a rolling deployment.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: The graph tables, in the order snapshots and integrity scans walk them.
TABLES = ("memory_nodes", "entities", "memory_edges", "entity_edges")


@dataclass(frozen=True)
class Migration:
    """One schema step: ``version`` (strictly increasing), a name, and its statements."""

    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "graph tables", (
        """CREATE TABLE IF NOT EXISTS memory_nodes (
            tenant_id UUID NOT NULL, id UUID NOT NULL, layer VARCHAR NOT NULL,
            content_hash VARCHAR NOT NULL, created_at TIMESTAMPTZ NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL, deleted_at TIMESTAMPTZ)""",
        """CREATE TABLE IF NOT EXISTS entities (
            tenant_id UUID NOT NULL, id UUID NOT NULL, canonical VARCHAR NOT NULL,
            name VARCHAR NOT NULL, type VARCHAR NOT NULL, aliases VARCHAR[] NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, deleted_at TIMESTAMPTZ)""",
        """CREATE TABLE IF NOT EXISTS memory_edges (
            tenant_id UUID NOT NULL, source_id UUID NOT NULL, target_id UUID NOT NULL,
            target_kind VARCHAR NOT NULL, relation VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, deleted_at TIMESTAMPTZ)""",
        """CREATE TABLE IF NOT EXISTS entity_edges (
            tenant_id UUID NOT NULL, source_id UUID NOT NULL, target_id UUID NOT NULL,
            relation VARCHAR NOT NULL, memory_id UUID NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, deleted_at TIMESTAMPTZ)""",
    )),
    Migration(2, "composite indexes (seed 001)", (
        "CREATE INDEX IF NOT EXISTS idx_edges_tenant_source ON memory_edges(tenant_id, source_id)",
        "CREATE INDEX IF NOT EXISTS idx_edges_tenant_target ON memory_edges(tenant_id, target_id)",
        "CREATE INDEX IF NOT EXISTS idx_nodes_tenant ON memory_nodes(tenant_id)",
        "CREATE INDEX IF NOT EXISTS idx_entities_tenant ON entities(tenant_id)",
        "CREATE INDEX IF NOT EXISTS idx_nodes_tenant_id ON memory_nodes(tenant_id, id)",
        "CREATE INDEX IF NOT EXISTS idx_entities_tenant_canonical "
        "ON entities(tenant_id, canonical)",
        "CREATE INDEX IF NOT EXISTS idx_entity_edges_tenant_source "
        "ON entity_edges(tenant_id, source_id)",
        "CREATE INDEX IF NOT EXISTS idx_entity_edges_tenant_memory "
        "ON entity_edges(tenant_id, memory_id)",
    )),
)

_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"""


class SchemaMigrationFailed(RuntimeError):
    """A migration step failed and was rolled back; the store must not open. ``version`` and
    ``statement`` name the step."""

    def __init__(self, version: int, statement: str, cause: Exception) -> None:
        self.version = version
        self.statement = statement
        super().__init__(f"graph schema migration {version} failed at {statement[:80]!r}: "
                         f"{cause}")


def current_version(conn: Any) -> int:
    """The highest applied version (0 for a new database)."""
    conn.execute(_VERSION_TABLE)
    row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchall()[0]
    return int(row[0])


def migrate(conn: Any, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Apply the pending migrations to the DuckDB connection ``conn``, in order.

    Returns:
        The versions applied (empty when the schema is current).

    Raises:
        SchemaMigrationFailed: a step failed; its transaction was rolled back, so the schema
            is the previous version's, and the failure is logged with the step.
    """
    applied: list[int] = []
    version = current_version(conn)
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version <= version:
            continue
        conn.execute("BEGIN TRANSACTION")
        statement = ""
        try:
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?, ?, now())",
                         [migration.version, migration.name])
            conn.execute("COMMIT")
        except Exception as exc:
            conn.execute("ROLLBACK")
            logger.error("graph schema migration %s (%s) failed at %r: %s", migration.version,
                         migration.name, statement, exc)
            raise SchemaMigrationFailed(migration.version, statement, exc) from exc
        applied.append(migration.version)
        version = migration.version
    return applied
