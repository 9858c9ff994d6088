"""The graph's write operations, as the single writer applies them (``graph.writer``): each
runs inside the writer's transaction on the DuckDB file, so all four tables change together or
not at all (seed 001 "Multi-Table Transaction Atomicity"), and returns the partitions it
touched, for the incremental snapshot.

Operations are plain JSON payloads (they travel through the Redis queue); :data:`OPERATIONS`
maps each ``op`` name to its function. Every statement goes through
:func:`graph.tenant_sql.tenant_execute`.

Referential integrity is the application's (DuckDB enforces no foreign keys: seed 001
"Application-Level Referential Integrity"): an edge is written only when both of its ends
exist, else :class:`EdgeEndMissing` names the missing one and the transaction rolls back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from graph.partitions import all_partitions, entity_partitions, memory_partitions
from graph.tenant_sql import tenant_execute
from memory_project.errors import MemoryServiceError

MENTIONS = "MENTIONS"
ENTITY = "entity"
MEMORY = "memory"


class EdgeEndMissing(MemoryServiceError):
    """An edge whose source or target node does not exist (``GRAPH_EDGE_INVALID``, 422);
    ``details.missing`` is ``"source"`` or ``"target"`` and ``details.id`` its id."""

    code = "GRAPH_EDGE_INVALID"
    status = 422
    default_message = "An edge end does not exist."


@dataclass
class Applied:
    """What an operation did: its result (JSON) and the partitions it changed."""

    result: dict[str, Any]
    dirty: set[str] = field(default_factory=set)


def entity_id(tenant_id: uuid.UUID | str, canonical: str) -> uuid.UUID:
    """The id of a tenant's entity: UUIDv5 of its canonical name in the tenant's namespace,
    so that the same name resolves to the same node in every process (entity resolution)."""
    return uuid.uuid5(uuid.UUID(str(tenant_id)), canonical)


def _rows(conn: Any, tenant: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    return list(tenant_execute(conn, sql, {"tenant_id": tenant, **params}))


def _run(conn: Any, tenant: str, sql: str, **params: Any) -> None:
    tenant_execute(conn, sql, {"tenant_id": tenant, **params})


def _exists(conn: Any, tenant: str, node_id: uuid.UUID, kind: str) -> bool:
    table = "entities" if kind == ENTITY else "memory_nodes"
    return bool(_rows(conn, tenant, f"SELECT 1 FROM {table} WHERE tenant_id = $tenant_id "
                      "AND id = $id AND deleted_at IS NULL", id=node_id))


def _require_ends(conn: Any, tenant: str, source: uuid.UUID, source_kind: str,
                  target: uuid.UUID, target_kind: str) -> None:
    for end, node, kind in (("source", source, source_kind), ("target", target, target_kind)):
        if not _exists(conn, tenant, node, kind):
            raise EdgeEndMissing(f"The edge's {end} {kind} {node} does not exist.",
                                 details={"missing": end, "kind": kind, "id": str(node)})


def memory_edge_add(conn: Any, tenant: str, *, source: uuid.UUID, target: uuid.UUID,
                    target_kind: str, relation: str) -> None:
    """Write one memory → entity or memory → memory edge after checking both ends.

    Raises:
        EdgeEndMissing: an end does not exist (or is soft-deleted).
    """
    _require_ends(conn, tenant, source, MEMORY, target, target_kind)
    _run(conn, tenant, "INSERT INTO memory_edges VALUES ($tenant_id, $source, $target, $kind, "
         "$relation, now(), NULL)", source=source, target=target, kind=target_kind,
         relation=relation)


def entity_edge_add(conn: Any, tenant: str, *, source: uuid.UUID, target: uuid.UUID,
                    relation: str, memory_id: uuid.UUID) -> None:
    """Write one typed entity → entity relation derived from ``memory_id``.

    Raises:
        EdgeEndMissing: an entity does not exist (seed 001 "Entity edge validates entity
            existence").
    """
    _require_ends(conn, tenant, source, ENTITY, target, ENTITY)
    _run(conn, tenant, "INSERT INTO entity_edges VALUES ($tenant_id, $source, $target, "
         "$relation, $memory, now(), NULL)", source=source, target=target, relation=relation,
         memory=memory_id)


def _linked_entities(conn: Any, tenant: str, memory_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    return {row[0] for row in _rows(
        conn, tenant, "SELECT DISTINCT target_id FROM memory_edges WHERE tenant_id = $tenant_id "
        "AND source_id IN (SELECT unnest($ids)) AND target_kind = $kind",
        ids=memory_ids, kind=ENTITY)}


def _drop_orphans(conn: Any, tenant: str, candidates: Iterable[uuid.UUID], *,
                  soft: bool = False) -> set[uuid.UUID]:
    """Delete (or, ``soft``, mark deleted) the candidate entities no live memory mentions."""
    ids = list(candidates)
    if not ids:
        return set()
    orphans = {row[0] for row in _rows(
        conn, tenant, "SELECT e.id FROM entities e WHERE e.tenant_id = $tenant_id "
        "AND e.id IN (SELECT unnest($ids)) AND NOT EXISTS (SELECT 1 FROM memory_edges m "
        "WHERE m.tenant_id = $tenant_id AND m.target_id = e.id AND m.deleted_at IS NULL)",
        ids=ids)}
    if orphans:
        if soft:
            _run(conn, tenant, "UPDATE entities SET deleted_at = now() WHERE tenant_id = "
                 "$tenant_id AND id IN (SELECT unnest($ids)) AND deleted_at IS NULL",
                 ids=list(orphans))
        else:
            _run(conn, tenant, "DELETE FROM entity_edges WHERE tenant_id = $tenant_id AND "
                 "(source_id IN (SELECT unnest($ids)) OR target_id IN (SELECT unnest($ids)))",
                 ids=list(orphans))
            _run(conn, tenant, "DELETE FROM entities WHERE tenant_id = $tenant_id AND id IN "
                 "(SELECT unnest($ids))", ids=list(orphans))
    return orphans


def _remove_derived(conn: Any, tenant: str, memory_ids: list[uuid.UUID]) -> None:
    _run(conn, tenant, "DELETE FROM memory_edges WHERE tenant_id = $tenant_id AND (source_id IN "
         "(SELECT unnest($ids)) OR target_id IN (SELECT unnest($ids)))", ids=memory_ids)
    _run(conn, tenant, "DELETE FROM entity_edges WHERE tenant_id = $tenant_id AND memory_id IN "
         "(SELECT unnest($ids))", ids=memory_ids)


def upsert_memory(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """Replace what the graph holds about one memory with a new extraction.

    Payload: ``memory`` (``id``, ``layer``, ``contentHash``, ``createdAt``), ``entities``
    (``canonical``, ``name``, ``type``) and ``relations`` (``source``, ``target`` canonical
    names, ``type``). Entities are resolved by canonical name (one node per tenant; the
    surface form joins its ``aliases``); entities no memory mentions any more are removed.
    """
    memory = payload["memory"]
    mid = uuid.UUID(memory["id"])
    previous = _linked_entities(conn, tenant, [mid])
    _remove_derived(conn, tenant, [mid])
    _run(conn, tenant, "DELETE FROM memory_nodes WHERE tenant_id = $tenant_id AND id = $id",
         id=mid)
    _run(conn, tenant, "INSERT INTO memory_nodes VALUES ($tenant_id, $id, $layer, $hash, "
         "CAST($created AS TIMESTAMPTZ), now(), NULL)", id=mid, layer=memory["layer"],
         hash=memory["contentHash"], created=memory["createdAt"])
    current: dict[str, uuid.UUID] = {}
    for entity in payload["entities"]:
        eid = entity_id(tenant, entity["canonical"])
        if eid in current.values():
            _add_alias(conn, tenant, eid, entity["name"])
            continue
        current[entity["canonical"]] = eid
        if _rows(conn, tenant, "SELECT 1 FROM entities WHERE tenant_id = $tenant_id AND id = $id",
                 id=eid):
            _add_alias(conn, tenant, eid, entity["name"])
        else:
            _run(conn, tenant, "INSERT INTO entities VALUES ($tenant_id, $id, $canonical, $name, "
                 "$type, [$name], now(), NULL)", id=eid, canonical=entity["canonical"],
                 name=entity["name"], type=entity["type"])
        memory_edge_add(conn, tenant, source=mid, target=eid, target_kind=ENTITY,
                        relation=MENTIONS)
    relations = 0
    for relation in payload["relations"]:
        source, target = current.get(relation["source"]), current.get(relation["target"])
        if source is None or target is None or source == target:
            continue
        entity_edge_add(conn, tenant, source=source, target=target,
                        relation=relation["type"], memory_id=mid)
        relations += 1
    removed = _drop_orphans(conn, tenant, previous - set(current.values()))
    return Applied(
        {"memory": str(mid), "entities": len(current), "relations": relations,
         "orphansRemoved": len(removed)},
        memory_partitions([mid]) | entity_partitions(previous | set(current.values())))


def upsert_memories(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """:func:`upsert_memory` for each of ``items``, in one transaction."""
    totals = {"memories": 0, "entities": 0, "relations": 0, "orphansRemoved": 0}
    dirty: set[str] = set()
    for item in payload["items"]:
        applied = upsert_memory(conn, tenant, item)
        dirty |= applied.dirty
        totals["memories"] += 1
        for name in ("entities", "relations", "orphansRemoved"):
            totals[name] += applied.result[name]
    return Applied(totals, dirty)


def repair(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """Remove what the integrity scan found: the graph data of ``memoryIds`` (as
    :func:`delete_memories`) and the entities ``entityIds`` with every edge to or from them."""
    memory_ids = [uuid.UUID(v) for v in payload.get("memoryIds", [])]
    entity_ids = [uuid.UUID(v) for v in payload.get("entityIds", [])]
    applied = delete_memories(conn, tenant, {"ids": memory_ids}) if memory_ids else Applied({})
    if entity_ids:
        _run(conn, tenant, "DELETE FROM memory_edges WHERE tenant_id = $tenant_id AND target_id IN "
             "(SELECT unnest($ids))", ids=entity_ids)
        _run(conn, tenant, "DELETE FROM entity_edges WHERE tenant_id = $tenant_id AND (source_id "
             "IN (SELECT unnest($ids)) OR target_id IN (SELECT unnest($ids)))", ids=entity_ids)
        _run(conn, tenant, "DELETE FROM entities WHERE tenant_id = $tenant_id AND id IN "
             "(SELECT unnest($ids))", ids=entity_ids)
    # Entity edges are partitioned by memory: a repair of entities may touch any of them.
    dirty = applied.dirty | entity_partitions(entity_ids)
    if entity_ids:
        dirty |= {name for name in all_partitions() if name.startswith(("memory_edges",
                                                                          "entity_edges"))}
    return Applied({"memories": len(memory_ids), "entities": len(entity_ids)}, dirty)


def _add_alias(conn: Any, tenant: str, eid: uuid.UUID, name: str) -> None:
    _run(conn, tenant, "UPDATE entities SET deleted_at = NULL, aliases = CASE WHEN "
         "list_contains(aliases, $name) THEN aliases ELSE list_append(aliases, $name) END "
         "WHERE tenant_id = $tenant_id AND id = $id", id=eid, name=name)


def _ids(payload: dict[str, Any]) -> list[uuid.UUID]:
    return [uuid.UUID(str(value)) for value in payload["ids"]]


def delete_memories(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """Hard-delete memories' graph data (seed 001 "Cascading Graph Deletion"): their nodes,
    every memory edge from or to them, the entity edges derived from them, and the entities
    no remaining memory mentions. ``ids``: the memory ids (one batch, one transaction)."""
    ids = _ids(payload)
    linked = _linked_entities(conn, tenant, ids)
    _remove_derived(conn, tenant, ids)
    nodes = _rows(conn, tenant, "SELECT count(*) FROM memory_nodes WHERE tenant_id = $tenant_id "
                  "AND id IN (SELECT unnest($ids))", ids=ids)[0][0]
    _run(conn, tenant, "DELETE FROM memory_nodes WHERE tenant_id = $tenant_id AND id IN "
         "(SELECT unnest($ids))", ids=ids)
    removed = _drop_orphans(conn, tenant, linked)
    return Applied({"nodes": nodes, "entitiesRemoved": len(removed)},
                   memory_partitions(ids) | entity_partitions(linked))


def _mark_derived(conn: Any, tenant: str, ids: list[uuid.UUID], *, deleted: bool) -> None:
    """Set (now) or clear ``deleted_at`` on the memories' nodes, edges and derived entity
    edges."""
    value = "now()" if deleted else "NULL"
    for table, column in (("memory_nodes", "id"), ("memory_edges", "source_id"),
                          ("entity_edges", "memory_id")):
        _run(conn, tenant, f"UPDATE {table} SET deleted_at = {value} WHERE tenant_id = "
             f"$tenant_id AND {column} IN (SELECT unnest($ids))", ids=ids)


def soft_delete_memories(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """Mark soft-deleted memories' graph data with ``deleted_at`` (seed 001 "Soft delete with
    deferred cleanup"): hidden from every query, removed by :func:`purge_deleted` after the
    retention period, brought back by :func:`restore_memories`."""
    ids = _ids(payload)
    linked = _linked_entities(conn, tenant, ids)
    _mark_derived(conn, tenant, ids, deleted=True)
    marked = _drop_orphans(conn, tenant, linked, soft=True)
    return Applied({"marked": len(ids), "entitiesMarked": len(marked)},
                   memory_partitions(ids) | entity_partitions(linked))


def restore_memories(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """Undo :func:`soft_delete_memories` for restored memories."""
    ids = _ids(payload)
    linked = _linked_entities(conn, tenant, ids)
    _mark_derived(conn, tenant, ids, deleted=False)
    if linked:
        _run(conn, tenant, "UPDATE entities SET deleted_at = NULL WHERE tenant_id = $tenant_id "
             "AND id IN (SELECT unnest($ids))", ids=list(linked))
    return Applied({"restored": len(ids)}, memory_partitions(ids) | entity_partitions(linked))


def purge_deleted(conn: Any, tenant: str, payload: dict[str, Any]) -> Applied:
    """Remove for good the rows marked deleted before ``before`` (ISO timestamp)."""
    ids = [row[0] for row in _rows(
        conn, tenant, "SELECT id FROM memory_nodes WHERE tenant_id = $tenant_id AND "
        "deleted_at < CAST($before AS TIMESTAMPTZ)", before=payload["before"])]
    entities = [row[0] for row in _rows(
        conn, tenant, "SELECT id FROM entities WHERE tenant_id = $tenant_id AND "
        "deleted_at < CAST($before AS TIMESTAMPTZ)", before=payload["before"])]
    applied = delete_memories(conn, tenant, {"ids": ids}) if ids else Applied({})
    _drop_orphans(conn, tenant, entities)
    return Applied({"memories": len(ids), "entities": len(entities)},
                   applied.dirty | entity_partitions(entities))


OPERATIONS: dict[str, Callable[[Any, str, dict[str, Any]], Applied]] = {
    "upsert_memory": upsert_memory,
    "upsert_memories": upsert_memories,
    "repair": repair,
    "delete_memories": delete_memories,
    "soft_delete_memories": soft_delete_memories,
    "restore_memories": restore_memories,
    "purge_deleted": purge_deleted,
}
