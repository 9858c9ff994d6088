"""The audit log, the security log, and "another tenant's object answers like a missing one".

Shared kernel of every app above ``tenants``: services record what they did
(:func:`audit_record`), and every lookup by id goes through :func:`owned_or_not_found` (or,
where the miss must be recorded outside a transaction, :func:`audit_cross_tenant_probe`), so
a foreign id gets exactly what a missing one gets and the attempt lands in the security log.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.apps import apps
from django.conf import settings
from django.db.models import Model, QuerySet

from memory_project.errors import NotFound
from tenants.context import TenantContext, dangerously_cross_tenant
from tenants.models import AuditEntry, SecurityProbe

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=Model)


def parse_uuid(value: Any) -> uuid.UUID | None:
    """``value`` as a UUID, or ``None`` when it is not one (a malformed id names nothing)."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, AttributeError):
        return None


def pseudonym(ctx: TenantContext, value: str) -> str:
    """A stable stand-in for a data subject's identifier in the audit log, which cannot be
    changed once written (append-only) and so must not hold what an erasure removes:
    ``p:`` + the first 16 hex digits of HMAC-SHA256(SECRET_KEY, tenant id + value). The same
    value gives the same pseudonym within a tenant, so entries still correlate."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"{ctx.tenant_id}:{value}".encode(),
                      hashlib.sha256).hexdigest()
    return f"p:{digest[:16]}"


def audit_record(ctx: TenantContext, *, action: str, target_type: str = "",
                 target_id: Any = "", details: dict[str, Any] | None = None) -> AuditEntry:
    """Append an entry to the tenant's audit log (never updated, never deleted by the app)."""
    return AuditEntry.objects.create(
        tenant_id=ctx.tenant_id, actor=ctx.principal, action=action, target_type=target_type,
        target_id=str(target_id or ""), details=details or {},
    )


def audit_cross_tenant_probe(ctx: TenantContext, *, model: type[Model], object_id: Any) -> None:
    """After a lookup found nothing: record the miss in the platform's security log
    (:class:`tenants.models.SecurityProbe`), the same way whether or not the id exists in
    another tenant. The caller answers exactly as for a missing object, in the same time; the
    prober cannot read the log (its role may only insert). Ids that are not UUIDs name nothing
    and are not recorded."""
    pk = parse_uuid(object_id)
    if pk is None:
        return
    SecurityProbe.objects.create(prober_tenant_id=ctx.tenant_id, actor=ctx.principal,
                                 target_type=model._meta.label_lower, target_id=pk)


def owned_or_not_found(ctx: TenantContext, queryset: QuerySet[M], object_id: Any, *,
                       not_found: Callable[[], Exception] = NotFound) -> M:
    """The row of ``queryset`` (a tenant-scoped manager's) whose primary key is
    ``object_id``.

    Raises:
        The exception ``not_found()`` builds (default :class:`memory_project.errors.NotFound`,
        404) for a malformed id, a missing one and another tenant's alike; a well-formed id
        that matched nothing is recorded with :func:`audit_cross_tenant_probe`.
    """
    pk = parse_uuid(object_id)
    obj = queryset.filter(pk=pk).first() if pk is not None else None
    if obj is None:
        if pk is not None:
            audit_cross_tenant_probe(ctx, model=queryset.model, object_id=pk)
        raise not_found()
    return obj


def security_probes_classify(*, limit: int = 1000) -> dict[str, int]:
    """Mark unclassified security-log entries: did the id belong to another tenant? Runs as
    platform staff (beat, every 5 minutes); a cross-tenant probe is logged as a warning.

    Returns:
        ``{"classified": n, "crossTenant": m}``.
    """
    found = {"classified": 0, "crossTenant": 0}
    with dangerously_cross_tenant("security log: classify probes"):
        for probe in SecurityProbe.objects.filter(cross_tenant__isnull=True).order_by(
                "created_at")[:limit]:
            try:
                model = apps.get_model(probe.target_type)
            except (LookupError, ValueError):
                model = None
            probe.cross_tenant = bool(model is not None and model._base_manager.filter(
                pk=probe.target_id).exclude(tenant_id=probe.prober_tenant_id).exists())
            probe.save(update_fields=["cross_tenant"])
            found["classified"] += 1
            if probe.cross_tenant:
                found["crossTenant"] += 1
                logger.warning("cross-tenant probe: tenant %s (%s) asked for %s %s",
                               probe.prober_tenant_id, probe.actor, probe.target_type,
                               probe.target_id)
    return found
