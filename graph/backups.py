"""Point-in-time backups of a tenant's graph snapshot (seed 001 "Automated Graph Backups":
a versioned snapshot every 6 hours, kept 7 days; metrics for duration and size).

A backup copies the current snapshot's parts into its own folder, so that it survives
:func:`graph.snapshots.snapshots_gc` and later publishes::

    {tenant}/graph/backups/{UTC timestamp}/parts/{name}.parquet
    {tenant}/graph/backups/{UTC timestamp}/manifest.json   written last: the backup is complete

The timestamp reads ``20250102T030405.123456Z``; the manifest has the snapshot manifest's
shape (its ``version`` and ``created_at`` are those of the snapshot backed up).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from prometheus_client import Gauge, Histogram

from graph.objects import ObjectMissing, ObjectStore, object_store
from graph.snapshots import (
    Manifest,
    SnapshotCorrupted,
    SnapshotExportFailed,
    payload_problem,
    snapshot_load,
    tenant_prefix,
)

logger = logging.getLogger(__name__)

#: Seed 001 "Scheduled S3 snapshots": hours between backups, days a backup is kept.
BACKUP_INTERVAL_HOURS = 6
RETENTION_DAYS = 7
_STAMP = "%Y%m%dT%H%M%S.%fZ"

BACKUP_DURATION = Histogram(
    "graph_backup_duration_seconds", "Time to create one graph backup, in seconds",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
)
BACKUP_BYTES = Gauge(
    "graph_backup_bytes", "Payload bytes of the most recent graph backup",
    multiprocess_mode="mostrecent",
)


class BackupFailed(SnapshotExportFailed):
    """``GRAPH_BACKUP_FAILED`` (HTTP 503, retryable): a backup could not be written; what it
    wrote was removed. ``details`` name the stage and key, the cause is chained."""

    code = "GRAPH_BACKUP_FAILED"
    default_message = "The graph backup could not be written."


@dataclass(frozen=True)
class BackupInfo:
    """One complete backup: taken at ``taken_at`` (UTC), stored under ``prefix``;
    ``manifest`` points at the backup's own copies. ``duration_seconds`` is known only for a
    backup just created."""

    tenant_id: uuid.UUID
    taken_at: datetime
    prefix: str
    manifest: Manifest
    duration_seconds: float | None = None

    @property
    def bytes(self) -> int:
        """Payload bytes of all partitions in the backup."""
        return self.manifest.total_bytes

    @property
    def version(self) -> int:
        """The snapshot version that was backed up."""
        return self.manifest.version


def _utc(moment: datetime | None, name: str) -> datetime:
    if moment is None:
        return datetime.now(UTC)
    if moment.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware")
    return moment.astimezone(UTC)


def _folders(store: ObjectStore, prefix: str) -> dict[datetime, list[str]]:
    """``{taken_at: keys}`` of every backup folder, complete or not, under ``prefix``."""
    folders: dict[datetime, list[str]] = {}
    root = f"{prefix}backups/"
    for key in store.list(root):
        stamp = key[len(root):].partition("/")[0]
        try:
            taken_at = datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC)
        except ValueError:
            continue
        folders.setdefault(taken_at, []).append(key)
    return folders


def _info(store: ObjectStore, tenant_id: uuid.UUID, prefix: str, taken_at: datetime,
          keys: list[str]) -> BackupInfo | None:
    folder = f"{prefix}backups/{taken_at.strftime(_STAMP)}/"
    key = f"{folder}manifest.json"
    if key not in keys:
        return None
    try:
        manifest = Manifest.from_json(store.get(key), key=key, part_prefix=f"{folder}parts/")
    except (ObjectMissing, ValueError) as exc:
        logger.warning("graph backup manifest unreadable", extra={"key": key, "reason": str(exc)})
        return None
    return BackupInfo(tenant_id=tenant_id, taken_at=taken_at, prefix=folder, manifest=manifest)


def backup_create(tenant_id: uuid.UUID, *, now: datetime | None = None,
                  store: ObjectStore | None = None) -> BackupInfo | None:
    """Back up the tenant's current snapshot (the one :func:`graph.snapshots.snapshot_load`
    serves, every payload checksum-checked first) into ``backups/{now}/``; observes
    ``graph_backup_duration_seconds`` and sets ``graph_backup_bytes``.

    Args:
        now: the backup's time (timezone-aware); default the current time.

    Returns:
        The backup, or None when the tenant has no snapshot yet.

    Raises:
        ValueError: ``now`` is naive, or a backup at that time exists.
        SnapshotCorrupted: the tenant has no valid snapshot.
        BackupFailed: the store failed; what this backup wrote was removed.
    """
    started = time.perf_counter()
    prefix = tenant_prefix(tenant_id)
    tenant = uuid.UUID(prefix.split("/")[0])
    taken_at = _utc(now, "now")
    store = store or object_store()
    folder = f"{prefix}backups/{taken_at.strftime(_STAMP)}/"
    written: list[str] = []
    stage = "read snapshot"
    try:
        if store.list(folder):
            raise FileExistsError(f"a backup exists at {folder}")
        loaded = snapshot_load(tenant, store=store)
        if loaded is None:
            logger.info("graph backup skipped: no snapshot", extra={"tenant_id": str(tenant)})
            return None
        loaded.load_all()
        source = loaded.manifest
        stage = "copy"
        refs = {}
        for name, ref in sorted(source.partitions.items()):
            target = f"{folder}parts/{name}.parquet"
            written.append(target)
            store.copy(ref.key, target)
            refs[name] = replace(ref, key=target)
        manifest = Manifest(version=source.version, created_at=source.created_at,
                            partitions=refs, key=f"{folder}manifest.json")
        stage = "commit"
        written.append(manifest.key)
        store.put(manifest.key, manifest.to_json())
    except FileExistsError as exc:
        raise ValueError(str(exc)) from exc
    except SnapshotCorrupted:
        raise
    except Exception as exc:
        if written:
            try:
                store.delete(list(reversed(written)))
            except Exception:
                logger.warning("graph backup cleanup failed", extra={"keys": written},
                               exc_info=True)
        details = {"tenantId": str(tenant), "stage": stage, "backup": folder,
                   "lastWritten": written[-1] if written else "", "cause": type(exc).__name__}
        logger.error("graph backup failed", extra=details, exc_info=True)
        raise BackupFailed(details=details) from exc
    duration = time.perf_counter() - started
    BACKUP_DURATION.observe(duration)
    BACKUP_BYTES.set(manifest.total_bytes)
    logger.info("graph backup created", extra={
        "tenant_id": str(tenant), "backup": folder, "version": manifest.version,
        "bytes": manifest.total_bytes, "duration_seconds": round(duration, 3)})
    return BackupInfo(tenant_id=tenant, taken_at=taken_at, prefix=folder, manifest=manifest,
                      duration_seconds=duration)


def backups_list(tenant_id: uuid.UUID, *, store: ObjectStore | None = None
                 ) -> list[BackupInfo]:
    """The tenant's complete backups (manifest present and readable), oldest first.

    Raises:
        ObjectStoreUnavailable: the store did not answer.
    """
    prefix = tenant_prefix(tenant_id)
    tenant = uuid.UUID(prefix.split("/")[0])
    store = store or object_store()
    infos = (_info(store, tenant, prefix, taken_at, keys)
             for taken_at, keys in sorted(_folders(store, prefix).items()))
    return [info for info in infos if info is not None]


def backup_nearest(tenant_id: uuid.UUID, at: datetime, *, store: ObjectStore | None = None
                   ) -> BackupInfo | None:
    """The newest complete backup taken at or before ``at`` (timezone-aware), or None
    (seed "Point-in-time recovery": the nearest snapshot before the timestamp).

    Raises:
        ValueError: ``at`` is naive.
        ObjectStoreUnavailable: the store did not answer.
    """
    moment = _utc(at, "at")
    earlier = [info for info in backups_list(tenant_id, store=store) if info.taken_at <= moment]
    return earlier[-1] if earlier else None


def backups_prune(tenant_id: uuid.UUID, *, now: datetime | None = None,
                  retention_days: int = RETENTION_DAYS,
                  store: ObjectStore | None = None) -> list[datetime]:
    """Delete the tenant's backups taken more than ``retention_days`` (seed default 7) before
    ``now`` (timezone-aware, default the current time), incomplete ones included. The newest
    complete backup is always kept, however old, so that a tenant whose backups stopped is
    never left with none.

    Returns:
        When the deleted backups were taken, oldest first.

    Raises:
        ValueError: ``now`` is naive or ``retention_days`` is negative.
        ObjectStoreUnavailable: the store did not answer.
    """
    if retention_days < 0:
        raise ValueError("retention_days must not be negative")
    cutoff = _utc(now, "now") - timedelta(days=retention_days)
    prefix = tenant_prefix(tenant_id)
    tenant = uuid.UUID(prefix.split("/")[0])
    store = store or object_store()
    folders = _folders(store, prefix)
    complete = [taken_at for taken_at, keys in sorted(folders.items())
                if _info(store, tenant, prefix, taken_at, keys) is not None]
    newest = complete[-1] if complete else None
    pruned = [taken_at for taken_at in sorted(folders)
              if taken_at < cutoff and taken_at != newest]
    for taken_at in pruned:
        store.delete(sorted(folders[taken_at], key=lambda key: key.endswith("manifest.json"),
                            reverse=True))
    if pruned:
        logger.info("graph backups pruned", extra={
            "tenant_id": str(tenant), "count": len(pruned),
            "oldest": pruned[0].isoformat(), "newest": pruned[-1].isoformat()})
    return pruned


def backup_partitions(info: BackupInfo, *, store: ObjectStore | None = None
                      ) -> dict[str, bytes]:
    """Every partition of a backup, ``{name: payload}``, each checked against the backup's
    manifest (size and SHA-256).

    Raises:
        SnapshotCorrupted: a payload is missing, truncated or fails its checksum (names the
            key), or a key lies outside the backup's folder.
        ObjectStoreUnavailable: the store did not answer.
    """
    store = store or object_store()
    folder = f"{tenant_prefix(info.tenant_id)}backups/"
    payloads: dict[str, bytes] = {}
    for name, ref in sorted(info.manifest.partitions.items()):
        if not (ref.key.startswith(info.prefix) and info.prefix.startswith(folder)):
            raise SnapshotCorrupted(f"backup key {ref.key} is outside {info.prefix}",
                                    details={"key": ref.key, "reason": "outside backup"})
        try:
            data = store.get(ref.key)
        except ObjectMissing:
            problem: str | None = "missing"
        else:
            problem = payload_problem(ref, data)
        if problem:
            raise SnapshotCorrupted(f"backup partition {ref.key} is corrupted ({problem})",
                                    details={"key": ref.key, "reason": problem})
        payloads[name] = data
    return payloads
