"""Writes of the knowledge graph: extraction of a memory's entities and relations (seed 001
"LLM-based Entity Extraction"), the graph side of deleting and restoring memories (seed 001
"Cascading Graph Deletion"), the backfill of memories stored before the graph existed, the
purge of soft-deleted graph data, and the integrity scan (seed 001 "Periodic integrity scan").

Every write reaches the store through ``graph.writer.graph_write`` (single writer, FIFO,
acknowledged after commit and publication). Model calls happen here, in Celery jobs, never on
a web worker: the receivers of the memory store's signals only queue jobs, in the memory
write's own transaction (the job outbox), so a graph change follows every committed memory
change and none follows a rolled-back one.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from graph import selectors, store
from graph.ops import ENTITY
from graph.tenant_sql import tenant_execute
from graph.writer import graph_write
from jobs.services import job_enqueue
from llm.purposes.entities import entities_in_query, extract_offline
from llm.purposes.graph import extract_graph
from memories.models import Memory, State
from memories.services.lifecycle_config import deleted_retention_days
from tenants.audit import audit_record
from tenants.context import TenantContext

logger = logging.getLogger(__name__)

EXTRACT_TASK = "graph.extract_memories"
APPLY_TASK = "graph.apply"
#: Memories per extraction job and per graph write.
BATCH = 25


def graph_queue_extraction(ctx: TenantContext, *, memory_ids: Iterable[uuid.UUID]) -> None:
    """Queue extraction of these memories (in the caller's transaction: sent on commit)."""
    ids = [str(pk) for pk in memory_ids]
    if not settings.GRAPH_EXTRACTION:
        return
    for start in range(0, len(ids), BATCH):
        job_enqueue(ctx, task=EXTRACT_TASK, args=[str(ctx.tenant_id), ids[start:start + BATCH]])


def graph_queue_change(ctx: TenantContext, *, op: str, memory_ids: Iterable[uuid.UUID]) -> None:
    """Queue a deletion, soft deletion or restore of memories' graph data (``op`` of
    ``graph.ops.OPERATIONS``), in the caller's transaction."""
    ids = [str(pk) for pk in memory_ids]
    if ids:
        job_enqueue(ctx, task=APPLY_TASK, args=[str(ctx.tenant_id), op, {"ids": ids}])


def uses_model() -> bool:
    """Whether extraction asks a language model: ``GRAPH_EXTRACTOR`` ``llm`` always,
    ``offline`` never, ``auto`` (default) when a model server is configured
    (``LLM_BASE_URL``). The local default model is not used on ``auto``: at ~15 s a memory on
    2 cores it could not keep up with writes, where the offline extractor does ~8 a second
    (docs/graph.md)."""
    choice = str(settings.GRAPH_EXTRACTOR).lower()
    return choice == "llm" or (choice == "auto" and bool(settings.LLM_BASE_URL))


def _payload(ctx: TenantContext, memory: Memory, known: dict[str, str]) -> dict[str, Any]:
    """One memory's write: its extraction, with names the tenant already knows found in any
    case and typed as before (``known``: canonical name → type, grown as the batch goes)."""
    if uses_model():
        result = extract_graph(ctx, text=memory.content, known=known, layer=memory.layer)
        extraction, fallback = result.value, result.fallback
    else:
        extraction, fallback = extract_offline(memory.content, known), True
    entities: dict[str, dict[str, str]] = {}
    for entity in extraction.entities:
        entities.setdefault(entity.canonical, {"canonical": entity.canonical,
                                               "name": entity.name, "type": entity.type})
        known.setdefault(entity.canonical, entity.type)
    relations = [{"source": r.source, "target": r.target, "type": r.type}
                 for r in extraction.relations]
    return {"memory": {"id": str(memory.pk), "layer": memory.layer,
                       "contentHash": memory.content_hash,
                       "createdAt": memory.created_at.isoformat()},
            "entities": list(entities.values()), "relations": relations,
            "fallback": fallback}


def graph_extract(ctx: TenantContext, *, memory_ids: Iterable[Any]) -> dict[str, int]:
    """Extract and store the entities and relations of these memories (live ones; the others
    are skipped), one graph write for the batch.

    Returns:
        ``{"memories", "entities", "relations", "fallback"}`` counts.

    Raises:
        graph.writer.GraphWriteTimeout: the writer did not answer (the job is retried).
    """
    memories = list(Memory.objects.exclude(state=State.DELETED)
                    .filter(pk__in=list(memory_ids)).order_by("pk"))
    if not memories:
        return {"memories": 0, "entities": 0, "relations": 0, "fallback": 0}
    known = selectors.known_types(ctx)
    items = [_payload(ctx, memory, known) for memory in memories]
    result = graph_write(ctx.tenant_id, "upsert_memories", {"items": items})
    return {"memories": len(items), "entities": int(result.get("entities", 0)),
            "relations": int(result.get("relations", 0)),
            "fallback": sum(1 for item in items if item["fallback"])}


def graph_apply(ctx: TenantContext, *, op: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Apply one queued graph change for ``ctx``'s tenant (see :func:`graph_queue_change`)."""
    return graph_write(ctx.tenant_id, op, payload)


def graph_backfill(ctx: TenantContext, *, progress: Callable[[int, int], None] | None = None,
                   force: bool = False) -> dict[str, int]:
    """Extract every live memory of the tenant that the graph does not hold yet (or holds
    with other content), in batches of :data:`BATCH`; ``force`` re-extracts them all.

    Args:
        progress: called with ``(memories done in the batch, memories pending in all)``
            before the first batch (``0``) and after each.

    Returns:
        ``{"pending", "memories", "entities", "relations"}``.
    """
    graph = store.reader(ctx.tenant_id).cursor(("memory_nodes",))
    held = dict(tenant_execute(graph, "SELECT id, content_hash FROM memory_nodes WHERE "
                               "tenant_id = $tenant_id", {"tenant_id": str(ctx.tenant_id)}))
    rows = Memory.objects.exclude(state=State.DELETED).order_by("pk").values_list(
        "pk", "content_hash")
    pending = [pk for pk, digest in rows if force or held.get(pk) != digest]
    totals = {"pending": len(pending), "memories": 0, "entities": 0, "relations": 0}
    if progress is not None:
        progress(0, len(pending))
    for start in range(0, len(pending), BATCH):
        done = graph_extract(ctx, memory_ids=pending[start:start + BATCH])
        for name in ("memories", "entities", "relations"):
            totals[name] += done[name]
        if progress is not None:
            progress(done["memories"], len(pending))
    return totals


def graph_purge_deleted(ctx: TenantContext) -> dict[str, Any]:
    """Remove for good the graph data of memories soft-deleted longer ago than the tenant's
    retention for deleted memories (the same period after which the memories are erased)."""
    before = timezone.now() - timedelta(days=deleted_retention_days(ctx))
    return graph_write(ctx.tenant_id, "purge_deleted", {"before": before.isoformat()})


def graph_integrity_scan(ctx: TenantContext, *, repair: bool = False) -> dict[str, Any]:
    """Find graph rows whose ends are gone (seed 001 "Periodic integrity scan"): nodes of
    memories the memory store no longer has, edges to missing nodes or entities, entities no
    memory mentions. Violations are written to the audit log (``graph_integrity_violations``);
    ``repair`` removes them (through the writer).

    Returns:
        Counts per kind of violation, and ``repaired`` (bool).
    """
    tenant = str(ctx.tenant_id)
    cursor = store.reader(ctx.tenant_id).cursor()
    found = {name: [row[0] for row in tenant_execute(cursor, sql, {
        "tenant_id": tenant, "entity": ENTITY})]
        for name, sql in _ORPHAN_QUERIES.items()}
    node_ids = [row[0] for row in tenant_execute(
        cursor, "SELECT id FROM memory_nodes WHERE tenant_id = $tenant_id",
        {"tenant_id": tenant})]
    existing = set(Memory.objects.filter(pk__in=node_ids).values_list("pk", flat=True))
    found["nodesWithoutMemory"] = [pk for pk in node_ids if pk not in existing]
    counts: dict[str, Any] = {name: len(ids) for name, ids in found.items()}
    if any(counts.values()):
        audit_record(ctx, action="graph_integrity_violations", target_type="graph",
                     details={**counts, "sample": {k: [str(v) for v in ids[:5]]
                                                   for k, ids in found.items() if ids}})
    counts["repaired"] = False
    if repair and any(counts.values()):
        memories = found["nodesWithoutMemory"] + found["edgesFromMissing"]
        entities = (found["entitiesUnmentioned"] + found["edgesToMissing"]
                    + found["relationsWithMissingEnd"])
        graph_write(ctx.tenant_id, "repair", {"memoryIds": [str(pk) for pk in memories],
                                              "entityIds": [str(pk) for pk in entities]})
        counts["repaired"] = True
    return counts


_ORPHAN_QUERIES = {
    "edgesFromMissing": "SELECT DISTINCT m.source_id FROM memory_edges m WHERE m.tenant_id = "
    "$tenant_id AND NOT EXISTS (SELECT 1 FROM memory_nodes n WHERE n.tenant_id = $tenant_id "
    "AND n.id = m.source_id)",
    "edgesToMissing": "SELECT DISTINCT m.target_id FROM memory_edges m WHERE m.tenant_id = "
    "$tenant_id AND m.target_kind = $entity AND NOT EXISTS (SELECT 1 FROM entities e WHERE "
    "e.tenant_id = $tenant_id AND e.id = m.target_id)",
    "relationsWithMissingEnd": "SELECT DISTINCT r.source_id FROM entity_edges r WHERE "
    "r.tenant_id = $tenant_id AND (NOT EXISTS (SELECT 1 FROM entities e WHERE e.tenant_id = "
    "$tenant_id AND e.id = r.source_id) OR NOT EXISTS (SELECT 1 FROM entities f WHERE "
    "f.tenant_id = $tenant_id AND f.id = r.target_id))",
    "entitiesUnmentioned": "SELECT e.id FROM entities e WHERE e.tenant_id = $tenant_id AND "
    "e.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM memory_edges m WHERE m.tenant_id = "
    "$tenant_id AND m.target_id = e.id)",
}


def query_entities(ctx: TenantContext, text: str) -> list[str]:
    """Canonical names of the tenant's entities that ``text`` names, in any case
    (``llm.purposes.entities.entities_in_query`` against the tenant's entity names), for
    graph-expanded search."""
    known = selectors.known_types(ctx).keys()
    return sorted(name for name in entities_in_query(text, known) if name in known)
