"""Graph snapshots (``graph.snapshots``) on a directory and on an S3-compatible server:
round trip, incremental uploads, the two-phase commit's cleanup after a failure, checksum
fallback to the previous snapshot, an unreachable bucket, tenant prefixes, and gc."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from graph.objects import ObjectStore, ObjectStoreUnavailable, S3Store
from graph.snapshots import (
    SnapshotCorrupted,
    SnapshotExportFailed,
    snapshot_load,
    snapshot_publish,
    snapshots_gc,
    tenant_prefix,
)
from tests.graph.conftest import InjectedFault, RecordingStore, closed_port, s3_store_at

TENANT = uuid.UUID("0190f5d2-7c1e-7a00-8000-00000000000a")
OTHER = uuid.UUID("0190f5d2-7c1e-7a00-8000-00000000000b")
PREFIX = f"{TENANT}/graph/"


def payloads(*names: str, tag: str = "") -> dict[str, tuple[bytes, int]]:
    """Distinct opaque payloads (random bytes standing for Parquet) with row counts."""
    return {name: (f"{tag}{name}:".encode() + os.urandom(64), len(name))
            for name in names}


def test_it_round_trips_a_snapshot(objects: ObjectStore) -> None:
    sent = payloads("memory_nodes-00", "memory_edges-03", "entities-15")
    manifest = snapshot_publish(TENANT, sent, store=objects)
    assert manifest.version == 1
    assert manifest.key == f"{PREFIX}manifest-v000000000001.json"
    assert {ref.key for ref in manifest.partitions.values()} == {
        f"{PREFIX}parts/{name}-v1.parquet" for name in sent}

    loaded = snapshot_load(TENANT, store=objects)
    assert loaded is not None and not loaded.fell_back
    assert loaded.manifest == manifest
    assert loaded.names == sorted(sent)
    assert loaded.partition("memory_edges-03") == sent["memory_edges-03"][0]
    assert loaded.manifest.partitions["memory_edges-03"].rows == len("memory_edges-03")
    assert loaded.accessed == ["memory_edges-03"]
    assert loaded.load_all() == {name: data for name, (data, _) in sent.items()}
    with pytest.raises(KeyError):
        loaded.partition("memory_nodes-07")
    assert objects.list(f"{PREFIX}_tmp/") == []


def test_it_has_no_snapshot_for_a_new_tenant(objects: ObjectStore) -> None:
    assert snapshot_load(TENANT, store=objects) is None


def test_it_loads_partitions_lazily(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("memory_nodes-00", "memory_nodes-01"), store=objects)
    recording = RecordingStore(objects)
    loaded = snapshot_load(TENANT, store=recording)
    assert loaded is not None
    assert not [key for key in recording.keys("get") if "/parts/" in key]
    loaded.partition("memory_nodes-01")
    loaded.partition("memory_nodes-01")
    assert [key for key in recording.keys("get") if "/parts/" in key] == [
        f"{PREFIX}parts/memory_nodes-01-v1.parquet"]


def test_it_uploads_only_the_changed_partitions(objects: ObjectStore) -> None:
    first = payloads("memory_nodes-00", "memory_edges-00", "entities-00", "entities-01")
    v1 = snapshot_publish(TENANT, first, store=objects)
    recording = RecordingStore(objects)
    changed = payloads("memory_edges-00", "entity_edges-04", tag="v2")
    v2 = snapshot_publish(TENANT, changed, removed=["entities-01"], store=recording)

    assert v2.version == 2
    staged = [key for key in recording.keys("put") if "/_tmp/" in key]
    assert sorted(key.rsplit("/", 1)[1] for key in staged) == [
        "entity_edges-04.parquet", "memory_edges-00.parquet"]
    assert recording.keys("put") == [*staged, v2.key]
    assert sorted(recording.keys("copy")) == [
        f"{PREFIX}parts/entity_edges-04-v2.parquet", f"{PREFIX}parts/memory_edges-00-v2.parquet"]
    assert set(recording.keys("delete")) == set(staged)
    for name in ("memory_nodes-00", "entities-00"):
        assert v2.partitions[name] == v1.partitions[name]
    assert "entities-01" not in v2.partitions

    loaded = snapshot_load(TENANT, store=objects)
    assert loaded is not None and loaded.manifest.version == 2
    assert loaded.load_all() == {
        "memory_nodes-00": first["memory_nodes-00"][0],
        "entities-00": first["entities-00"][0],
        "memory_edges-00": changed["memory_edges-00"][0],
        "entity_edges-04": changed["entity_edges-04"][0],
    }
    assert objects.list(f"{PREFIX}_tmp/") == []


def test_it_writes_nothing_when_nothing_changed(objects: ObjectStore) -> None:
    v1 = snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    recording = RecordingStore(objects)
    assert snapshot_publish(TENANT, {}, removed=["entities-09"], store=recording) == v1
    assert recording.keys("put") == [] and recording.keys("copy") == []


def test_it_rejects_bad_partition_names_before_writing(objects: ObjectStore) -> None:
    for bad in ("memory_edges", "../x-01", "Entities-01", "entities-1", "entities-001"):
        with pytest.raises(ValueError):
            snapshot_publish(TENANT, {bad: (b"x", 1)}, store=objects)
    with pytest.raises(ValueError):
        snapshot_publish(TENANT, payloads("entities-00"), removed=["entities-00"], store=objects)
    assert objects.list("") == []


@pytest.mark.parametrize(("fail_on", "fail_at", "stage"), [
    ("put", 2, "upload"),      # the second staged partition
    ("get", 3, "verify"),      # reading a staged partition back (after the manifest reads)
    ("copy", 2, "promote"),    # after one part already reached its final key
    ("put", 4, "commit"),      # the manifest itself
    ("get", 5, "commit"),      # reading the manifest back, after it was written
])
def test_it_cleans_up_a_failed_export(objects: ObjectStore, fail_on: str, fail_at: int,
                                      stage: str) -> None:
    first = payloads("memory_nodes-00", "memory_edges-00", "entities-00")
    v1 = snapshot_publish(TENANT, first, store=objects)
    before = objects.list("")
    failing = RecordingStore(objects, fail_on=fail_on, fail_at=fail_at)

    with pytest.raises(SnapshotExportFailed) as caught:
        snapshot_publish(TENANT, payloads(*first, tag="v2"), store=failing)

    assert caught.value.details["stage"] == stage
    assert caught.value.retryable is True
    assert caught.value.envelope()["error"]["code"] == "GRAPH_SNAPSHOT_FAILED"
    assert isinstance(caught.value.__cause__, InjectedFault)
    assert objects.list("") == before  # no _tmp keys, no new parts, no new manifest
    loaded = snapshot_load(TENANT, store=objects)
    assert loaded is not None and loaded.manifest == v1 and not loaded.fell_back
    assert loaded.load_all() == {name: data for name, (data, _) in first.items()}


def test_it_publishes_again_after_a_failure(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    with pytest.raises(SnapshotExportFailed):
        snapshot_publish(TENANT, payloads("entities-00"),
                         store=RecordingStore(objects, fail_on="copy"))
    v2 = snapshot_publish(TENANT, payloads("entities-00", tag="again"), store=objects)
    assert v2.version == 2


def two_versions(objects: ObjectStore) -> tuple[dict[str, tuple[bytes, int]],
                                              dict[str, tuple[bytes, int]]]:
    """v1 with two partitions; v2 changes ``entities-00`` only."""
    first = payloads("entities-00", "memory_nodes-00")
    snapshot_publish(TENANT, first, store=objects)
    second = payloads("entities-00", tag="v2")
    snapshot_publish(TENANT, second, store=objects)
    return first, second


@pytest.mark.parametrize("damage", ["flipped", "truncated", "deleted"])
def test_it_falls_back_when_a_part_is_damaged(objects: ObjectStore, damage: str) -> None:
    first, second = two_versions(objects)
    key = f"{PREFIX}parts/entities-00-v2.parquet"
    data = second["entities-00"][0]
    if damage == "flipped":
        objects.put(key, bytes([data[0] ^ 1]) + data[1:])
    elif damage == "truncated":
        objects.put(key, data[:10])
    else:
        objects.delete([key])

    loaded = snapshot_load(TENANT, store=objects)
    assert loaded is not None
    assert loaded.partition("entities-00") == first["entities-00"][0]
    assert loaded.fell_back and loaded.manifest.version == 1
    assert loaded.partition("memory_nodes-00") == first["memory_nodes-00"][0]


def test_it_falls_back_when_the_newest_manifest_is_truncated(objects: ObjectStore) -> None:
    first, _ = two_versions(objects)
    key = f"{PREFIX}manifest-v000000000002.json"
    objects.put(key, objects.get(key)[:40])

    loaded = snapshot_load(TENANT, store=objects)
    assert loaded is not None and loaded.fell_back and loaded.manifest.version == 1
    assert loaded.load_all() == {name: data for name, (data, _) in first.items()}
    # The next publication builds on the valid snapshot and never reuses version 2.
    v3 = snapshot_publish(TENANT, payloads("entities-01"), store=objects)
    assert v3.version == 3 and sorted(v3.partitions) == [
        "entities-00", "entities-01", "memory_nodes-00"]


def test_it_raises_snapshot_corrupted_without_a_valid_snapshot(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    part = f"{PREFIX}parts/entities-00-v1.parquet"
    objects.put(part, b"garbage")
    loaded = snapshot_load(TENANT, store=objects)
    assert loaded is not None
    with pytest.raises(SnapshotCorrupted) as caught:
        loaded.partition("entities-00")
    assert caught.value.details["key"] == part
    assert part in caught.value.message

    manifest = f"{PREFIX}manifest-v000000000001.json"
    objects.put(manifest, b'{"version": 1, "parti')
    with pytest.raises(SnapshotCorrupted) as caught:
        snapshot_load(TENANT, store=objects)
    assert caught.value.details["key"] == manifest
    with pytest.raises(SnapshotExportFailed):  # an incremental publish has nothing to build on
        snapshot_publish(TENANT, payloads("entities-01"), store=objects)
    full = snapshot_publish(TENANT, payloads("entities-00"), full=True, store=objects)
    assert full.version == 2 and list(full.partitions) == ["entities-00"]


def test_it_does_not_mix_snapshots_after_serving_a_partition(objects: ObjectStore) -> None:
    first = payloads("entities-00", "memory_nodes-00")
    snapshot_publish(TENANT, first, store=objects)
    second = payloads("entities-00", "memory_nodes-00", tag="v2")
    snapshot_publish(TENANT, second, store=objects)
    objects.put(f"{PREFIX}parts/memory_nodes-00-v2.parquet", b"garbage")

    lazy = snapshot_load(TENANT, store=objects)
    assert lazy is not None
    assert lazy.partition("entities-00") == second["entities-00"][0]
    with pytest.raises(SnapshotCorrupted):  # v1 would pair v2's entities with v1's nodes
        lazy.partition("memory_nodes-00")

    whole = snapshot_load(TENANT, store=objects)
    assert whole is not None
    assert whole.load_all() == {name: data for name, (data, _) in first.items()}
    assert whole.fell_back and whole.manifest.version == 1


def test_it_fails_fast_and_keeps_the_snapshot_when_the_bucket_is_unreachable(
        s3_store: S3Store) -> None:
    first = payloads("entities-00")
    snapshot_publish(TENANT, first, store=s3_store)
    dead = s3_store_at(f"http://127.0.0.1:{closed_port()}", s3_store.bucket, timeout=1.0,
                       attempts=2)

    started = time.monotonic()
    with pytest.raises(ObjectStoreUnavailable):
        dead.ping()
    with pytest.raises(ObjectStoreUnavailable):
        snapshot_load(TENANT, store=dead)
    with pytest.raises(SnapshotExportFailed) as caught:
        snapshot_publish(TENANT, payloads("entities-00", tag="v2"), store=dead)
    assert isinstance(caught.value.__cause__, ObjectStoreUnavailable)
    assert time.monotonic() - started < 10

    loaded = snapshot_load(TENANT, store=s3_store)
    assert loaded is not None and loaded.manifest.version == 1 and not loaded.fell_back
    assert loaded.partition("entities-00") == first["entities-00"][0]


def test_it_keeps_tenants_apart(objects: ObjectStore) -> None:
    snapshot_publish(TENANT, payloads("entities-00", tag="a"), store=objects)
    theirs = payloads("entities-00", tag="b")
    snapshot_publish(OTHER, theirs, store=objects)

    recording = RecordingStore(objects)
    loaded = snapshot_load(OTHER, store=recording)
    assert loaded is not None
    assert loaded.load_all() == {"entities-00": theirs["entities-00"][0]}
    touched = [key for _, key in recording.calls]
    assert touched and all(key.startswith(f"{OTHER}/graph/") for key in touched)


def test_it_refuses_a_manifest_that_points_into_another_tenant(objects: ObjectStore) -> None:
    mine = snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    snapshot_publish(OTHER, payloads("entities-00", tag="b"), store=objects)
    forged = objects.get(mine.key).replace(b'"version": 1', b'"version": 2')
    objects.put(f"{OTHER}/graph/manifest-v000000000002.json", forged)

    recording = RecordingStore(objects)
    loaded = snapshot_load(OTHER, store=recording)
    assert loaded is not None and loaded.fell_back and loaded.manifest.version == 1
    loaded.load_all()
    assert all(key.startswith(f"{OTHER}/graph/") for _, key in recording.calls)


def test_it_accepts_only_uuid_tenants(objects: ObjectStore) -> None:
    assert tenant_prefix(str(TENANT).upper()) == PREFIX
    for bad in ("../etc", "", "tenant", "0190f5d2/../x"):
        with pytest.raises(ValueError):
            tenant_prefix(bad)
        with pytest.raises(ValueError):
            snapshot_load(bad, store=objects)  # type: ignore[arg-type]


def test_it_collects_what_no_kept_snapshot_needs(objects: ObjectStore) -> None:
    for version in range(1, 5):
        names = ["entities-00"] if version > 1 else ["entities-00", "memory_nodes-00"]
        snapshot_publish(TENANT, payloads(*names, tag=f"v{version}"), store=objects)
    objects.put(f"{PREFIX}_tmp/stale/entities-00.parquet", b"left by a crash")

    deleted = snapshots_gc(TENANT, store=objects)

    assert objects.list(f"{PREFIX}manifest-") == [
        f"{PREFIX}manifest-v000000000003.json", f"{PREFIX}manifest-v000000000004.json"]
    assert objects.list(f"{PREFIX}parts/") == [
        f"{PREFIX}parts/entities-00-v3.parquet", f"{PREFIX}parts/entities-00-v4.parquet",
        f"{PREFIX}parts/memory_nodes-00-v1.parquet"]
    assert f"{PREFIX}parts/entities-00-v1.parquet" in deleted
    assert objects.list(f"{PREFIX}_tmp/") == []
    loaded = snapshot_load(TENANT, store=objects)
    assert loaded is not None and loaded.manifest.version == 4
    assert len(loaded.load_all()) == 2
    with pytest.raises(ValueError):
        snapshots_gc(TENANT, keep=0, store=objects)


def test_gc_deletes_nothing_without_a_readable_snapshot(objects: ObjectStore) -> None:
    manifest = snapshot_publish(TENANT, payloads("entities-00"), store=objects)
    objects.put(manifest.key, b"not json")
    before = objects.list("")
    assert snapshots_gc(TENANT, store=objects) == []
    assert objects.list("") == before
