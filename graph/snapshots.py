"""Per-tenant graph snapshots (seed 001 "S3 Graph Persistence", "Transactional S3
Persistence", "Lambda Cold Start Optimization", "Tenant-prefixed S3 storage"). A snapshot is
a set of named partitions (``"memory_edges-03"``), opaque payloads (Parquet written by DuckDB),
and a manifest ``{"version", "created_at", "partitions": {name: {"key", "sha256", "bytes",
"rows"}}}``. Every key is under ``{tenant_id}/graph/`` (``s3://{bucket}/{tenant_id}/graph/``)::

    {tenant}/graph/manifest-v000000000007.json      version 7; the newest is current
    {tenant}/graph/parts/{name}-v{version}.parquet  immutable, written by that version
    {tenant}/graph/_tmp/{txid}/{name}.parquet       staging of a publish in progress
    {tenant}/graph/backups/...                      graph.backups

Publishing, :func:`snapshots_gc` and backups of one tenant must not run concurrently: callers
hold the tenant's graph writer lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import re
import threading
import uuid
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from graph.objects import ObjectMissing, ObjectStore, object_store
from memory_project.errors import MemoryServiceError, ServiceUnavailable

logger = logging.getLogger(__name__)

PARTITION_NAME = re.compile(r"[a-z_]+-\d{2}")
_MANIFEST_NAME = re.compile(r"manifest-v(\d{12})\.json")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class SnapshotExportFailed(ServiceUnavailable):
    """``GRAPH_SNAPSHOT_FAILED`` (HTTP 503, retryable): nothing of the attempt is left and the
    previous snapshot is intact; ``details`` name the stage and key, the cause is chained."""

    code = "GRAPH_SNAPSHOT_FAILED"
    default_message = "The graph snapshot could not be written; the previous one is intact."


class SnapshotCorrupted(MemoryServiceError):
    """``GRAPH_SNAPSHOT_CORRUPTED`` (HTTP 500): no valid snapshot could be read; ``details``
    carry the offending ``key`` and the ``reason``."""

    code = "GRAPH_SNAPSHOT_CORRUPTED"
    status = 500
    default_message = "The graph snapshot is corrupted."


@dataclasses.dataclass(frozen=True)
class PartitionRef:
    """A partition's payload: its key, SHA-256 (hex), length in bytes, and row count."""

    key: str
    sha256: str
    bytes: int
    rows: int


@dataclasses.dataclass(frozen=True)
class Manifest:
    """One snapshot version; ``key`` is where this manifest is stored."""

    version: int
    created_at: datetime
    partitions: Mapping[str, PartitionRef]
    key: str = ""

    @property
    def total_bytes(self) -> int:
        """The payload bytes of all partitions."""
        return sum(ref.bytes for ref in self.partitions.values())

    def to_json(self) -> bytes:
        """The manifest document (see the module docstring), UTF-8."""
        return json.dumps({
            "version": self.version, "created_at": self.created_at.astimezone(UTC).isoformat(),
            "partitions": {name: dataclasses.asdict(ref) for name, ref in self.partitions.items()},
        }, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, *, key: str, part_prefix: str) -> Manifest:
        """Parse and check the manifest stored at ``key``. Raises :class:`ValueError`: not a
        manifest, or a partition key outside ``part_prefix``."""
        try:
            document = json.loads(data)
            partitions = {name: _partition_ref(name, entry, part_prefix)
                          for name, entry in document["partitions"].items()}
            version, created_at = document["version"], datetime.fromisoformat(
                document["created_at"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"unreadable manifest: {exc!r}") from exc
        if type(version) is not int or version < 1 or created_at.tzinfo is None:
            raise ValueError("unreadable manifest: bad version or created_at")
        return cls(version=version, created_at=created_at, partitions=partitions, key=key)


def _partition_ref(name: Any, entry: Any, part_prefix: str) -> PartitionRef:
    ref = PartitionRef(key=entry["key"], sha256=entry["sha256"], bytes=entry["bytes"],
                       rows=entry["rows"])
    if not (isinstance(name, str) and PARTITION_NAME.fullmatch(name)
            and isinstance(ref.key, str) and ref.key.startswith(part_prefix)
            and isinstance(ref.sha256, str) and _SHA256.fullmatch(ref.sha256)
            and all(type(value) is int and value >= 0 for value in (ref.bytes, ref.rows))):
        raise ValueError(f"bad partition {name!r} (keys must start with {part_prefix!r})")
    return ref


def tenant_prefix(tenant_id: uuid.UUID | str) -> str:
    """``"{tenant_id}/graph/"``, the only prefix a tenant's graph objects live under.
    Raises :class:`ValueError` when ``tenant_id`` is not a UUID (or its string form)."""
    try:
        return f"{tenant_id if isinstance(tenant_id, uuid.UUID) else uuid.UUID(tenant_id)}/graph/"
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"tenant id {tenant_id!r} is not a UUID") from exc


def payload_problem(ref: PartitionRef, data: bytes) -> str | None:
    """Why ``data`` is not the payload ``ref`` describes (truncated, checksum), or None."""
    if len(data) != ref.bytes:
        return f"size {len(data)} bytes, manifest says {ref.bytes}"
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        return "SHA-256 mismatch"
    return None


class _History:
    """A tenant's snapshot manifests, newest first, read one at a time."""

    def __init__(self, store: ObjectStore, prefix: str) -> None:
        self.store, self.prefix, self.skipped = store, prefix, list[tuple[str, str]]()
        versions = ((_MANIFEST_NAME.fullmatch(key[len(prefix):]), key)
                    for key in store.list(f"{prefix}manifest-v"))
        self.keys = sorted(((int(match[1]), key) for match, key in versions if match),
                           reverse=True)
        self._parts: set[str] | None = None
        self._readable: list[Manifest] = []
        self._unread = iter(self.keys)

    def readable(self, index: int) -> Manifest | None:
        """The ``index``-th (from 0, newest first) manifest that parses and whose parts all
        exist, read on demand; None when there are fewer."""
        while len(self._readable) <= index:
            version, key = next(self._unread, (0, ""))
            if not key:
                return None
            try:
                manifest = Manifest.from_json(
                    self.store.get(key), key=key, part_prefix=f"{self.prefix}parts/")
                if manifest.version != version:
                    raise ValueError(f"says version {manifest.version}")
                if self._parts is None:
                    self._parts = set(self.store.list(f"{self.prefix}parts/"))
                for ref in manifest.partitions.values():
                    if ref.key not in self._parts:
                        raise ValueError(f"part {ref.key} is missing")
            except (ObjectMissing, ValueError) as exc:
                self.skipped.append((key, str(exc)))
                logger.warning("graph snapshot manifest skipped",
                               extra={"key": key, "reason": str(exc)})
                continue
            self._readable.append(manifest)
        return self._readable[index]


class LoadedSnapshot:
    """A tenant's snapshot opened by :func:`snapshot_load` (thread-safe). Payloads are
    downloaded on first use and checked against the manifest (size, SHA-256).

    ``manifest`` is the snapshot served; ``fell_back`` is True when it is not the newest (that
    was unreadable or corrupted). A corrupted or missing partition switches to the newest older
    snapshot holding the same keys for every partition already served, else raises
    :class:`SnapshotCorrupted`; :meth:`load_all` may switch to any older snapshot. After a
    switch, re-read ``names``. ``accessed``: names in first-use order (pre-warming hints).
    """

    def __init__(self, tenant_id: str, store: ObjectStore, history: _History) -> None:
        self.tenant_id = uuid.UUID(tenant_id)
        self.accessed: list[str] = []
        self._store, self._history = store, history
        self._cache: dict[str, bytes] = {}
        self._served: dict[str, str] = {}
        self._bad: set[str] = set()
        self._lock = threading.Lock()
        first = history.readable(0)
        if first is None:
            key, reason = history.skipped[0]
            raise SnapshotCorrupted(f"no valid graph snapshot: {key}: {reason}", details={
                "key": key, "reason": reason, "skipped": len(history.skipped)})
        self._position = 0
        self.manifest = first
        self.fell_back = first.key != history.keys[0][1]

    @property
    def names(self) -> list[str]:
        """The partition names of the snapshot being served, sorted."""
        return sorted(self.manifest.partitions)

    def partition(self, name: str) -> bytes:
        """The payload of partition ``name``. Raises :class:`KeyError` (not in the snapshot
        served), :class:`SnapshotCorrupted` (corrupted, and no older snapshot can replace it),
        :class:`ObjectStoreUnavailable` (the store did not answer; no fallback then)."""
        return self._partition(name, keep_served=True)

    def load_all(self) -> dict[str, bytes]:
        """Every partition, ``{name: payload}``, all of one snapshot (``self.manifest``
        afterwards). Raises like :meth:`partition`."""
        while True:
            manifest, payloads = self.manifest, {}
            for name in sorted(manifest.partitions):
                payloads[name] = self._partition(name, keep_served=False)
                if self.manifest is not manifest:
                    break
            else:
                return payloads

    def _partition(self, name: str, *, keep_served: bool) -> bytes:
        while True:
            with self._lock:
                ref = self.manifest.partitions[name]
                if ref.key in self._cache:
                    return self._served_now(name, ref.key)
            try:
                data = self._store.get(ref.key)
            except ObjectMissing:
                problem: str | None = "missing"
            else:
                problem = payload_problem(ref, data)
            with self._lock:
                if self.manifest.partitions.get(name) != ref:
                    continue
                if problem is None:
                    self._cache[ref.key] = data
                    return self._served_now(name, ref.key)
                self._fall_back(ref.key, problem, keep_served=keep_served)

    def _served_now(self, name: str, key: str) -> bytes:
        if name not in self.accessed:
            self.accessed.append(name)
        self._served[name] = key
        return self._cache[key]

    def _fall_back(self, key: str, reason: str, *, keep_served: bool) -> None:
        self._bad.add(key)
        logger.warning("graph snapshot partition corrupted",
                       extra={"key": key, "reason": reason, "manifest": self.manifest.key})
        if not keep_served:
            self._served.clear()
        for index in itertools.count(self._position + 1):
            candidate = self._history.readable(index)
            if candidate is None:
                break
            refs = candidate.partitions
            if any(ref.key in self._bad for ref in refs.values()) or any(
                    name not in refs or refs[name].key != served
                    for name, served in self._served.items()):
                continue
            logger.warning("graph snapshot fell back",
                           extra={"from": self.manifest.key, "to": candidate.key})
            self._position, self.manifest, self.fell_back = index, candidate, True
            return
        raise SnapshotCorrupted(
            f"graph snapshot partition {key} is corrupted ({reason}) and no older snapshot "
            "can replace it", details={"key": key, "reason": reason})


def snapshot_load(tenant_id: uuid.UUID, *, store: ObjectStore | None = None
                  ) -> LoadedSnapshot | None:
    """Open the tenant's newest valid snapshot, or None when it has none: reads manifests
    and lists part keys, downloads no payload (seed "Lazy partition loading"). Raises
    :class:`SnapshotCorrupted` (no manifest readable with all its parts present),
    :class:`ObjectStoreUnavailable`."""
    prefix = tenant_prefix(tenant_id)
    store = store or object_store()
    history = _History(store, prefix)
    if not history.keys:
        return None
    loaded = LoadedSnapshot(prefix.split("/")[0], store, history)
    if loaded.fell_back:
        logger.warning("graph snapshot fell back", extra={"to": loaded.manifest.key})
    return loaded


def snapshot_publish(tenant_id: uuid.UUID, changed: Mapping[str, tuple[bytes, int]], *,
                     removed: Collection[str] = (), full: bool = False,
                     store: ObjectStore | None = None, now: datetime | None = None) -> Manifest:
    """Publish a snapshot version that uploads only ``changed`` (``{name: (payload, rows)}``)
    and drops ``removed``; other partitions keep the previous manifest's keys (seed
    "Incremental persistence"). With ``full``, ``changed`` is the whole snapshot. Two-phase
    commit (seed "Two-phase commit for export"): stage in ``_tmp/{txid}/``, read back and check
    SHA-256, copy to ``parts/{name}-v{version}.parquet``, write and read back the manifest (the
    commit point), delete the staging. Nothing changed: returns the previous manifest.

    Raises :class:`ValueError` (bad partition name, a name both changed and removed) and
    :class:`SnapshotExportFailed` (any failure, also manifests none of which is readable
    without ``full``; everything written was removed again)."""
    prefix = tenant_prefix(tenant_id)
    for name in itertools.chain(changed, removed):
        if not PARTITION_NAME.fullmatch(name):
            raise ValueError(f"bad partition name {name!r}")
    if set(changed) & set(removed):
        raise ValueError("a partition cannot be both changed and removed")
    store = store or object_store()
    txid = uuid.uuid4().hex
    staging = {name: f"{prefix}_tmp/{txid}/{name}.parquet" for name in changed}
    written: list[str] = []
    stage, version = "read previous manifest", 0
    try:
        history = _History(store, prefix)
        base = None if full else history.readable(0)
        if history.keys and base is None and not full:
            raise ValueError("no readable previous manifest; publish the full snapshot")
        if base is not None and not changed and not set(removed) & set(base.partitions):
            return base
        version = (history.keys[0][0] if history.keys else 0) + 1
        refs: dict[str, PartitionRef] = {}
        stage = "upload"
        for name, (payload, rows) in sorted(changed.items()):
            written.append(staging[name])
            store.put(staging[name], payload)
            refs[name] = PartitionRef(
                key=f"{prefix}parts/{name}-v{version}.parquet",
                sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload), rows=rows)
        stage = "verify"
        for name, ref in refs.items():
            problem = payload_problem(ref, store.get(staging[name]))
            if problem:
                raise ValueError(f"staged {staging[name]}: {problem}")
        stage = "promote"
        for name, ref in refs.items():
            written.append(ref.key)
            store.copy(staging[name], ref.key)
        partitions = {name: ref for name, ref in (base.partitions if base else {}).items()
                      if name not in removed}
        partitions.update(refs)
        manifest = Manifest(version=version, created_at=now or datetime.now(UTC),
                            partitions=partitions,
                            key=f"{prefix}manifest-v{version:012d}.json")
        stage = "commit"
        written.append(manifest.key)
        store.put(manifest.key, manifest.to_json())
        if store.get(manifest.key) != manifest.to_json():
            raise ValueError(f"manifest {manifest.key} reads back different")
    except Exception as exc:
        _discard(store, written)
        details = {"tenantId": prefix.split("/")[0], "version": version, "stage": stage,
                   "lastWritten": written[-1] if written else "", "cause": type(exc).__name__}
        logger.error("graph snapshot export failed", extra=details, exc_info=True)
        raise SnapshotExportFailed(details=details) from exc
    _discard(store, list(staging.values()))
    logger.info("graph snapshot published", extra={
        "key": manifest.key, "uploaded": len(refs), "bytes": manifest.total_bytes})
    return manifest


def _discard(store: ObjectStore, keys: list[str]) -> None:
    """Delete ``keys``, newest first; a failure is only logged (snapshots_gc collects)."""
    try:
        if keys:
            store.delete(list(reversed(keys)))
    except Exception:
        logger.warning("graph snapshot cleanup failed; left for snapshots_gc",
                       extra={"keys": keys}, exc_info=True)


def snapshots_gc(tenant_id: uuid.UUID, keep: int = 2, *,
                 store: ObjectStore | None = None) -> list[str]:
    """Delete manifests other than the ``keep`` newest readable ones, parts none of those
    references, and leftover staging (``_tmp/``); nothing when no manifest is readable.
    Backups keep their own copies under ``backups/``, which this never touches. Returns the
    deleted keys. Raises :class:`ValueError` (``keep`` < 1), :class:`ObjectStoreUnavailable`."""
    if keep < 1:
        raise ValueError("keep must be at least 1")
    prefix = tenant_prefix(tenant_id)
    store = store or object_store()
    history = _History(store, prefix)
    kept = [m for index in range(keep) if (m := history.readable(index)) is not None]
    if not kept:
        return []
    kept_keys = {manifest.key for manifest in kept}
    referenced = {ref.key for manifest in kept for ref in manifest.partitions.values()}
    manifests = [key for _, key in history.keys if key not in kept_keys]
    store.delete(manifests)
    leftovers = [key for key in store.list(f"{prefix}parts/") if key not in referenced]
    leftovers += store.list(f"{prefix}_tmp/")
    store.delete(leftovers)
    logger.info("graph snapshot gc", extra={"prefix": prefix, "deleted": len(manifests) + len(
        leftovers)})
    return manifests + leftovers
