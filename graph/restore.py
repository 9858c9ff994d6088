"""The writer operation of a point-in-time restore (``graph.maintenance.graph_restore``):
the tenant's rows are replaced by a backup's, inside the writer's transaction."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from graph import backups
from graph.ops import Applied
from graph.partitions import all_partitions, parse_partition
from graph.schema import TABLES
from graph.tenant_sql import tenant_execute
from memory_project.errors import NotFound


def restore_backup(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """Writer operation: replace every graph row of the tenant with the backup under
    ``prefix`` (checksums checked before anything is deleted)."""
    tenant_id = uuid.UUID(tenant)
    info = next((b for b in backups.backups_list(tenant_id) if b.prefix == payload["prefix"]),
                None)
    if info is None:
        raise NotFound("No such graph backup.", details={"prefix": payload["prefix"]})
    payloads = backups.backup_partitions(info)
    for table in TABLES:
        tenant_execute(conn, f"DELETE FROM {table} WHERE tenant_id = $tenant_id",
                       {"tenant_id": tenant})
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in sorted(payloads.items()):
            table, _ = parse_partition(name)
            path = Path(tmp) / f"{name}.parquet"
            path.write_bytes(data)
            tenant_execute(conn, f"INSERT INTO {table} SELECT * FROM read_parquet($file) "
                           "WHERE tenant_id = $tenant_id", {"tenant_id": tenant,
                                                            "file": str(path)})
    return Applied({"restoredFrom": info.prefix, "partitions": len(payloads)}, all_partitions())
