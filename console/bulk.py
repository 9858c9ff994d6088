"""Bulk actions of the console's memory browser: archive, soft-delete or restore the memories
an admin checked, through the memory services, audited per memory as the single-memory actions
of the memory page are (``memory_archived``, ``memory_deleted``, ``memory_restored``).

Runs in the caller's tenant scope (see :mod:`console.access`): ids of other tenants, unknown
ids and malformed ones all count as "not found", touch nothing, and a well-formed one is
recorded in the security log like any lookup of a missing memory.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from console.services import console_memory_restore
from memories.models import Memory, State
from memories.services.deletion import memory_archive, memory_bulk_delete
from memory_project.errors import InvalidInput, MemoryNotFound
from tenants.audit import audit_cross_tenant_probe, audit_record, parse_uuid
from tenants.context import TenantContext

#: Most memories one bulk action may name.
MAX_BULK = 500
#: Action → the past tense its message uses.
ACTIONS: dict[str, str] = {"archive": "Archived", "delete": "Deleted", "restore": "Restored"}


@dataclass(frozen=True)
class BulkOutcome:
    """What a bulk action did: ``changed`` memories, ``unchanged`` ones (already in the state
    asked for, or deleted for an archive) and ``not_found`` ids."""

    action: str
    changed: int
    unchanged: int
    not_found: int

    def message(self) -> str:
        """E.g. ``"Archived 3 memories (1 unchanged, 1 not found)."``."""
        noun = "memory" if self.changed == 1 else "memories"
        extra = [f"{n} {what}" for n, what in ((self.unchanged, "unchanged"),
                                               (self.not_found, "not found")) if n]
        suffix = f" ({', '.join(extra)})" if extra else ""
        return f"{ACTIONS[self.action]} {self.changed} {noun}{suffix}."


def _archive(ctx: TenantContext, states: dict[uuid.UUID, str]) -> int:
    changed = 0
    for pk, current in states.items():
        if current != State.ACTIVE:
            continue
        try:  # audited by the service as ``memory_archived``
            changed += memory_archive(ctx, memory_id=pk)[1]
        except MemoryNotFound:  # deleted meanwhile
            continue
    return changed


def _delete(ctx: TenantContext, states: dict[uuid.UUID, str]) -> int:
    live = [pk for pk, current in states.items() if current != State.DELETED]
    deleted = int(memory_bulk_delete(ctx, memory_ids=list(states), hard=False)["deleted"])
    for pk in live:  # as ``console.services.console_memory_delete`` audits one
        audit_record(ctx, action="memory_deleted", target_type="memory", target_id=pk,
                     details={"hard": False})
    return deleted


def _restore(ctx: TenantContext, states: dict[uuid.UUID, str]) -> int:
    changed = 0
    for pk in states:  # audited as ``memory_restored`` when something was restored
        try:
            changed += console_memory_restore(ctx, memory_id=pk)
        except MemoryNotFound:  # erased meanwhile
            continue
    return changed


@transaction.atomic
def memories_bulk_apply(ctx: TenantContext, *, action: str,
                        memory_ids: Iterable[str]) -> BulkOutcome:
    """Apply ``action`` (``archive``, ``delete`` — soft, restorable — or ``restore``) to the
    memories ``memory_ids`` (UUID strings; duplicates count once) of ``ctx``'s tenant, in one
    transaction.

    Archive acts on active memories, delete on those not deleted yet, restore on deleted,
    archived or pruned ones; the rest count as unchanged. Each memory changed gets the audit
    entry its single-memory action writes.

    Returns:
        A :class:`BulkOutcome` with the counts.

    Raises:
        InvalidInput: an unknown action, or more than :data:`MAX_BULK` distinct ids (nothing
            is changed).
    """
    if action not in ACTIONS:
        raise InvalidInput(f"Unknown bulk action {action!r}: use archive, delete or restore.",
                           operation="console.memories.bulk")
    raw = list(dict.fromkeys(str(x) for x in memory_ids))
    if len(raw) > MAX_BULK:
        raise InvalidInput(f"At most {MAX_BULK} memories at a time ({len(raw)} given).",
                           operation="console.memories.bulk", details={"max": MAX_BULK})
    parsed = [parse_uuid(x) for x in raw]
    ids = list(dict.fromkeys(pk for pk in parsed if pk is not None))
    states = dict(Memory.objects.select_for_update().filter(pk__in=ids).order_by("pk")
                  .values_list("pk", "state"))
    for pk in ids:
        if pk not in states:  # missing or another tenant's: the same answer, and logged
            audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    not_found = parsed.count(None) + sum(1 for pk in ids if pk not in states)
    found = {pk: states[pk] for pk in ids if pk in states}
    changed = {"archive": _archive, "delete": _delete, "restore": _restore}[action](ctx, found)
    return BulkOutcome(action=action, changed=changed, unchanged=len(found) - changed,
                       not_found=not_found)
