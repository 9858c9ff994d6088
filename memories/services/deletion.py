"""Deleting memories: soft delete (the default), hard erasure (right to erasure), erasure by
identifier for data-subject requests, and restore."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.dispatch import Signal
from django.utils import timezone

from governance.services import review_items_erase_subject
from llm import cache as llm_cache
from memories.embedding.embedders import cache_evict
from memories.models import ClosedSession, HistoryAction, Memory, State
from memories.services.history import history_erase, history_record, history_row, history_texts
from memories.signals import memories_restored, memories_soft_deleted, memories_withdrawn
from memory_project.errors import (
    InvalidInput,
    MemoryNotFound,
)
from memory_project.validation import unstorable_text
from tenants.audit import (
    audit_cross_tenant_probe,
    audit_record,
    owned_or_not_found,
    parse_uuid,
    pseudonym,
)
from tenants.config_cache import version_bump
from tenants.context import TenantContext
from tenants.layers import IDENTIFIER_FIELDS

logger = logging.getLogger(__name__)

# --- delete, erase, restore -------------------------------------------------------------------

#: Sent inside the erasing transaction with ``tenant_id``, ``memory_ids`` and ``rows`` (each
#: erased memory's ``layer`` and identifier columns, read before the delete): apps that keep
#: data derived from memories (the graph, summaries) remove it in their receiver.
memories_erased = Signal()


def memories_erase(ctx: TenantContext, *, memory_ids: list[uuid.UUID], reason: str) -> int:
    """Erase memories for good (right to erasure), everywhere they are kept:

    - the rows go (their feedback and keyword postings with them);
    - the content and metadata in their history are blanked, leaving one ``erase`` row each;
    - review items about them are scrubbed (``governance.services.review_items_scrub``);
    - the embedding cache forgets every version of their text (Redis and, through a new
      ``config_version`` of the tenant, every process:
      ``memories.embedding.embedders.cache_evict``);
    - cached language-model answers of the tenant become unreachable (``llm.cache``);
    - receivers of :data:`memories_erased` drop what they derived from them.

    Must run inside a transaction (the callers are atomic). Ids that match nothing in the
    active tenant are ignored.

    Returns:
        The number of memories erased.
    """
    rows = list(Memory.objects.select_for_update().filter(pk__in=memory_ids).order_by("pk")
                .values("pk", "content", "layer", *IDENTIFIER_FIELDS.values()))
    if not rows:
        return 0
    ids = [row["pk"] for row in rows]
    texts = {row["content"] for row in rows} | history_texts(ids)
    history_erase(ctx, ids, reason=reason)
    Memory.objects.filter(pk__in=ids).delete()
    memories_erased.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=ids, rows=[
        {k: v for k, v in row.items() if k not in ("pk", "content")} for row in rows])
    version_bump(ctx.tenant_id)
    tenant_id = ctx.tenant_id
    transaction.on_commit(lambda: cache_evict(tenant_id, sorted(texts)))
    transaction.on_commit(lambda: _forget_llm_answers(tenant_id))
    return len(ids)


def _forget_llm_answers(tenant_id: uuid.UUID) -> None:
    """No cached language-model answer derived from erased content is served again (Redis
    down: logged; such answers then expire with their TTL, one hour by default)."""
    try:
        llm_cache.invalidate_tenant(tenant_id)
    except Exception as exc:
        logger.error("llm cache of tenant %s not invalidated after an erasure: %s",
                     tenant_id, exc)


def _soft_delete(ctx: TenantContext, memories: list[Memory]) -> int:
    """Mark memories deleted (``state``, ``deleted_at``, ``version`` + 1) with a ``delete``
    history row each (the content and metadata that were deleted)."""
    if not memories:
        return 0
    now = timezone.now()
    Memory.objects.filter(pk__in=[m.pk for m in memories]).update(
        state=State.DELETED, deleted_at=now, version=F("version") + 1, updated_at=now)
    history_record(
        history_row(ctx, m.pk, HistoryAction.DELETE, old_content=m.content,
                    old_metadata=m.metadata, details={"previousState": m.state})
        for m in memories
    )
    memories_soft_deleted.send(sender=Memory, tenant_id=ctx.tenant_id,
                               memory_ids=[m.pk for m in memories])
    return len(memories)


@transaction.atomic
def memory_delete(ctx: TenantContext, *, memory_id: Any, hard: bool = False) -> bool:
    """Delete a memory (seed 001 "Delete Memory"); idempotent, always ``True``.

    Soft by default: ``state`` becomes ``deleted`` with ``deleted_at`` (hidden from every
    read; :func:`memory_restore` brings it back; purged after the tenant's retention).
    ``hard`` erases it now (:func:`memories_erase`, audited as ``memory_erased``), also when
    it was soft-deleted before. A missing id, a malformed id and another tenant's id all
    succeed without effect (the foreign one is audited as a probe).
    """
    pk = parse_uuid(memory_id)
    if pk is None:
        return True
    if hard:
        if memories_erase(ctx, memory_ids=[pk], reason="delete"):
            audit_record(ctx, action="memory_erased", target_type="memory", target_id=pk,
                         details={"reason": "delete"})
        else:
            audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
        return True
    memory = Memory.objects.select_for_update().filter(pk=pk).first()
    if memory is None:
        audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    elif memory.state != State.DELETED:
        _soft_delete(ctx, [memory])
    return True


@transaction.atomic
def memory_bulk_delete(ctx: TenantContext, *, memory_ids: list[Any],
                       hard: bool = False) -> dict[str, Any]:
    """Delete many memories (seed 001 ``bulkDelete``), soft unless ``hard`` (see
    :func:`memory_delete`); one transaction.

    Returns:
        ``{"deleted": int, "failed": [str]}``: ``deleted`` counts memories this call deleted
        (soft: those not deleted before; hard: those erased); ``failed`` lists ids that are
        not valid memory ids. Ids that match nothing (missing or another tenant's) are
        neither: deletion is idempotent.
    """
    valid: list[uuid.UUID] = []
    failed: list[str] = []
    for raw in memory_ids:
        pk = parse_uuid(raw)
        if pk is None:
            failed.append(str(raw))
        elif pk not in valid:
            valid.append(pk)
    if not valid:
        return {"deleted": 0, "failed": failed}
    if hard:
        erased = memories_erase(ctx, memory_ids=valid, reason="delete")
        if erased:
            audit_record(ctx, action="memories_erased", target_type="memory",
                         details={"reason": "bulk_delete", "count": erased})
        return {"deleted": erased, "failed": failed}
    memories = list(Memory.objects.select_for_update().filter(pk__in=valid)
                    .exclude(state=State.DELETED).order_by("pk")
                    .only("pk", "content", "metadata", "state"))
    return {"deleted": _soft_delete(ctx, memories), "failed": failed}


#: Identifiers a data-subject erasure may name (camelCase → column).
ERASE_IDENTIFIERS: dict[str, str] = {
    "userId": "user_id", "agentId": "agent_id", "sessionId": "session_id",
    "projectId": "project_id",
}


def validate_erase_identifiers(identifiers: Any) -> dict[str, str]:
    """Check the identifiers of an erasure: at least one of ``userId``, ``agentId``,
    ``sessionId``, ``projectId``; non-empty strings of at most 255 characters, storable.

    Raises:
        InvalidInput: none given, an unknown name, or a bad value (400).
    """
    operation = "memory.erase"
    if not isinstance(identifiers, dict) or not identifiers:
        raise InvalidInput("Name whose memories to erase: userId, agentId, sessionId or "
                           "projectId.", operation=operation,
                           details={"allowed": sorted(ERASE_IDENTIFIERS)})
    unknown = sorted(set(identifiers) - set(ERASE_IDENTIFIERS))
    if unknown:
        raise InvalidInput(f"Unknown parameter(s): {', '.join(unknown)}.", operation=operation,
                           details={"allowed": sorted(ERASE_IDENTIFIERS)})
    for name, value in identifiers.items():
        if (not isinstance(value, str) or not value.strip() or len(value) > 255
                or unstorable_text(value)):
            raise InvalidInput(f"{name} must be a non-empty identifier of at most 255 "
                               "characters.", operation=operation)
    return dict(identifiers)


@transaction.atomic
def memory_erase_by_identifiers(ctx: TenantContext, *, identifiers: Any) -> int:
    """Erase a data subject (e.g. ``{"userId": "u1"}``) from the caller's tenant: every
    memory carrying all of ``identifiers``, in any layer and any state, everywhere it is kept
    (:func:`memories_erase`); the refused writes of that subject waiting for or past review
    (``governance.services.review_items_erase_subject``); and the records of the subject's
    closed sessions (user and session ids). The audit entry ``memory_erase_request`` names the
    subject by pseudonym only (``governance.services.pseudonym``), as every audit entry does.

    Returns:
        The number of memories erased (0 is a valid answer).

    Raises:
        InvalidInput: see :func:`validate_erase_identifiers`.
    """
    checked = validate_erase_identifiers(identifiers)
    columns = {ERASE_IDENTIFIERS[k]: v for k, v in checked.items()}
    ids = list(Memory.objects.filter(**columns).values_list("pk", flat=True))
    erased = memories_erase(ctx, memory_ids=ids, reason="identifier") if ids else 0
    reviews = review_items_erase_subject(ctx, identifiers=checked)
    sessions = {k: v for k, v in columns.items() if k in ("user_id", "session_id")}
    closed = ClosedSession.objects.filter(**sessions).delete()[0] if len(sessions) == len(
        columns) else 0
    audit_record(ctx, action="memory_erase_request", target_type="identifier",
                 details={"identifiers": {k: pseudonym(ctx, v) for k, v in checked.items()},
                          "erased": erased, "reviewItems": reviews, "closedSessions": closed})
    return erased


def memory_restore(ctx: TenantContext, *, memory_id: Any) -> tuple[Memory, bool]:
    """Bring back a soft-deleted, archived (decayed or merged away) or pruned memory.

    The memory becomes active and searchable: ``deleted_at`` and ``pruned_at`` are cleared,
    ``metadata.mergedInto`` is dropped, the running reward starts afresh, ``restored_at`` is
    set (decay counts from it, and consolidation leaves a restored memory alone), and a
    ``restore`` history row is written. Restoring an active memory changes nothing.

    Returns:
        ``(memory, restored)``; ``restored`` is ``False`` when there was nothing to restore.

    Raises:
        MemoryNotFound: no such memory in this tenant (erased, missing, malformed or another
            tenant's id; the last is audited).
    """
    pk = parse_uuid(memory_id)
    with transaction.atomic():
        memory = Memory.objects.select_for_update().filter(pk=pk).first() if pk else None
        if memory is not None:
            return _restore(ctx, memory)
    if pk is not None:  # outside the atomic block, so that the audit entry stays
        audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    raise MemoryNotFound(operation="memory.restore", details={"id": str(memory_id)})


def _restore(ctx: TenantContext, memory: Memory) -> tuple[Memory, bool]:
    if memory.state == State.ACTIVE and memory.pruned_at is None:
        return memory, False
    previous = {"state": memory.state, "pruned": memory.pruned_at is not None}
    old_metadata = memory.metadata
    now = timezone.now()
    memory.metadata = {k: v for k, v in (memory.metadata or {}).items() if k != "mergedInto"}
    memory.state = State.ACTIVE
    memory.deleted_at = None
    if memory.pruned_at is not None:
        memory.feedback_count, memory.reward_sum = 0, 0.0
    memory.pruned_at = None
    memory.restored_at = now
    memory.version = F("version") + 1
    memory.save()
    memory.refresh_from_db(fields=["version", "updated_at"])
    history_record([history_row(
        ctx, memory.pk, HistoryAction.RESTORE, new_content=memory.content,
        old_metadata=old_metadata if old_metadata != memory.metadata else None,
        new_metadata=memory.metadata if old_metadata != memory.metadata else None,
        details=previous,
    )])
    memories_restored.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=[memory.pk])
    return memory, True


@transaction.atomic
def memory_archive(ctx: TenantContext, *, memory_id: Any, reason: str = "manual"
                   ) -> tuple[Memory, bool]:
    """Archive an active memory by hand (as decay does): it leaves search, recall and list,
    keeps its content, and comes back with :func:`memory_restore`. Writes an ``archive``
    history row and a ``memory_archived`` audit entry.

    Returns:
        ``(memory, archived)``; ``archived`` is ``False`` when it was not active.

    Raises:
        MemoryNotFound: no such memory in this tenant (deleted, missing, malformed or another
            tenant's id; the last is audited).
    """
    memory = owned_or_not_found(
        ctx, Memory.objects.select_for_update().exclude(state=State.DELETED), memory_id,
        not_found=lambda: MemoryNotFound(operation="memory.archive",
                                         details={"id": str(memory_id)}))
    if memory.state != State.ACTIVE:
        return memory, False
    memory.state = State.ARCHIVED
    memory.version = F("version") + 1
    memory.save(update_fields=["state", "version", "updated_at"])
    memories_withdrawn.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=[memory.pk])
    memory.refresh_from_db(fields=["version", "updated_at"])
    history_record([history_row(ctx, memory.pk, HistoryAction.ARCHIVE,
                                details={"reason": reason})])
    audit_record(ctx, action="memory_archived", target_type="memory", target_id=memory.pk,
                 details={"reason": reason})
    return memory, True
