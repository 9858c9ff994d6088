"""Reading memory entries by id through the tiers (seed 004 "Three-tier storage
architecture", "Batch retrieve"): L1 (this process's LRU), then L2 (PostgreSQL, one query
for all the misses, promoted to L1), then L3 (the vector backend, for ids PostgreSQL never
knew: ``memories.services.recovery``, promoted to L2 and L1).

A restricted API key reads from L2 only (its restrictions are applied by the scoped
manager), and so is every caller whose L1 is not receiving invalidations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memories.models import Memory, State
from memories.services.recovery import memories_recover_from_l3
from memories.tiers.entries import ENTRY_COLUMNS, MemoryEntry, entry_of
from memories.tiers.l1 import l1_cache
from tenants.audit import audit_cross_tenant_probe, parse_uuid
from tenants.context import TenantContext

#: Ids one batch get may name (seed 004 "Batch retrieve").
MAX_BATCH_GET = 100


@dataclass(frozen=True)
class BatchGetResult:
    """``entries``: the entries found, in the order first asked, each once; ``missing``:
    the asked ids found nowhere (malformed, missing, deleted and other tenants' alike);
    ``tiers``: how many entries each tier served (``l1``, ``l2``, ``l3``)."""

    entries: list[MemoryEntry]
    missing: list[str]
    tiers: dict[str, int] = field(default_factory=dict)


def memory_batch_get(ctx: TenantContext, *, ids: list[str]) -> BatchGetResult:
    """The entries of ``ids`` (at most :data:`MAX_BATCH_GET`, checked by the caller) in the
    caller's tenant, with their vectors, in one operation (see the module docstring).

    Soft-deleted memories are missing, archived ones are returned (like ``GET``). A
    well-formed id found nowhere is written to the security log, as ``GET`` does.
    """
    asked = list(dict.fromkeys(ids))
    parsed = {raw: parse_uuid(raw) for raw in asked}
    wanted = list(dict.fromkeys(str(pk) for pk in parsed.values() if pk is not None))
    cache = l1_cache()
    use_l1 = not ctx.is_restricted
    found = cache.get_many(ctx.tenant_id, wanted) if use_l1 else {}
    tiers = {"l1": len(found), "l2": 0, "l3": 0}
    misses = [i for i in wanted if i not in found]
    if misses:
        generation = cache.generation()
        rows = (Memory.objects.exclude(state=State.DELETED).filter(pk__in=misses)
                .only(*ENTRY_COLUMNS, "embedding"))
        read = {str(m.pk): entry_of(m, with_vector=True) for m in rows}
        recovered = ([] if ctx.is_restricted else
                     memories_recover_from_l3(ctx, [i for i in misses if i not in read]))
        promoted = {str(m.pk): entry_of(m, with_vector=True) for m in recovered}
        if use_l1:
            cache.put_many(ctx.tenant_id, [*read.values(), *promoted.values()],
                           generation=generation)
        tiers["l2"], tiers["l3"] = len(read), len(promoted)
        found.update(read)
        found.update(promoted)
    entries: list[MemoryEntry] = []
    missing: list[str] = []
    for raw in asked:
        pk = parsed[raw]
        entry = found.pop(str(pk), None) if pk is not None else None
        if entry is not None:
            entries.append(entry)
        elif pk is None or str(pk) not in {e.id for e in entries}:
            missing.append(raw)
            if pk is not None:
                audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    return BatchGetResult(entries=entries, missing=missing, tiers=tiers)
