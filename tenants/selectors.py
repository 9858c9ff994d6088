"""Reads of the tenants app."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from django.db.models import Q, QuerySet

from tenants.config_cache import cached
from tenants.context import TenantContext, require_context
from tenants.models import ApiKey, Organization, Project, Team, Tenant


def project_ancestry(project_id: str) -> tuple[str | None, str | None]:
    """``(teamId, orgId)`` of the project ``project_id`` in the active tenant
    (``tenants.config_cache``).

    ``(None, None)`` when the project is not registered in the hierarchy.

    Raises:
        MissingTenantContext: no tenant in scope.
    """
    def load() -> tuple[str | None, str | None]:
        row = (
            Project.objects.filter(external_id=project_id)
            .values_list("team__external_id", "team__org__external_id")
            .first()
        )
        return (row[0], row[1]) if row else (None, None)

    return cached(require_context().tenant_id, "project_ancestry", project_id, load)


def team_ancestry(team_id: str) -> str | None:
    """The ``orgId`` of the team ``team_id`` in the active tenant, or ``None``
    (``tenants.config_cache``).

    Raises:
        MissingTenantContext: no tenant in scope.
    """
    def load() -> str | None:
        rows = Team.objects.filter(external_id=team_id).values_list("org__external_id", flat=True)
        return rows.first()

    return cached(require_context().tenant_id, "team_ancestry", team_id, load)


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
    """The settings document of ``ctx``'s tenant (``{}`` when unset or the tenant is gone;
    ``tenants.config_cache``)."""
    def load() -> dict[str, Any]:
        raw = Tenant.objects.filter(pk=ctx.tenant_id).values_list("settings", flat=True).first()
        return dict(raw) if isinstance(raw, dict) else {}

    return cached(ctx.tenant_id, "settings", None, load)
