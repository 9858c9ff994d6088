"""Writes of the memories app (seed 001 "Core Operations": add, update, delete, bulk)."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, FloatField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from governance.services import audit_cross_tenant_probe, audit_record, enforce_write
from memories.embeddings import content_hash, embed_texts, get_embedder
from memories.filters import SOURCE_TYPES
from memories.history import history_added, history_erase, history_record, history_row
from memories.layers import LayerIdentifiers, parse_layer, require_identifiers
from memories.lifecycle_config import lifecycle_section
from memories.models import HistoryAction, Kind, Memory, MemoryFeedback, State
from memories.scoping import resolve_identifiers
from memory_project.errors import (
    ContentTooLong,
    InvalidInput,
    MemoryNotFound,
    MemoryServiceError,
    VersionConflict,
)
from memory_project.validation import unstorable_text
from tenants.context import TenantContext

MAX_METADATA_BYTES = 64 * 1024


@dataclass(frozen=True)
class MemoryInput:
    """One memory to add (seed 001 ``AddMemoryInput`` plus the scoring fields)."""

    content: str
    layer: str
    identifiers: LayerIdentifiers
    metadata: dict[str, Any] = field(default_factory=dict)
    context: str = ""
    kind: str = Kind.FACT
    scope: str = "global"
    importance: float = 0.5
    confidence: float = 1.0
    decay_rate: float = 0.0
    sensitive: bool = False
    private: bool = False


@dataclass(frozen=True)
class AddResult:
    """Seed 001 ``AddMemoryOutput``."""

    memory: Memory
    embedding_generated: bool


@dataclass(frozen=True)
class UpdateResult:
    """Seed 001 ``UpdateMemoryOutput``."""

    memory: Memory
    embedding_regenerated: bool


def validate_content(content: Any, *, operation: str) -> str:
    """Check content: a non-empty string without NUL, at most ``MEMORY_MAX_CONTENT_LENGTH``.

    Raises:
        InvalidInput: not a string, empty, or contains NUL.
        ContentTooLong: longer than the limit; ``details.max_length`` gives it.
    """
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content must be a non-empty string.", operation=operation)
    if "\x00" in content:
        raise InvalidInput("content must not contain NUL characters.", operation=operation)
    limit = settings.MEMORY_MAX_CONTENT_LENGTH
    if len(content) > limit:
        raise ContentTooLong(
            f"content has {len(content)} characters; the limit is {limit}.",
            operation=operation,
            details={"max_length": limit, "length": len(content)},
        )
    return content


def validate_context(context: Any, *, operation: str) -> str:
    """Check ``context``: a string without NUL, at most twice the content limit.

    Raises:
        InvalidInput: not a string, or contains NUL.
        ContentTooLong: too long; ``details.max_length`` gives the limit.
    """
    if context is None:
        return ""
    if not isinstance(context, str) or "\x00" in context:
        raise InvalidInput("context must be a string without NUL characters.", operation=operation)
    limit = 2 * settings.MEMORY_MAX_CONTENT_LENGTH
    if len(context) > limit:
        raise ContentTooLong(
            f"context has {len(context)} characters; the limit is {limit}.",
            operation=operation, details={"max_length": limit, "field": "context"},
        )
    return context


def validate_metadata(metadata: Any, *, operation: str) -> dict[str, Any]:
    """Check metadata against seed 001 ``MemoryMetadata``.

    Raises:
        InvalidInput: not an object, over 64 KiB as JSON, NUL characters, ``tags`` not a
            list of strings, or ``source.type`` not one of the seed's source types.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object.", operation=operation)
    encoded = json.dumps(metadata)
    if "\\u0000" in encoded:
        raise InvalidInput("metadata must not contain NUL characters.", operation=operation)
    if len(encoded.encode()) > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is over {MAX_METADATA_BYTES} bytes.", operation=operation)
    tags = metadata.get("tags")
    if tags is not None and (
        not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)
    ):
        raise InvalidInput("metadata.tags must be a list of strings.", operation=operation)
    source = metadata.get("source")
    if source is not None and (
        not isinstance(source, dict) or source.get("type") not in SOURCE_TYPES
    ):
        raise InvalidInput(
            "metadata.source must be an object whose type is one of "
            f"{', '.join(SOURCE_TYPES)}.",
            operation=operation,
        )
    return metadata


def _build(ctx: TenantContext, item: MemoryInput, operation: str, enforce: bool) -> Memory:
    layer = parse_layer(item.layer)
    identifiers = resolve_identifiers(ctx, item.identifiers)
    require_identifiers(layer, identifiers)
    content = validate_content(item.content, operation=operation)
    metadata = validate_metadata(item.metadata, operation=operation)
    context = validate_context(item.context, operation=operation)
    if item.kind not in Kind.values:
        raise InvalidInput(f"Unknown kind {item.kind!r}.", details={"allowed": Kind.values})
    for name in ("importance", "confidence"):
        value = getattr(item, name)
        if not 0.0 <= value <= 1.0:
            raise InvalidInput(f"{name} must be within [0, 1].", operation=operation)
    if item.decay_rate < 0:
        raise InvalidInput("decay_rate must be >= 0.", operation=operation)
    if enforce:
        content = enforce_write(ctx, content=content, metadata=metadata, layer=layer.value,
                                operation=operation, identifiers=identifiers.as_dict())
    columns = {
        "agent_id": identifiers.agentId, "user_id": identifiers.userId,
        "session_id": identifiers.sessionId, "project_id": identifiers.projectId,
        "team_id": identifiers.teamId, "org_id": identifiers.orgId,
        "company_id": identifiers.companyId,
    }
    return Memory(
        tenant_id=ctx.tenant_id,
        content=content,
        content_hash=content_hash(content),
        layer=layer.value,
        metadata=metadata,
        context=context,
        kind=item.kind,
        scope=item.scope or "global",
        importance=item.importance,
        base_importance=item.importance,
        confidence=item.confidence,
        decay_rate=item.decay_rate,
        sensitive=item.sensitive,
        private=item.private,
        embedding_model=get_embedder().model_name,
        **columns,
    )


def memory_bulk_add(ctx: TenantContext, *, items: list[MemoryInput],
                    enforce_policies: bool = True) -> list[AddResult]:
    """Add many memories in one transaction with one batched embedding call.

    Every item is validated, and checked against the tenant's policies (PII may be
    redacted), before anything is embedded or written; the first invalid item fails the
    whole batch (``details.index`` says which) and no memory is stored. A policy violation
    (422 ``POLICY_VIOLATION``) leaves an audit entry and a review item.

    Raises:
        InvalidLayer, MissingIdentifier, ContentTooLong, InvalidInput: an invalid item.
        EmbeddingFailed: the model failed; nothing is written.
    """
    operation = "memory.add" if len(items) == 1 else "memory.bulk_add"
    if not items:
        return []
    if len(items) > settings.MEMORY_MAX_BULK_ITEMS:
        raise InvalidInput(
            f"At most {settings.MEMORY_MAX_BULK_ITEMS} memories per request.", operation=operation
        )
    memories: list[Memory] = []
    for index, item in enumerate(items):
        try:
            memories.append(_build(ctx, item, operation, enforce_policies))
        except MemoryServiceError as err:
            err.operation = err.operation or operation
            if len(items) > 1:
                err.details = {**err.details, "index": index}
            raise
    vectors = embed_texts(ctx.tenant_id, [m.content for m in memories])
    now = timezone.now()
    for memory, (vector, _) in zip(memories, vectors, strict=True):
        memory.embedding = vector
        memory.last_confirmed_at = now
    with transaction.atomic():
        Memory.objects.bulk_create(memories)
        history_added(ctx, memories)
    return [
        AddResult(memory=m, embedding_generated=generated)
        for m, (_, generated) in zip(memories, vectors, strict=True)
    ]


def memory_add(ctx: TenantContext, *, item: MemoryInput) -> AddResult:
    """Add one memory (seed 001 "Add Memory"): validate, embed, persist, return it.

    Raises:
        InvalidLayer: unknown layer (not retryable).
        MissingIdentifier: ``details.required`` names the layer's required identifiers.
        ContentTooLong: ``details.max_length`` gives the limit.
        EmbeddingFailed: nothing is written.
    """
    return memory_bulk_add(ctx, items=[item])[0]


def _parse_id(memory_id: Any) -> uuid.UUID | None:
    try:
        return memory_id if isinstance(memory_id, uuid.UUID) else uuid.UUID(str(memory_id))
    except (ValueError, AttributeError):
        return None


# --- importance (seed 001 "Importance Scoring") -----------------------------------------------

_IMPORTANCE_SQL = (
    "LEAST(1.0, GREATEST(0.0,"
    " %s * COALESCE(base_importance, importance)"
    " + %s * (1.0 - exp(-(access_count + 1)::float8 / %s))"
    " + %s * power(0.5::float8, GREATEST(0.0, extract(epoch FROM"
    " (%s::timestamptz - COALESCE(last_accessed_at, created_at)))::float8) / 86400.0 / %s)"
    "))"
)


def importance_expression(ctx: TenantContext, now: datetime) -> RawSQL:
    """The SQL that recomputes ``importance`` as part of an access's one UPDATE.

    Seed 001 "Importance Scoring" (frequency and recency), weights from the tenant's
    ``lifecycle.importance`` settings (defaults in brackets)::

        importance = baseWeight [0.2] × base_importance
                   + frequencyWeight [0.5] × (1 − exp(−access_count / saturation [10]))
                   + recencyWeight [0.3] × 0.5 ^ (days since the previous access / halfLifeDays [7])

    clipped to [0, 1]. ``access_count`` is the count including this access; "the previous
    access" is ``last_accessed_at`` before this one (``created_at`` for the first), so a memory
    used again after a long gap gains less than one in steady use. ``base_importance`` is the
    importance the caller gave (``importance`` itself for rows that never had it recorded).
    All columns are read before the UPDATE changes them (SQL semantics), so the expression
    belongs in the same statement that bumps ``access_count`` and ``last_accessed_at``.
    """
    cfg = lifecycle_section(ctx, "importance")
    params = [float(cfg["baseWeight"]), float(cfg["frequencyWeight"]),
              float(cfg["saturation"]), float(cfg["recencyWeight"]), now,
              float(cfg["halfLifeDays"])]
    return RawSQL(_IMPORTANCE_SQL, params, output_field=FloatField())


def _base_importance_expression() -> RawSQL:
    return RawSQL("COALESCE(base_importance, importance)", [], output_field=FloatField())


def memory_update(
    ctx: TenantContext,
    *,
    memory_id: Any,
    content: str | None = None,
    metadata: dict[str, Any] | None = None,
    expected_version: int | None = None,
    fields: dict[str, Any] | None = None,
) -> UpdateResult:
    """Update content and/or metadata (seed 001 "Update Memory").

    New content is checked against the tenant's policies and re-embedded; metadata is
    shallow-merged (a key set to ``null`` is removed, as in JSON Merge Patch, RFC 7386, at the
    top level) and does not re-embed. Both bump ``updatedAt`` and ``version``. ``fields`` may
    set ``importance``, ``confidence``, ``decay_rate``, ``kind``, ``scope``, ``sensitive``,
    ``private``, ``context``. The model runs before the row is locked.

    An update counts as an access (seed 001 "Importance Scoring"): ``access_count`` and
    ``last_accessed_at`` move and ``importance`` is recomputed (:func:`importance_expression`)
    in the same UPDATE — unless the update sets ``importance`` itself: that value is taken as
    is and becomes the new base importance. A ``update`` history row (old and new content and
    metadata; changed field names in ``details``) is written in the same transaction.

    Raises:
        MemoryNotFound: no such memory in the caller's tenant (another tenant's is the same,
            and the attempt is audited).
        VersionConflict: ``expected_version`` is not the stored version (409).
        PolicyViolation: the new content or metadata breaks a policy (422).
        ContentTooLong, InvalidInput, EmbeddingFailed: as for add; nothing changes.
    """
    operation = "memory.update"
    pk = _parse_id(memory_id)
    current = Memory.objects.exclude(state=State.DELETED).filter(pk=pk).first() if pk else None
    if current is None:
        if pk is not None:
            audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
        raise MemoryNotFound(operation=operation, details={"id": str(memory_id)})
    new_content = None
    if content is not None and content != current.content:
        new_content = validate_content(content, operation=operation)
    new_metadata = None
    if metadata is not None:
        patch = validate_metadata(metadata, operation=operation)
        merged = {**current.metadata, **patch}
        new_metadata = validate_metadata(
            {k: v for k, v in merged.items() if v is not None}, operation=operation
        )
    if fields and "context" in fields:
        fields = {**fields, "context": validate_context(fields["context"], operation=operation)}
    if new_content is not None or new_metadata is not None:
        checked = enforce_write(
            ctx, content=new_content if new_content is not None else current.content,
            metadata=new_metadata if new_metadata is not None else current.metadata,
            layer=current.layer, operation=operation, identifiers=current.identifiers,
        )
        if new_content is not None:
            new_content = checked
    vector = None
    if new_content is not None:
        (vector, _), = embed_texts(ctx.tenant_id, [new_content])
    with transaction.atomic():
        memory = Memory.objects.select_for_update().exclude(state=State.DELETED).filter(
            pk=current.pk).first()
        if memory is None:  # deleted meanwhile
            raise MemoryNotFound(operation=operation, details={"id": str(memory_id)})
        if expected_version is not None and expected_version != memory.version:
            raise VersionConflict(operation=operation,
                                  details={"expected": expected_version, "current": memory.version})
        old_content, old_metadata = memory.content, memory.metadata
        if new_content is not None:
            memory.content = new_content
            memory.embedding = vector
            memory.content_hash = content_hash(new_content)
        if new_metadata is not None:
            memory.metadata = new_metadata
        for name, value in (fields or {}).items():
            setattr(memory, name, value)
        now = timezone.now()
        if fields and "importance" in fields:
            memory.base_importance = fields["importance"]
        else:
            memory.importance = importance_expression(ctx, now)
            memory.base_importance = _base_importance_expression()
        memory.access_count = F("access_count") + 1
        memory.last_accessed_at = now
        memory.version = F("version") + 1
        memory.save()
        memory.refresh_from_db(fields=["version", "updated_at", "importance", "base_importance",
                                       "access_count", "last_accessed_at"])
        content_changed = new_content is not None and new_content != old_content
        metadata_changed = new_metadata is not None and new_metadata != old_metadata
        changed = {*(fields or {})} | {name for name, flag in (
            ("content", content_changed), ("metadata", metadata_changed)) if flag}
        history_record([history_row(
            ctx, memory.pk, HistoryAction.UPDATE,
            old_content=old_content if content_changed else None,
            new_content=memory.content if content_changed else None,
            old_metadata=old_metadata if metadata_changed else None,
            new_metadata=memory.metadata if metadata_changed else None,
            details={"version": memory.version, "fields": sorted(changed)},
        )])
    return UpdateResult(memory=memory, embedding_regenerated=new_content is not None)


# --- delete, erase, restore -------------------------------------------------------------------

def memories_erase(ctx: TenantContext, *, memory_ids: list[uuid.UUID], reason: str) -> int:
    """Erase memories for good (right to erasure): the rows go (their feedback with them) and
    the content and metadata in their history are blanked, leaving one ``erase`` row each.

    Must run inside a transaction (the callers are atomic). Ids that match nothing in the
    active tenant are ignored.

    Returns:
        The number of memories erased.
    """
    ids = list(Memory.objects.select_for_update().filter(pk__in=memory_ids).order_by("pk")
               .values_list("pk", flat=True))
    if not ids:
        return 0
    history_erase(ctx, ids, reason=reason)
    Memory.objects.filter(pk__in=ids).delete()
    return len(ids)


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
    pk = _parse_id(memory_id)
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
        pk = _parse_id(raw)
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
    """Erase every memory of the caller's tenant that carries all of ``identifiers`` (a
    data-subject request: e.g. ``{"userId": "u1"}``), in any layer and any state, history
    content included (:func:`memories_erase`). Audited as ``memory_erase_request``.

    Returns:
        The number of memories erased (0 is a valid answer).

    Raises:
        InvalidInput: see :func:`validate_erase_identifiers`.
    """
    checked = validate_erase_identifiers(identifiers)
    columns = {ERASE_IDENTIFIERS[k]: v for k, v in checked.items()}
    ids = list(Memory.objects.filter(**columns).values_list("pk", flat=True))
    erased = memories_erase(ctx, memory_ids=ids, reason="identifier") if ids else 0
    audit_record(ctx, action="memory_erase_request", target_type="identifier",
                 details={"identifiers": checked, "erased": erased})
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
    pk = _parse_id(memory_id)
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
    return memory, True


# --- access and feedback ----------------------------------------------------------------------

def memory_references_record(ctx: TenantContext, *, memory_ids: list[uuid.UUID]) -> int:
    """Count a retrieval of ``memory_ids``: one UPDATE for the whole request (seed 002).

    Bumps ``reference_count``/``last_referenced_at`` (seed 002) and ``access_count``/
    ``last_accessed_at``, and recomputes ``importance`` from frequency and recency (seed 001
    "Importance Scoring", formula in :func:`importance_expression`), keeping the caller's
    importance in ``base_importance``. Returns the number of rows touched.
    """
    if not memory_ids:
        return 0
    now = timezone.now()
    return Memory.objects.filter(pk__in=memory_ids).update(
        reference_count=F("reference_count") + 1,
        last_referenced_at=now,
        importance=importance_expression(ctx, now),
        base_importance=_base_importance_expression(),
        access_count=F("access_count") + 1,
        last_accessed_at=now,
    )


MAX_FEEDBACK_IDS = 100


@dataclass(frozen=True)
class FeedbackResult:
    """What one feedback call recorded: per memory its running count and mean reward."""

    memories: list[Memory]

    def as_dict(self) -> dict[str, Any]:
        return {"recorded": len(self.memories), "memories": [
            {"id": str(m.pk), "feedbackCount": m.feedback_count,
             "meanReward": m.reward_sum / m.feedback_count if m.feedback_count else None}
            for m in self.memories]}


def validate_feedback(memory_ids: Any, reward: Any, query: Any) -> tuple[list[uuid.UUID],
                                                                       float, str]:
    """Check a feedback call: 1..100 memory ids (UUIDs; repeats count once), a finite reward
    in [-1, 1], an optional query string (at most ``MEMORY_MAX_QUERY_LENGTH``, storable).

    Raises:
        InvalidInput: anything else (400).
    """
    operation = "memory.feedback"
    if not isinstance(memory_ids, list) or not 1 <= len(memory_ids) <= MAX_FEEDBACK_IDS:
        raise InvalidInput(f"memoryIds must be a list of 1..{MAX_FEEDBACK_IDS} memory ids.",
                           operation=operation)
    ids: list[uuid.UUID] = []
    for raw in memory_ids:
        pk = _parse_id(raw) if isinstance(raw, str) else None
        if pk is None:
            raise InvalidInput("memoryIds must hold memory ids (UUID strings).",
                               operation=operation)
        if pk not in ids:
            ids.append(pk)
    if (isinstance(reward, bool) or not isinstance(reward, (int, float))
            or not math.isfinite(reward) or not -1.0 <= reward <= 1.0):
        raise InvalidInput("reward must be a number within [-1, 1].", operation=operation,
                           details={"min": -1, "max": 1})
    if query is None:
        query = ""
    if not isinstance(query, str) or unstorable_text(query):
        raise InvalidInput("query must be a string without NUL characters.",
                           operation=operation)
    if len(query) > settings.MEMORY_MAX_QUERY_LENGTH:
        raise InvalidInput(f"query is longer than {settings.MEMORY_MAX_QUERY_LENGTH} "
                           "characters.", operation=operation)
    return ids, float(reward), query


def memory_feedback_record(ctx: TenantContext, *, memory_ids: Any, reward: Any,
                           query: Any = None) -> FeedbackResult:
    """Record a reward for the memories that took part in a task outcome (seed 001
    "Memory-R1 Pruning"): one :class:`MemoryFeedback` row per memory and, in one UPDATE,
    ``feedback_count + 1`` and ``reward_sum + reward`` on each. Deleted memories do not take
    feedback; archived and pruned ones do.

    All or nothing: when any id is not a (non-deleted) memory of the caller's tenant, nothing
    is recorded and the answer does not say which id it was (foreign ids are audited).

    Raises:
        InvalidInput: see :func:`validate_feedback`.
        MemoryNotFound: an unknown, deleted or foreign id (404).
    """
    ids, value, text = validate_feedback(memory_ids, reward, query)
    with transaction.atomic():
        found = set(Memory.objects.select_for_update().filter(pk__in=ids)
                    .exclude(state=State.DELETED).order_by("pk").values_list("pk", flat=True))
        if len(found) == len(ids):
            MemoryFeedback.objects.bulk_create(
                MemoryFeedback(tenant_id=ctx.tenant_id, memory_id=pk, reward=value, query=text,
                               actor=ctx.principal) for pk in ids
            )
            Memory.objects.filter(pk__in=ids).update(
                feedback_count=F("feedback_count") + 1, reward_sum=F("reward_sum") + value)
            by_id = {m.pk: m for m in Memory.objects.filter(pk__in=ids)
                     .only("pk", "feedback_count", "reward_sum")}
            return FeedbackResult(memories=[by_id[pk] for pk in ids])
    for pk in ids:  # outside the atomic block, so that the audit entries stay
        if pk not in found:
            audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    raise MemoryNotFound("One or more memories were not found; nothing was recorded.",
                         operation="memory.feedback")
