"""Reads of the tenants app."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from django.db.models import Q, QuerySet

from tenants.context import TenantContext
from tenants.models import ApiKey, Organization, Project, Team, Tenant


def project_ancestry(project_id: str) -> tuple[str | None, str | None]:
    """``(teamId, orgId)`` of the project ``project_id`` in the active tenant.

    ``(None, None)`` when the project is not registered in the hierarchy.
    """
    row = (
        Project.objects.filter(external_id=project_id)
        .values_list("team__external_id", "team__org__external_id")
        .first()
    )
    return (row[0], row[1]) if row else (None, None)


def team_ancestry(team_id: str) -> str | None:
    """The ``orgId`` of the team ``team_id`` in the active tenant, or ``None``."""
    rows = Team.objects.filter(external_id=team_id).values_list("org__external_id", flat=True)
    return rows.first()


def org_list() -> QuerySet[Organization]:
    """Organisations of the active tenant."""
    return Organization.objects.order_by("external_id")


def team_list() -> QuerySet[Team]:
    """Teams of the active tenant, with their organisation."""
    return Team.objects.select_related("org").order_by("external_id")


def project_list() -> QuerySet[Project]:
    """Projects of the active tenant, with their team and organisation."""
    return Project.objects.select_related("team__org").order_by("external_id")


def api_key_list() -> QuerySet[ApiKey]:
    """API keys of the active tenant, newest first."""
    return ApiKey.objects.order_by("-created_at")


def tenant_by_ref(ref: str) -> Tenant | None:
    """The tenant whose slug, name or id is ``ref``, or ``None``."""
    query = Q(slug=ref) | Q(name=ref)
    with contextlib.suppress(ValueError):
        query |= Q(id=uuid.UUID(ref))
    return Tenant.objects.filter(query).first()


def tenant_settings_of(ctx: TenantContext) -> dict[str, Any]:
    """The settings document of ``ctx``'s tenant (``{}`` when unset or the tenant is gone)."""
    raw = Tenant.objects.filter(pk=ctx.tenant_id).values_list("settings", flat=True).first()
    return dict(raw) if isinstance(raw, dict) else {}
