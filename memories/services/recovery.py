"""Promotion from L3 to L2 (seed 004 "L1 and L2 miss, L3 hit"): a memory the vector backend
holds and PostgreSQL has never known is written back to PostgreSQL.

PostgreSQL is the system of record, so an entry it lacks was, almost always, deleted or
erased, with the deletion from L3 still on its way through the outbox: such an entry must
stay gone. An entry is therefore promoted only when PostgreSQL has no row for its id, in any
state, **and** no history row either (every add, delete, purge and erasure leaves one, and
an erasure keeps its ``erase`` row): the case of a PostgreSQL restored from a backup older
than the vector backend's copy, or of vectors loaded with ``vector_copy`` from elsewhere.

What comes back is what L3 keeps: the text, the vector, the layer, kind, scope, task and
identifiers, and the scalar metadata (``memories.retrieval.pgvector_backend.row_metadata``);
scores start at their defaults. Each promotion writes an ``add`` history row with
``details.recoveredFrom = "l3"`` and one ``memories_recovered`` audit entry, and is stored
like any new memory (graph extraction, summaries).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from memories.embedding.embedders import content_hash
from memories.models import HistoryAction, Kind, Memory, MemoryHistory
from memories.retrieval.pgvector_backend import COLUMNS
from memories.services.history import history_record, history_row
from memories.signals import memories_stored
from memories.tiers.l3 import separate
from memory_project.errors import MemoryServiceError, ServiceUnavailable
from memory_project.resilience import mark_degraded
from tenants.audit import audit_record
from tenants.context import TenantContext
from tenants.layers import IDENTIFIER_FIELDS, LayerIdentifiers, parse_layer, require_identifiers
from vectors import registry
from vectors.base import VectorRecord
from vectors.runner import call

logger = logging.getLogger(__name__)


def _memory_of(ctx: TenantContext, record: VectorRecord) -> Memory | None:
    """The memory row a record stands for, or ``None`` when its metadata do not make one
    (no text, an unknown layer, missing identifiers, another company)."""
    meta = dict(record.metadata)
    columns = {c: meta.pop(c, None) for c in COLUMNS}
    if not record.text or columns["company_id"] not in (None, ctx.tenant_slug):
        return None
    try:
        layer = parse_layer(str(columns["layer"]))
        identifiers = LayerIdentifiers.from_mapping({
            name: str(columns[column]) for name, column in IDENTIFIER_FIELDS.items()
            if columns.get(column) is not None})
        require_identifiers(layer, identifiers)
    except MemoryServiceError:
        return None
    identifier_columns = {column: columns[column] for column in IDENTIFIER_FIELDS.values()}
    return Memory(
        id=record.id, tenant_id=ctx.tenant_id, content=record.text,
        content_hash=content_hash(record.text), layer=layer.value,
        kind=str(columns["kind"] or Kind.FACT), scope=str(columns["scope"] or "global"),
        task_id=str(columns["task_id"]) if columns["task_id"] is not None else None,
        metadata=meta, embedding=list(record.vector),
        **identifier_columns)


@transaction.atomic
def memories_recover_from_l3(ctx: TenantContext, memory_ids: Sequence[str]) -> list[Memory]:
    """Promote those of ``memory_ids`` (valid UUID strings, none in L2) that L3 holds and
    PostgreSQL never knew (see the module docstring). Nothing when L3 is pgvector.

    Returns:
        The memories written, in no particular order. An unavailable backend returns none
        and flags the request degraded (``vector_backend``).
    """
    if not memory_ids or not separate():
        return []
    known = {str(pk) for pk in Memory.objects.filter(pk__in=memory_ids)
             .values_list("pk", flat=True)}
    known |= {str(pk) for pk in MemoryHistory.objects.filter(memory_id__in=memory_ids)
              .values_list("memory_id", flat=True)}
    unknown = [i for i in memory_ids if i not in known]
    if not unknown:
        return []
    try:
        records = call(registry.backend().get, str(ctx.tenant_id), unknown)
    except ServiceUnavailable as exc:
        logger.warning("L3 unavailable for a promotion: %s", exc)
        mark_degraded("vector_backend")
        return []
    rows = [m for m in (_memory_of(ctx, r) for r in records if r.id in unknown) if m]
    if not rows:
        return []
    Memory.objects.bulk_create(rows)
    ids: list[Any] = [m.pk for m in rows]
    history_record(history_row(ctx, m.pk, HistoryAction.ADD, new_content=m.content,
                               new_metadata=m.metadata, details={"recoveredFrom": "l3"})
                   for m in rows)
    audit_record(ctx, action="memories_recovered", target_type="memory",
                 details={"ids": [str(i) for i in ids], "from": registry.backend().name})
    memories_stored.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=ids)
    return rows
