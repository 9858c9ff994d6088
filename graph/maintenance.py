"""The graph's upkeep: backups every 6 hours kept 7 days, point-in-time restore, the purge of
soft-deleted graph data, the daily integrity scan, and the checkpoint that publishes what a
failed publication left behind (seed 001 "Automated Graph Backups", "Periodic integrity
scan", "Soft delete with deferred cleanup").

Erased content and backups: erasing a memory removes its rows from the writer's file at once
and from the next snapshot; older snapshots are garbage-collected after each backup (only the
two newest manifests and what backups reference are kept), and a backup is deleted when it is
older than ``GRAPH_BACKUP_RETENTION_DAYS`` (7) — except a tenant's newest backup, which is
always kept; the next backup (every 6 hours) is taken after the erasure and replaces it as
the newest. So erased content is gone from every object within the retention period, and
restoring a backup taken before an erasure re-applies the erasures made since
(:func:`graph_restore`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.conf import settings

from graph import backups, snapshots, store
from graph.coordination import key, redis_client
from graph.objects import ObjectStoreUnavailable
from graph.schema import TABLES
from graph.services import graph_integrity_scan, graph_purge_deleted
from graph.tenant_sql import tenant_execute
from graph.writer import GraphWriteTimeout, graph_write, writer_lock
from memories.models import Memory
from memory_project.errors import InvalidInput, NotFound
from tenants.audit import audit_record
from tenants.context import TenantContext

logger = logging.getLogger(__name__)

#: Errors after which a graph job is retried.
RETRYABLE = (GraphWriteTimeout, ObjectStoreUnavailable)


def graph_backup(ctx: TenantContext) -> dict[str, Any]:
    """Back up the tenant's current snapshot, prune backups past retention, and drop
    snapshot objects nothing references any more."""
    with writer_lock() as held:  # no snapshot is published while it is copied or collected
        if not held:
            raise GraphWriteTimeout(details={"op": "backup"})
        info = backups.backup_create(ctx.tenant_id)
        pruned = backups.backups_prune(ctx.tenant_id,
                                       retention_days=settings.GRAPH_BACKUP_RETENTION_DAYS)
        collected = snapshots.snapshots_gc(ctx.tenant_id)
    return {"backup": info.prefix if info else None, "bytes": info.bytes if info else 0,
            "pruned": len(pruned), "collected": len(collected)}


def graph_integrity_job(ctx: TenantContext) -> dict[str, Any]:
    """The daily scan; repairs what it finds (violations are audited first)."""
    return graph_integrity_scan(ctx, repair=True)


def graph_purge_job(ctx: TenantContext) -> dict[str, Any]:
    """Remove soft-deleted graph data past the tenant's retention."""
    return graph_purge_deleted(ctx)


def graph_checkpoint() -> dict[str, int]:
    """Publish every tenant's dirty partitions (those a failed publication left), under the
    writer lock.

    Returns:
        ``{"tenants": n, "failed": n}``.
    """
    client = redis_client()
    tenants = sorted(k.decode().removeprefix(key("dirty:"))
                     for k in client.scan_iter(match=key("dirty:*")))
    failed = 0
    if not tenants:
        return {"tenants": 0, "failed": 0}
    with writer_lock() as held:
        if not held:
            raise GraphWriteTimeout(details={"op": "checkpoint"})
        with store.writer_connection() as conn:
            for tenant in tenants:
                failed += store.publish(conn, tenant) is None
    return {"tenants": len(tenants), "failed": failed}


def counts(ctx: TenantContext) -> dict[str, int]:
    """Rows per graph table of the tenant (as readers see it)."""
    cursor = store.reader(ctx.tenant_id).cursor(TABLES)
    tenant = {"tenant_id": str(ctx.tenant_id)}
    return {table: int(tenant_execute(cursor, f"SELECT count(*) FROM {table} WHERE tenant_id = "
                                      "$tenant_id", tenant)[0][0]) for table in TABLES}


def graph_restore(ctx: TenantContext, *, at: datetime) -> dict[str, Any]:
    """Point-in-time restore (seed 001): replace the tenant's graph with the newest backup
    taken at or before ``at``, then remove the graph data of memories erased since (they are
    gone from the memory store). Audited as ``graph_restored`` with the counts before and
    after.

    Raises:
        InvalidInput: ``at`` without a timezone. NotFound: no backup at or before ``at``.
    """
    if at.tzinfo is None:
        raise InvalidInput("at must carry a timezone.", details={"field": "at"})
    info = backups.backup_nearest(ctx.tenant_id, at)
    if info is None:
        raise NotFound("No graph backup at or before that time.",
                       details={"at": at.isoformat()})
    before = counts(ctx)
    result = graph_write(ctx.tenant_id, "restore_backup", {"prefix": info.prefix,
                                                          "takenAt": info.taken_at.isoformat()})
    node_ids = [row[0] for row in tenant_execute(
        store.reader(ctx.tenant_id).cursor(("memory_nodes",)),
        "SELECT id FROM memory_nodes WHERE tenant_id = $tenant_id",
        {"tenant_id": str(ctx.tenant_id)})]
    existing = set(Memory.objects.filter(pk__in=node_ids).values_list("pk", flat=True))
    erased = [str(pk) for pk in node_ids if pk not in existing]
    if erased:
        graph_write(ctx.tenant_id, "delete_memories", {"ids": erased})
    after = counts(ctx)
    details = {"backup": info.prefix, "takenAt": info.taken_at.isoformat(), "before": before,
               "after": after, "erasedSince": len(erased)}
    audit_record(ctx, action="graph_restored", target_type="graph", details=details)
    logger.info("graph of tenant %s restored from %s: %s", ctx.tenant_id, info.prefix, details)
    return {**details, "version": result.get("version")}
