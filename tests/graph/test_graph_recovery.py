"""Backups, point-in-time restore, erasure through snapshots and backups, schema migrations
and the readers' freshness (seed 001 "Automated Graph Backups", "Schema Migration Support",
"Load graph from S3")."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from graph import backups, maintenance, schema, selectors, snapshots, store
from graph.objects import object_store
from memories.services.deletion import memories_erase
from memory_project.errors import NotFound
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.graph.graph_helpers import graph_env, remember

pytestmark = pytest.mark.django_db
__all__ = ["graph_env"]


def test_it_restores_the_graph_as_it_was_at_a_point_in_time(tenant_a: Any,
                                                            graph_env: Any) -> None:
    remember(tenant_a, "Maria works at Google.")
    with tenant_scope(tenant_a.ctx):
        first = maintenance.graph_backup(tenant_a.ctx)
    assert first["backup"] and first["bytes"] > 0
    taken = datetime.now(UTC)
    remember(tenant_a, "Pedro lives in Lisbon.")
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["lisbon"])
        report = maintenance.graph_restore(tenant_a.ctx, at=taken)
        assert report["before"]["entities"] > report["after"]["entities"]
        assert not selectors.entities_by_name(tenant_a.ctx, ["lisbon"])
        assert selectors.entities_by_name(tenant_a.ctx, ["google"])
        assert AuditEntry.objects.filter(action="graph_restored").count() == 1
        with pytest.raises(NotFound):
            maintenance.graph_restore(tenant_a.ctx, at=taken - timedelta(days=30))


def test_a_restore_does_not_bring_back_memories_erased_since(tenant_a: Any,
                                                             graph_env: Any) -> None:
    memory, = remember(tenant_a, "Maria works at Google.")
    with tenant_scope(tenant_a.ctx):
        maintenance.graph_backup(tenant_a.ctx)
        memories_erase(tenant_a.ctx, memory_ids=[memory.pk], reason="test")
        report = maintenance.graph_restore(tenant_a.ctx, at=datetime.now(UTC))
        assert report["erasedSince"] == 1
        assert not selectors.entities_by_name(tenant_a.ctx, ["maria"])


def test_erased_content_leaves_every_object_once_backups_expire(tenant_a: Any,
                                                                graph_env: Any) -> None:
    memory, = remember(tenant_a, "Zebulon Quaxley works at Google.")
    with tenant_scope(tenant_a.ctx):
        maintenance.graph_backup(tenant_a.ctx)
    from graph.writer import graph_write

    graph_write(tenant_a.ctx.tenant_id, "delete_memories", {"ids": [str(memory.pk)]})
    remember(tenant_a, "Pedro lives in Lisbon.")  # two newer snapshots push the old one out
    remember(tenant_a, "Ana lives in Porto.")
    objects = object_store()
    prefix = snapshots.tenant_prefix(tenant_a.ctx.tenant_id)

    def holding() -> list[str]:
        return [key for key in objects.list(prefix) if b"Quaxley" in objects.get(key)]

    snapshots.snapshots_gc(tenant_a.ctx.tenant_id)
    assert holding() and all("/backups/" in key for key in holding())  # only the backup
    with tenant_scope(tenant_a.ctx):  # the next 6-hourly backup, after the erasure
        maintenance.graph_backup(tenant_a.ctx)
    later = datetime.now(UTC) + timedelta(days=8)
    backups.backups_prune(tenant_a.ctx.tenant_id, now=later, retention_days=7)
    assert holding() == []


def test_a_failing_migration_rolls_back_and_refuses_to_open(tmp_path: Any) -> None:
    conn = duckdb.connect(str(tmp_path / "g.duckdb"))
    broken = (*schema.MIGRATIONS, schema.Migration(99, "broken", (
        "ALTER TABLE entities ADD COLUMN note VARCHAR", "SELECT * FROM no_such_table")))
    with pytest.raises(schema.SchemaMigrationFailed) as failed:
        schema.migrate(conn, broken)
    assert failed.value.version == 99
    assert schema.current_version(conn) == 2
    columns = [row[0] for row in conn.execute("DESCRIBE entities").fetchall()]
    assert "note" not in columns  # rolled back
    assert schema.migrate(conn) == []  # the shipped migrations are current


def test_readers_see_an_acknowledged_write_at_once(tenant_a: Any, graph_env: Any) -> None:
    remember(tenant_a, "Maria works at Google.")
    with tenant_scope(tenant_a.ctx):
        assert not selectors.entities_by_name(tenant_a.ctx, ["lisbon"])
    remember(tenant_a, "Pedro lives in Lisbon.")
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["lisbon"])  # reloaded, no restart


def test_a_new_process_loads_the_graph_from_object_storage(tenant_a: Any,
                                                           graph_env: Any) -> None:
    remember(tenant_a, "Maria works at Google.")
    store.forget_readers()  # a cold process: no loaded graph, no part-file cache
    for cached in (graph_env.GRAPH_DIR / "cache").glob("*/*.parquet"):
        cached.unlink()
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["google"])
    graph = store.reader(tenant_a.ctx.tenant_id)
    assert not graph.fell_back


def test_a_corrupted_newest_snapshot_falls_back_to_the_previous_one(tenant_a: Any,
                                                                    graph_env: Any) -> None:
    remember(tenant_a, "Maria works at Google.")
    remember(tenant_a, "Pedro lives in Lisbon.")
    objects = object_store()
    prefix = snapshots.tenant_prefix(tenant_a.ctx.tenant_id)
    manifests = sorted(k for k in objects.list(prefix) if "/manifest-" in k)
    objects.put(manifests[-1], b"{truncated")
    store.forget_readers()
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["google"])  # the previous snapshot
    assert store.reader(tenant_a.ctx.tenant_id).fell_back


def test_the_restore_command_restores_and_refuses_bad_times(tenant_a: Any,
                                                            graph_env: Any) -> None:
    remember(tenant_a, "Maria works at Google.")
    with tenant_scope(tenant_a.ctx):
        maintenance.graph_backup(tenant_a.ctx)
    out = io.StringIO()
    call_command("graph_restore", "--tenant", tenant_a.tenant.slug, "--at",
                 datetime.now(UTC).isoformat(), stdout=out)
    assert json.loads(out.getvalue())["after"]["entities"] == 2
    for bad in ("yesterday", "2020-01-01T00:00:00"):
        with pytest.raises(CommandError):
            call_command("graph_restore", "--tenant", tenant_a.tenant.slug, "--at", bad,
                         stdout=io.StringIO())
