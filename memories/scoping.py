"""From a call's identifiers to the rows of a layer, within the caller's tenant."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from memories.layers import Layer, LayerIdentifiers, require_identifiers
from memories.models import Memory, State
from memory_project.errors import InvalidInput
from tenants.context import TenantContext
from tenants.selectors import project_ancestry, team_ancestry


def resolve_identifiers(ctx: TenantContext, identifiers: LayerIdentifiers) -> LayerIdentifiers:
    """Fill in what the tenant's hierarchy implies.

    ``companyId`` is always the caller's tenant; a registered ``projectId`` brings its
    ``teamId`` and ``orgId``, a registered ``teamId`` its ``orgId`` (seed 001: userId +
    projectId grant user, project, team, org, company).

    Raises:
        InvalidInput: ``companyId`` names another company than the caller's tenant.
    """
    if identifiers.companyId is not None and identifiers.companyId != ctx.tenant_slug:
        raise InvalidInput(
            "companyId must be the authenticated tenant's slug "
            f"({ctx.tenant_slug!r}) or be left out."
        )
    resolved = identifiers.with_values(companyId=ctx.tenant_slug)
    if resolved.projectId is not None:
        team_id, org_id = project_ancestry(resolved.projectId)
        resolved = resolved.with_values(teamId=team_id, orgId=org_id)
    if resolved.teamId is not None and resolved.orgId is None:
        resolved = resolved.with_values(orgId=team_ancestry(resolved.teamId))
    return resolved


def layer_queryset(
    layer: Layer, identifiers: LayerIdentifiers, *, states: tuple[str, ...] = (State.ACTIVE,)
) -> QuerySet[Memory]:
    """The active tenant's memories of ``layer`` for ``identifiers`` (already resolved).

    Only ``states`` (default: active), and never a pruned memory (``pruned_at`` set, seed 001
    "Memory-R1 Pruning": pruned memories leave the search index), so search, recall and list
    all skip deleted, archived and pruned memories.

    Raises:
        MissingIdentifier: the layer's required identifiers are not all present.
    """
    columns: dict[str, Any] = require_identifiers(layer, identifiers)
    return Memory.objects.filter(layer=layer.value, state__in=states, pruned_at__isnull=True,
                                 **columns)
