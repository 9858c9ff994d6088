"""Promotion of volatile memories and the closing of sessions (seed 001 "Memory Promotion",
"Promotion Trigger", "PII Redaction", "Sensitivity Check", "Session Memory Cleanup").

A volatile memory (agent or session layer) whose importance is at least the promotion
threshold (``SessionCleanupConfig.promotionThreshold``, default 0.8) is copied, PII
redacted, into a persistent layer: the tenant's ``lifecycle.promotionTargetLayer`` if set,
else project when the memory names a project, else user. Original and copy point at each
other in metadata (``promotedTo`` / ``promotedFrom``). Memories marked sensitive or private
(the fields, or ``metadata.sensitive`` / ``metadata.private``) are never promoted: each block
is counted, audited and waits in the review queue.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from governance.pii_guard import redact_for
from governance.services import promotion_block
from memories.models import ClosedSession, Memory, State
from memories.retrieval.partition import resolve_identifiers
from memories.services.deletion import memory_bulk_delete
from memories.services.lifecycle_config import DEFAULTS
from memories.services.memory import MemoryInput, memory_bulk_add
from memory_project.errors import InvalidInput, MemoryNotFound, NotFound, PolicyViolation
from tenants.audit import audit_record, pseudonym
from tenants.context import TenantContext
from tenants.layers import Layer, LayerIdentifiers
from tenants.tenant_settings import section

VOLATILE_LAYERS = (Layer.AGENT.value, Layer.SESSION.value)
def lifecycle_settings(ctx: TenantContext) -> dict[str, Any]:
    """The tenant's ``lifecycle`` settings with seed 001's defaults filled in."""
    lifecycle = dict(section(ctx, "lifecycle").values)
    lifecycle["sessionCleanup"] = {**DEFAULTS["sessionCleanup"],
                                   **(lifecycle.get("sessionCleanup") or {})}
    return lifecycle


def is_protected(memory: Memory) -> str | None:
    """``"sensitive"`` or ``"private"`` when the memory may not be promoted, else ``None``."""
    metadata = memory.metadata or {}
    if memory.sensitive or metadata.get("sensitive") is True:
        return "sensitive"
    if memory.private or metadata.get("private") is True:
        return "private"
    return None


def promotion_target(ctx: TenantContext, memory: Memory) -> Layer:
    """Where a promoted copy goes: the tenant's choice, else project if named, else user."""
    configured = lifecycle_settings(ctx).get("promotionTargetLayer")
    if configured in {x.value for x in Layer} - set(VOLATILE_LAYERS):
        return Layer(configured)
    return Layer.PROJECT if memory.project_id else Layer.USER


@transaction.atomic
def memory_promote(ctx: TenantContext, *, memory_id: Any, override: bool = False
                   ) -> Memory | None:
    """Copy a volatile memory, PII redacted, into its persistent layer; idempotent.

    ``override`` is a reviewer's approval of a blocked promotion: the copy is then made
    although the memory is sensitive or private, and without checking tenant policies again.

    Returns:
        The persistent copy, or ``None`` when the memory is sensitive or private, or its copy
        breaks a tenant policy: the block is then counted, audited and queued for review.

    Raises:
        MemoryNotFound: no such memory in this tenant.
        InvalidInput: not an agent- or session-layer memory.
    """
    memory = Memory.objects.select_for_update().filter(pk=memory_id).first()
    if memory is None or memory.state == State.DELETED:
        raise MemoryNotFound(operation="memory.promote")
    if memory.layer not in VOLATILE_LAYERS:
        raise InvalidInput("Only agent- and session-layer memories are promoted.")
    promoted_to = (memory.metadata or {}).get("promotedTo")
    if promoted_to:
        existing = Memory.objects.filter(pk=promoted_to.get("id")).first()
        if existing is not None:
            return existing
    reason = is_protected(memory)
    if reason and not override:
        promotion_block(ctx, memory=memory, reason=reason)
        return None
    target = promotion_target(ctx, memory)
    content, findings = redact_for(ctx, memory.content)
    metadata = {
        **{k: v for k, v in (memory.metadata or {}).items() if k != "promotedTo"},
        "promotedFrom": {"id": str(memory.pk), "layer": memory.layer,
                         "sessionId": memory.session_id, "at": timezone.now().isoformat()},
    }
    identifiers = LayerIdentifiers(
        userId=memory.user_id, projectId=memory.project_id, teamId=memory.team_id,
        orgId=memory.org_id,
    )
    item = MemoryInput(
        content=content, layer=target.value, identifiers=identifiers, metadata=metadata,
        context=memory.context, kind=memory.kind, scope=memory.scope,
        importance=memory.importance, confidence=memory.confidence,
        decay_rate=memory.decay_rate, task_id=memory.task_id,
    )
    try:
        # A savepoint: a refused copy leaves nothing behind but the block recorded below.
        with transaction.atomic():
            copy = memory_bulk_add(ctx, items=[item], enforce_policies=not override)[0].memory
    except PolicyViolation as err:
        promotion_block(ctx, memory=memory, reason="policy",
                        details={"violations": err.details.get("violations", [])})
        return None
    memory.metadata = {**(memory.metadata or {}),
                       "promotedTo": {"id": str(copy.pk), "layer": target.value}}
    memory.save(update_fields=["metadata", "updated_at"])
    audit_record(ctx, action="memory_promoted", target_type="memory", target_id=memory.pk,
                 details={"to": str(copy.pk), "layer": target.value, "override": override,
                          "redacted": sorted({f.type for f in findings})})
    return copy


def memory_add_reviewed(ctx: TenantContext, *, content: str, details: dict[str, Any]
                        ) -> Memory:
    """Store a write a policy refused, after a reviewer approved it: ``content`` is the review
    item's preview (PII redacted, denied matches masked; redacted again in case the detector
    improved), policies are not applied again (the reviewer is the exception)."""
    content, _ = redact_for(ctx, content)
    item = MemoryInput(
        content=content, layer=str(details.get("layer")),
        identifiers=LayerIdentifiers.from_mapping(details.get("identifiers") or {}),
        metadata=details.get("metadata") or {},
    )
    return memory_bulk_add(ctx, items=[item], enforce_policies=False)[0].memory


def review_promotion_approved(ctx: TenantContext, item: Any) -> uuid.UUID | None:
    """Carry out an approved ``promotion_blocked`` review item (registered with governance in
    ``MemoriesConfig.ready``): promote its memory, overriding the block. Returns the copy's
    id, or ``None`` when there was nothing to promote."""
    copy = memory_promote(ctx, memory_id=item.memory_id, override=True)
    return copy.pk if copy is not None else None


def review_policy_hit_approved(ctx: TenantContext, item: Any) -> uuid.UUID:
    """Carry out an approved ``policy_hit`` review item: store its preview
    (:func:`memory_add_reviewed`). Returns the new memory's id."""
    return memory_add_reviewed(ctx, content=item.preview, details=item.details).pk


@dataclass
class SessionCloseResult:
    """What closing a session did."""

    session_id: str
    promoted: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    below_threshold: int = 0
    already_closed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "promoted": self.promoted,
                "blocked": self.blocked, "belowThreshold": self.below_threshold,
                "alreadyClosed": self.already_closed}


@transaction.atomic
def session_close(ctx: TenantContext, *, session_id: str, user_id: str | None
                  ) -> SessionCloseResult:
    """Close a session and evaluate every memory of it for promotion (seed 001 "Promotion
    check at session end"). Closing again returns the first result.

    A restricted key closes only sessions within its restriction: a ``userId`` or session
    other than the one it is pinned to is refused like any other identifier it may not name.

    Raises:
        MissingIdentifier-like InvalidInput: no ``userId``.
        Unauthorized: the key is pinned to another ``userId`` or ``sessionId``.
        NotFound: the session has no memories in this tenant (unknown or another tenant's).
    """
    if ctx.pinned_identifiers:
        pinned = resolve_identifiers(ctx, LayerIdentifiers(userId=user_id, sessionId=session_id))
        user_id = pinned.userId
    if not user_id:
        raise InvalidInput("Closing a session needs the caller's userId.",
                           details={"required": ["userId", "sessionId"]})
    closed = ClosedSession.objects.filter(session_id=session_id, user_id=user_id).first()
    if closed is not None:
        return SessionCloseResult(**{**_from_dict(closed.result), "already_closed": True})
    memories = list(Memory.objects.select_for_update().filter(
        layer__in=VOLATILE_LAYERS, session_id=session_id, user_id=user_id,
        state=State.ACTIVE,
    ).order_by("id"))
    if not memories:
        raise NotFound("Session not found.", operation="session.close")
    cleanup = lifecycle_settings(ctx)["sessionCleanup"]
    result = SessionCloseResult(session_id=session_id)
    for memory in memories:
        if not cleanup["promoteImportant"] or memory.importance < cleanup["promotionThreshold"]:
            result.below_threshold += 1
            continue
        copy = memory_promote(ctx, memory_id=memory.pk)
        if copy is None:
            result.blocked.append(str(memory.pk))
        else:
            result.promoted.append(str(copy.pk))
    ClosedSession.objects.create(tenant_id=ctx.tenant_id, session_id=session_id,
                                 user_id=user_id, closed_by=ctx.principal,
                                 result=result.as_dict())
    audit_record(ctx, action="session_closed", target_type="session",
                 target_id=pseudonym(ctx, session_id),
                 details={**result.as_dict(), "sessionId": pseudonym(ctx, session_id)})
    return result


def _from_dict(data: dict[str, Any]) -> dict[str, Any]:
    return {"session_id": data.get("sessionId", ""), "promoted": data.get("promoted", []),
            "blocked": data.get("blocked", []), "below_threshold": data.get("belowThreshold", 0)}


_PERIOD = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
#: The longest retention period: 100 years.
MAX_PERIOD = timedelta(days=36_500)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_period(value: str) -> timedelta:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"2w"``, ``"45s"`` as a timedelta (seed 001 form).

    Raises:
        InvalidInput: any other form.
    """
    match = _PERIOD.match(str(value)) if len(str(value)) <= 32 else None
    if not match:
        raise InvalidInput(f"Invalid retention period {str(value)[:32]!r}; use e.g. '7d', "
                           "'12h', '30m'.")
    period = timedelta(**{_UNITS[match.group(2)]: min(int(match.group(1)), 10**8)})
    if period > MAX_PERIOD:
        raise InvalidInput(f"Invalid retention period {value!r}: at most {MAX_PERIOD.days} days.",
                           details={"maxDays": MAX_PERIOD.days})
    return period


def sessions_cleanup(ctx: TenantContext) -> dict[str, int]:
    """The idle-session job (seed 001 ``SessionCleanupConfig``): close every session whose
    memories have been idle longer than ``retentionPeriod`` (promoting what is important),
    then, with ``autoDelete``, delete the session-layer memories of those sessions.

    Idempotent: a closed session is not closed again, deleted memories stay deleted.

    Returns:
        ``{"closed": n, "promoted": n, "blocked": n, "deleted": n}``.
    """
    cleanup = lifecycle_settings(ctx)["sessionCleanup"]
    cutoff = timezone.now() - parse_period(cleanup.get("retentionPeriod") or "7d")
    idle = (
        Memory.objects.filter(layer__in=VOLATILE_LAYERS, state=State.ACTIVE,
                              session_id__isnull=False, user_id__isnull=False)
        .values("user_id", "session_id")
        .annotate(last=Max("updated_at"))
        .filter(last__lt=cutoff)
    )
    counts = {"closed": 0, "promoted": 0, "blocked": 0, "deleted": 0}
    for row in idle:
        result = session_close(ctx, session_id=row["session_id"], user_id=row["user_id"])
        if not result.already_closed:
            counts["closed"] += 1
            counts["promoted"] += len(result.promoted)
            counts["blocked"] += len(result.blocked)
        if cleanup.get("autoDelete"):
            ids = list(Memory.objects.filter(
                layer=Layer.SESSION.value, session_id=row["session_id"],
                user_id=row["user_id"], state=State.ACTIVE).values_list("pk", flat=True))
            if ids:
                counts["deleted"] += memory_bulk_delete(ctx, memory_ids=ids)["deleted"]
    return counts
