"""Writes of the memories app (seed 001 "Core Operations": add, update, delete, bulk)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from governance.models import Policy
from governance.services import enforce_write, policies_in_force
from memories.embedding.embedders import content_hash, embed_texts, get_embedder
from memories.models import HistoryAction, Kind, Memory, State
from memories.restrictions import check_layer
from memories.retrieval.filters import SOURCE_TYPES, task_id_value
from memories.retrieval.partition import resolve_identifiers
from memories.services.history import history_added, history_record, history_row
from memories.services.references import base_importance_expression, importance_expression
from memories.signals import memories_stored
from memories.telemetry import results_observed
from memory_project.errors import (
    ContentTooLong,
    InvalidInput,
    MemoryNotFound,
    MemoryServiceError,
    VersionConflict,
)
from tenants import config_cache
from tenants.audit import owned_or_not_found
from tenants.context import TenantContext
from tenants.layers import LayerIdentifiers, parse_layer, require_identifiers

MAX_METADATA_BYTES = 64 * 1024


@dataclass(frozen=True)
class MemoryInput:
    """One memory to add (seed 001 ``AddMemoryInput`` plus the scoring fields).

    ``task_id``: the task the memory was written for (seed 004 ``TaskID``), ``None`` for none;
    not a layer identifier (layer and scope do not depend on it), validated as one
    (:func:`memories.retrieval.filters.task_id_value`). ``occurred_at``: when what it records
    was said or happened on its source's clock (aware), ``None`` when unknown
    (``Memory.occurred_at``).
    """

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
    task_id: str | None = None
    occurred_at: datetime | None = None


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


def _build(ctx: TenantContext, item: MemoryInput, operation: str,
           policies: list[Policy] | None) -> Memory:
    layer = parse_layer(item.layer)
    check_layer(ctx, layer)
    identifiers = resolve_identifiers(ctx, item.identifiers)
    require_identifiers(layer, identifiers)
    content = validate_content(item.content, operation=operation)
    metadata = validate_metadata(item.metadata, operation=operation)
    context = validate_context(item.context, operation=operation)
    task_id = task_id_value(item.task_id, operation=operation)
    if item.kind not in Kind.values:
        raise InvalidInput(f"Unknown kind {item.kind!r}.", details={"allowed": Kind.values})
    for name in ("importance", "confidence"):
        value = getattr(item, name)
        if not 0.0 <= value <= 1.0:
            raise InvalidInput(f"{name} must be within [0, 1].", operation=operation)
    if item.decay_rate < 0:
        raise InvalidInput("decay_rate must be >= 0.", operation=operation)
    if policies is not None:
        content = enforce_write(ctx, content=content, metadata=metadata, layer=layer.value,
                                operation=operation, identifiers=identifiers.as_dict(),
                                policies=policies)
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
        task_id=task_id,
        occurred_at=item.occurred_at,
        embedding_model=get_embedder().model_name,
        **columns,
    )


def _built(ctx: TenantContext, items: list[MemoryInput], operation: str,
           enforce_policies: bool) -> list[Memory]:
    memories: list[Memory] = []
    policies = policies_in_force(ctx) if enforce_policies else None
    for index, item in enumerate(items):
        try:
            memories.append(_build(ctx, item, operation, policies))
        except MemoryServiceError as err:
            err.operation = err.operation or operation
            if len(items) > 1:
                err.details = {**err.details, "index": index}
            raise
    return memories


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
    with config_cache.pinned():  # one read of the tenant's configuration, not one per item
        memories = _built(ctx, items, operation, enforce_policies)
        vectors = embed_texts(ctx.tenant_id, [m.content for m in memories])
    now = timezone.now()
    for memory, (vector, _) in zip(memories, vectors, strict=True):
        memory.embedding = vector
        memory.last_confirmed_at = now
    with transaction.atomic():
        Memory.objects.bulk_create(memories)
        history_added(ctx, memories)
        memories_stored.send(sender=Memory, tenant_id=ctx.tenant_id,
                             memory_ids=[m.pk for m in memories])
    results_observed(layers=[m.layer for m in memories], result_layers=[m.layer for m in memories])
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
        InvalidInput: bad metadata, context, kind, scoring field or ``task_id``.
        EmbeddingFailed: nothing is written.
    """
    return memory_bulk_add(ctx, items=[item])[0]


def _merged(metadata: dict[str, Any], patch: dict[str, Any], operation: str) -> dict[str, Any]:
    """``metadata`` with ``patch`` merged in (JSON Merge Patch at the top level: ``null``
    removes a key), validated as stored metadata."""
    merged = {**metadata, **patch}
    return validate_metadata({k: v for k, v in merged.items() if v is not None},
                             operation=operation)


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
    ``private``, ``context``, ``occurred_at``. The model runs before the row is locked; the
    metadata patch is merged into the row as locked, so concurrent updates without a version
    lose nothing.

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
    current = owned_or_not_found(
        ctx, Memory.objects.exclude(state=State.DELETED), memory_id,
        not_found=lambda: MemoryNotFound(operation=operation, details={"id": str(memory_id)}))
    new_content = None
    if content is not None and content != current.content:
        new_content = validate_content(content, operation=operation)
    new_metadata = None
    patch: dict[str, Any] | None = None
    if metadata is not None:
        patch = validate_metadata(metadata, operation=operation)
        new_metadata = _merged(current.metadata, patch, operation)
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
        if patch is not None and memory.metadata != current.metadata:
            # Changed since it was read: merge into the locked row, not the earlier copy (no
            # lost update), and check the policies again on what will be stored.
            new_metadata = _merged(memory.metadata, patch, operation)
            enforce_write(ctx, content=new_content if new_content is not None else
                          memory.content, metadata=new_metadata, layer=memory.layer,
                          operation=operation, identifiers=memory.identifiers)
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
            memory.base_importance = base_importance_expression()
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
        if content_changed:
            memories_stored.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=[memory.pk])
    return UpdateResult(memory=memory, embedding_regenerated=new_content is not None)
