"""Graph backups (``graph.backups``) on a directory and on an S3-compatible server: a backup
copies the current snapshot, survives snapshot gc, is pruned after 7 days, is found by time
for a point-in-time restore, and its payloads are checksum-checked."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from graph.backups import (
    BackupFailed,
    backup_create,
    backup_nearest,
    backup_partitions,
    backups_list,
    backups_prune,
)
from graph.objects import ObjectStore
from graph.snapshots import SnapshotCorrupted, snapshot_publish, snapshots_gc
from tests.graph.conftest import InjectedFault, RecordingStore

TENANT = uuid.UUID("0190f5d2-7c1e-7a00-8000-0000000000c1")
OTHER = uuid.UUID("0190f5d2-7c1e-7a00-8000-0000000000c2")
PREFIX = f"{TENANT}/graph/"
NOW = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)


def payloads(*names: str, tag: str = "") -> dict[str, tuple[bytes, int]]:
    """Distinct opaque payloads (random bytes standing for Parquet) with row counts."""
    return {name: (f"{tag}{name}:".encode() + os.urandom(32), 3) for name in names}


def contents(sent: dict[str, tuple[bytes, int]]) -> dict[str, bytes]:
    return {name: data for name, (data, _) in sent.items()}


def test_it_backs_up_the_current_snapshot(objects: ObjectStore) -> None:
    sent = payloads("memory_nodes-00", "memory_edges-02")
    snapshot_publish(TENANT, sent, store=objects)
    count = REGISTRY.get_sample_value("graph_backup_duration_seconds_count") or 0.0

    info = backup_create(TENANT, now=NOW, store=objects)

    assert info is not None
    assert info.taken_at == NOW and info.version == 1
    assert info.prefix == f"{PREFIX}backups/20250310T120000.000000Z/"
    assert info.bytes == sum(len(data) for data, _ in sent.values())
    assert info.duration_seconds is not None and info.duration_seconds >= 0
    assert objects.list(info.prefix) == [
        f"{info.prefix}manifest.json", f"{info.prefix}parts/memory_edges-02.parquet",
        f"{info.prefix}parts/memory_nodes-00.parquet"]
    assert backup_partitions(info, store=objects) == contents(sent)
    assert backups_list(TENANT, store=objects) == [
        type(info)(tenant_id=TENANT, taken_at=NOW, prefix=info.prefix, manifest=info.manifest)]
    assert REGISTRY.get_sample_value("graph_backup_bytes") == info.bytes
    assert REGISTRY.get_sample_value("graph_backup_duration_seconds_count") == count + 1


def test_it_has_nothing_to_back_up_for_a_new_tenant(objects: ObjectStore) -> None:
    assert backup_create(TENANT, now=NOW, store=objects) is None
    assert objects.list("") == []


def test_it_backs_up_the_valid_snapshot_when_the_newest_is_corrupted(
        objects: ObjectStore) -> None:
    first = payloads("entities-00")
    snapshot_publish(TENANT, first, store=objects)
    snapshot_publish(TENANT, payloads("entities-00", tag="v2"), store=objects)
    objects.put(f"{PREFIX}parts/entities-00-v2.parquet", b"garbage")

    info = backup_create(TENANT, now=NOW, store=objects)

    assert info is not None and info.version == 1
    assert backup_partitions(info, store=objects) == contents(first)


def test_it_removes_a_failed_backup(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00", "entities-01", "entities-02"), store=objects)
    with pytest.raises(BackupFailed) as caught:
        backup_create(TENANT, now=NOW, store=RecordingStore(objects, fail_on="copy", fail_at=2))
    assert isinstance(caught.value.__cause__, InjectedFault)
    assert caught.value.details["stage"] == "copy"
    assert caught.value.envelope()["error"]["code"] == "GRAPH_BACKUP_FAILED"
    assert objects.list(f"{PREFIX}backups/") == []
    assert backups_list(TENANT, store=objects) == []


def test_it_refuses_naive_times_and_a_second_backup_at_the_same_time(
        objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    with pytest.raises(ValueError):
        backup_create(TENANT, now=datetime(2025, 3, 10, 12, 0), store=objects)
    backup_create(TENANT, now=NOW, store=objects)
    with pytest.raises(ValueError):
        backup_create(TENANT, now=NOW, store=objects)
    with pytest.raises(ValueError):
        backup_nearest(TENANT, datetime(2025, 3, 10, 12, 0), store=objects)


def test_it_prunes_backups_older_than_seven_days(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    for age in (timedelta(days=9), timedelta(days=7, seconds=1), timedelta(days=6, hours=23),
                timedelta(hours=6), timedelta(0)):
        backup_create(TENANT, now=NOW - age, store=objects)
    # A backup that never completed (no manifest), also long past retention.
    objects.put(f"{PREFIX}backups/20250201T000000.000000Z/parts/entities-00.parquet", b"x")

    pruned = backups_prune(TENANT, now=NOW, store=objects)

    assert pruned == [datetime(2025, 2, 1, tzinfo=UTC), NOW - timedelta(days=9),
                      NOW - timedelta(days=7, seconds=1)]
    assert [info.taken_at for info in backups_list(TENANT, store=objects)] == [
        NOW - timedelta(days=6, hours=23), NOW - timedelta(hours=6), NOW]
    assert not objects.list(f"{PREFIX}backups/20250201")
    assert backups_prune(TENANT, now=NOW, store=objects) == []


def test_it_keeps_the_newest_backup_however_old(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    backup_create(TENANT, now=NOW - timedelta(days=30), store=objects)
    backup_create(TENANT, now=NOW - timedelta(days=20), store=objects)
    assert backups_prune(TENANT, now=NOW, store=objects) == [NOW - timedelta(days=30)]
    assert [info.taken_at for info in backups_list(TENANT, store=objects)] == [
        NOW - timedelta(days=20)]
    assert backups_prune(TENANT, now=NOW, retention_days=1, store=objects) == []


def test_it_finds_the_nearest_backup_before_a_time(objects: ObjectStore) -> None:
    versions = {}
    for hours in (18, 12, 6):
        snapshot_publish(TENANT, payloads("entities-00", tag=f"{hours}h"), store=objects)
        info = backup_create(TENANT, now=NOW - timedelta(hours=hours), store=objects)
        assert info is not None
        versions[hours] = info.version

    def nearest(at: datetime) -> int | None:
        info = backup_nearest(TENANT, at, store=objects)
        return info.version if info else None

    assert nearest(NOW - timedelta(hours=20)) is None
    assert nearest(NOW - timedelta(hours=12)) == versions[12]  # exactly at a backup
    assert nearest(NOW - timedelta(hours=7)) == versions[12]
    assert nearest(NOW) == versions[6]
    assert nearest((NOW - timedelta(hours=17)).astimezone(
        datetime.now().astimezone().tzinfo)) == versions[18]
    assert backup_nearest(OTHER, NOW, store=objects) is None


def test_snapshot_gc_keeps_what_backups_need(objects: ObjectStore) -> None:
    first = payloads("entities-00", "memory_nodes-00")
    snapshot_publish(TENANT, first, store=objects)
    info = backup_create(TENANT, now=NOW, store=objects)
    assert info is not None
    for version in (2, 3, 4):
        snapshot_publish(TENANT, payloads("entities-00", "memory_nodes-00", tag=f"v{version}"),
                         store=objects)

    deleted = snapshots_gc(TENANT, store=objects)

    assert f"{PREFIX}parts/entities-00-v1.parquet" in deleted
    assert not [key for key in deleted if "/backups/" in key]
    assert backup_partitions(info, store=objects) == contents(first)


def test_it_rejects_a_corrupted_backup(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00", "entities-01"), store=objects)
    info = backup_create(TENANT, now=NOW, store=objects)
    assert info is not None
    key = f"{info.prefix}parts/entities-01.parquet"
    objects.put(key, objects.get(key)[:-1])
    with pytest.raises(SnapshotCorrupted) as caught:
        backup_partitions(info, store=objects)
    assert caught.value.details["key"] == key
    objects.delete([key])
    with pytest.raises(SnapshotCorrupted, match="missing"):
        backup_partitions(info, store=objects)


def test_it_keeps_backups_of_tenants_apart(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    backup_create(TENANT, now=NOW, store=objects)
    assert backups_list(OTHER, store=objects) == []
    assert backups_prune(OTHER, now=NOW + timedelta(days=30), store=objects) == []
    recording = RecordingStore(objects)
    assert backup_create(OTHER, now=NOW, store=recording) is None
    assert all(key.startswith(f"{OTHER}/graph/") for _, key in recording.calls)
    assert len(backups_list(TENANT, store=objects)) == 1
