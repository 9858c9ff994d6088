"""Writes of governance: policies, review items and their decisions, and the enforcement hooks
the memory services call (the audit log is ``tenants.audit``)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.metrics import POLICY_VIOLATIONS, PROMOTION_BLOCKS
from governance.models import PiiHandling, Policy, ReviewItem, ReviewKind, ReviewStatus
from governance.pii_guard import detector_for, redact_for
from governance.policies import Decision, clean_policy_data, evaluate, mask_denied
from memory_project.errors import (
    ConfigurationError,
    InvalidInput,
    MemoryNotFound,
    NotFound,
    PolicyViolation,
    ReviewAlreadyDecided,
)
from tenants.audit import audit_record, parse_uuid
from tenants.config_cache import cached
from tenants.context import TenantContext, require_context
from tenants.layers import IDENTIFIER_FIELDS, Layer

logger = logging.getLogger(__name__)


def policies_in_force(ctx: TenantContext) -> list[Policy]:
    """The enabled policies of the tenant in scope, by name (``tenants.config_cache``: one
    version lookup while the tenant's configuration is unchanged; a bulk write reads them
    once). Cached under the tenant in scope, whose rows the manager reads, whatever ``ctx``
    says: ``ctx`` is taken for the signature all governance reads share."""
    return cached(require_context().tenant_id, "policies", None,
                  lambda: list(Policy.objects.filter(enabled=True).order_by("name")))


def enforce_write(ctx: TenantContext, *, content: str, metadata: dict[str, Any], layer: str,
                  operation: str, identifiers: dict[str, str] | None = None,
                  policies: list[Policy] | None = None) -> str:
    """Check an add or update against the tenant's policies (seed 001 "Governance Validation").

    ``policies``: the tenant's policies in force when the caller has them already.

    Returns:
        The content to store (PII redacted when a policy says so).

    Raises:
        PolicyViolation: 422; ``details.policy`` names the first policy broken and
            ``details.violations`` lists them all. The attempt is written to the audit log
            and waits in the review queue as a policy hit.
    """
    if policies is None:
        policies = policies_in_force(ctx)
    decision = evaluate(policies, content=content, metadata=metadata, layer=layer,
                        key_prefix=ctx.principal.removeprefix("api_key:"),
                        detector=detector_for(ctx))
    if decision.allowed:
        return decision.content
    violations = [v.as_dict() for v in decision.violations]
    for violation in decision.violations:
        POLICY_VIOLATIONS.labels(rule=violation.rule).inc()
    audit_record(ctx, action="policy_violation", target_type="memory",
                 details={"operation": operation, "layer": layer, "violations": violations})
    preview, _ = redact_for(ctx, mask_denied(policies, content))
    ReviewItem.objects.create(
        tenant_id=ctx.tenant_id, kind=ReviewKind.POLICY_HIT,
        reason="; ".join(f"{v.policy}: {v.detail}" for v in decision.violations),
        preview=preview,
        details={"operation": operation, "layer": layer, "identifiers": identifiers or {},
                 "metadata": metadata, "violations": violations, "writtenBy": ctx.principal},
    )
    first = decision.violations[0]
    raise PolicyViolation(
        f"Policy {first.policy!r} forbids this content: {first.detail}.", operation=operation,
        details={"policy": first.policy, "policyId": first.policy_id, "violations": violations},
    )


def filter_results(ctx: TenantContext, memories: list[Any], *, operation: str) -> list[Any]:
    """Drop retrieved memories that violate a policy now in force; log what was filtered."""
    policies = policies_in_force(ctx)
    if not policies:
        return memories
    kept: list[Any] = []
    dropped: list[Any] = []
    for memory in memories:
        decision = evaluate(policies, content=memory.content, metadata=memory.metadata,
                            layer=memory.layer, key_prefix=None, detector=detector_for(ctx))
        blocking = [v for v in decision.violations if v.rule in ("denied_term", "denied_pattern",
                                                                 "pii")]
        (dropped if blocking else kept).append(memory)
    if dropped:
        audit_record(ctx, action="search_filtered", target_type="memory", details={
            "operation": operation, "memoryIds": [str(m.pk) for m in dropped]})
    return kept


def promotion_block(ctx: TenantContext, *, memory: Any, reason: str,
                    details: dict[str, Any] | None = None) -> ReviewItem:
    """Record a blocked promotion: a metric, an audit entry and a review item (seed 001
    "Sensitivity Check"). ``reason``: ``sensitive``, ``private`` or ``policy`` (then
    ``details.violations`` says which). The item keeps the memory's identifiers (whose it
    is: user, session, agent, ...) and who asked for the promotion (``requestedBy``)."""
    PROMOTION_BLOCKS.labels(reason=reason).inc()
    preview, _ = redact_for(ctx, memory.content)
    extra = details or {}
    audit_record(ctx, action="promotion_blocked", target_type="memory", target_id=memory.pk,
                 details={"reason": reason, "layer": memory.layer, **extra})
    # The identifiers stay out of the audit log: the item's details are blanked when the
    # memory is erased (review_items_scrub), an audit entry is not.
    return ReviewItem.objects.create(
        tenant_id=ctx.tenant_id, kind=ReviewKind.PROMOTION_BLOCKED, memory_id=memory.pk,
        reason=reason, preview=preview, details={
            "layer": memory.layer, "identifiers": _identifiers_of(memory),
            "requestedBy": ctx.principal, **extra},
    )


def _identifiers_of(memory: Any) -> dict[str, str]:
    """The layer identifiers ``memory`` carries, camelCase (only those set)."""
    return {name: value for name, column in IDENTIFIER_FIELDS.items()
            if (value := getattr(memory, column, None))}


@transaction.atomic
def policy_create(ctx: TenantContext, *, data: Any) -> Policy:
    """Create a policy from a validated definition (see ``clean_policy_data``).

    Raises:
        InvalidInput: invalid definition, or the name is taken.
    """
    cleaned = clean_policy_data(data)
    if Policy.objects.filter(name=cleaned["name"]).exists():
        raise InvalidInput(f"A policy named {cleaned['name']!r} exists.")
    policy = Policy.objects.create(tenant_id=ctx.tenant_id, updated_by=ctx.principal, **cleaned)
    audit_record(ctx, action="policy_created", target_type="policy", target_id=policy.pk,
                 details=cleaned)
    return policy


@transaction.atomic
def policy_update(ctx: TenantContext, *, policy_id: Any, data: Any) -> Policy:
    """Change a policy; fields not given keep their value.

    Raises:
        NotFound: no such policy in this tenant. InvalidInput: invalid definition.
    """
    policy = _get(Policy, policy_id)
    cleaned = clean_policy_data(data, partial=True)
    if "name" in cleaned and Policy.objects.filter(name=cleaned["name"]).exclude(
            pk=policy.pk).exists():
        raise InvalidInput(f"A policy named {cleaned['name']!r} exists.")
    for key, value in cleaned.items():
        setattr(policy, key, value)
    policy.updated_by = ctx.principal
    policy.save()
    audit_record(ctx, action="policy_updated", target_type="policy", target_id=policy.pk,
                 details=cleaned)
    return policy


@transaction.atomic
def policy_delete(ctx: TenantContext, *, policy_id: Any) -> None:
    """Delete a policy. Raises NotFound when there is none."""
    policy = _get(Policy, policy_id)
    audit_record(ctx, action="policy_deleted", target_type="policy", target_id=policy.pk,
                 details={"name": policy.name})
    policy.delete()


def policy_try(ctx: TenantContext, *, data: Any, text: str, layer: str = "user",
               metadata: dict[str, Any] | None = None, review_preview: bool = False
               ) -> Decision:
    """Run an unsaved policy definition on sample text (the console's "try it" box). With
    ``review_preview``, a refused sample's ``content`` is what a reviewer would see and
    approving would store: PII redacted and what a denied term or pattern matched masked."""
    if not isinstance(data, dict):
        raise InvalidInput("A policy must be an object.")
    if layer not in {x.value for x in Layer}:
        raise InvalidInput(f"Unknown layer {layer!r}.")
    cleaned = clean_policy_data({"name": "try", **data}, partial=True)
    policy = Policy(tenant_id=ctx.tenant_id, **{"name": "try", **cleaned})
    decision = evaluate([policy], content=text, metadata=metadata or {}, layer=layer,
                        detector=detector_for(ctx))
    if review_preview and not decision.allowed:
        decision.content = mask_denied([policy], decision.content)
    return decision


def _get(model: type[Any], object_id: Any) -> Any:
    pk = parse_uuid(object_id)
    obj = model.objects.filter(pk=pk).first() if pk is not None else None
    if obj is None:
        raise NotFound()
    return obj


#: ``(ctx, approved item) -> id of the memory it wrote, or None``.
ReviewExecutor = Callable[[TenantContext, ReviewItem], "uuid.UUID | None"]
#: How an approved item is carried out, by kind. Registered by the app that owns what the
#: item is about (``memories`` registers both kinds in its ``AppConfig.ready()``), so that
#: governance, a floor below memories, never imports it.
_executors: dict[str, ReviewExecutor] = {}


def register_review_executor(kind: ReviewKind, executor: ReviewExecutor) -> None:
    """Carry out approved review items of ``kind`` with ``executor`` (``AppConfig.ready()``)."""
    _executors[kind] = executor


@transaction.atomic
def review_decide(ctx: TenantContext, *, item_id: Any, approve: bool, reason: str = ""
                  ) -> ReviewItem:
    """Approve or reject a review item, once; who and when are recorded.

    Approving a blocked promotion promotes the memory with PII redacted; approving a policy
    hit stores its ``preview``: the refused write with PII redacted and what a denied term or
    pattern matched masked (the raw content is never kept). Rejecting needs a reason.

    An approval whose memory no longer exists (deleted since the item was queued) closes
    the item instead: ``rejected``, with :data:`MEMORY_GONE` as the reason.

    Raises:
        NotFound: no such item in this tenant. ReviewAlreadyDecided: decided before (409).
        InvalidInput: a rejection without a reason.
    """
    item = ReviewItem.objects.select_for_update().filter(
        pk=_get(ReviewItem, item_id).pk).first()
    if item is None:  # deleted between the lookup and the lock
        raise NotFound()
    if item.status != ReviewStatus.PENDING:
        raise ReviewAlreadyDecided(details={"status": item.status, "decidedBy": item.decided_by})
    if not approve and not reason.strip():
        raise InvalidInput("A rejection needs a reason.")
    if approve:
        try:
            with transaction.atomic():
                item.result_memory_id = _carry_out(ctx, item)
        except MemoryNotFound:
            return _close(ctx, item, by=ctx.principal, reason=MEMORY_GONE)
    item.status = ReviewStatus.APPROVED if approve else ReviewStatus.REJECTED
    item.decided_by = ctx.principal
    item.decided_at = timezone.now()
    item.decision_reason = reason
    item.save()
    audit_record(ctx, action="review_decision", target_type="review", target_id=item.pk,
                 details={"decision": item.status, "reason": reason, "kind": item.kind,
                          "resultMemoryId": str(item.result_memory_id or "")})
    return item


#: Why an item about a memory that no longer exists was closed.
MEMORY_GONE = "Closed: its memory no longer exists (deleted or erased)."


def _close(ctx: TenantContext, item: ReviewItem, *, by: str, reason: str) -> ReviewItem:
    """Close a pending item that can no longer be carried out (``rejected``, audited)."""
    item.status = ReviewStatus.REJECTED
    item.decided_by = by
    item.decided_at = timezone.now()
    item.decision_reason = reason
    item.save(update_fields=["status", "decided_by", "decided_at", "decision_reason"])
    audit_record(ctx, action="review_closed", target_type="review", target_id=item.pk,
                 details={"reason": reason, "kind": item.kind})
    return item


def _carry_out(ctx: TenantContext, item: ReviewItem) -> uuid.UUID | None:
    executor = _executors.get(item.kind)
    if executor is None:
        raise ConfigurationError(f"Nothing carries out approved {item.kind} review items.")
    return executor(ctx, item)


def review_items_scrub(ctx: TenantContext, *, memory_ids: list[Any]) -> int:
    """Right to erasure: blank the preview and details of review items about erased memories
    (the item, its status and who decided stay), and close those still pending: nothing is
    left to approve (``rejected`` by ``system:erasure``, :data:`MEMORY_GONE`). Returns the
    number of items scrubbed."""
    if not memory_ids:
        return 0
    for item in ReviewItem.objects.select_for_update().filter(
            memory_id__in=memory_ids, status=ReviewStatus.PENDING):
        _close(ctx, item, by="system:erasure", reason=MEMORY_GONE)
    return ReviewItem.objects.filter(memory_id__in=memory_ids).update(
        preview="", details={"erased": True})


def review_items_erase_subject(ctx: TenantContext, *, identifiers: dict[str, str]) -> int:
    """Right to erasure: delete the review items holding a data subject's refused writes
    (policy hits whose identifiers carry every one of ``identifiers``, camelCase), pending or
    decided, so that no reviewer sees them and no approval can store them again. Returns the
    number deleted (the audit log keeps that decisions were made)."""
    if not identifiers:
        return 0
    deleted, _ = ReviewItem.objects.filter(
        kind=ReviewKind.POLICY_HIT, details__identifiers__contains=identifiers).delete()
    return deleted


def remote_redaction(ctx: TenantContext) -> Callable[[str], str] | None:
    """``text -> text`` redacting PII when an enabled policy of the tenant redacts or denies
    it (what a remote language model may see); ``None`` otherwise."""
    if not any(p.enabled and p.pii_handling in (PiiHandling.REDACT, PiiHandling.DENY)
               for p in policies_in_force(ctx)):
        return None
    return lambda text: redact_for(ctx, text)[0]
