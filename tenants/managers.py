"""The fail-closed, tenant-scoped manager: lock 2 of the two locks (see ``tenants.context``)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from django.db import models

from tenants.context import cross_tenant_reason, require_context

M = TypeVar("M", bound=models.Model)


class TenantScopedManager(models.Manager, Generic[M]):  # type: ignore[type-arg]
    """``Model.objects``: only the active tenant's rows; raises when no tenant is in scope.

    Raises:
        MissingTenantContext: on any query made outside a tenant scope.
    """

    def get_queryset(self) -> models.QuerySet[Any]:
        ctx = require_context()
        return super().get_queryset().filter(tenant_id=ctx.tenant_id)

    def dangerously_all_tenants(self) -> models.QuerySet[Any]:
        """Every tenant's rows; only inside ``dangerously_cross_tenant`` (platform staff).

        Raises:
            PermissionError: called outside a cross-tenant block.
        """
        if cross_tenant_reason() is None:
            raise PermissionError("dangerously_all_tenants() outside dangerously_cross_tenant()")
        return super().get_queryset()


class TenantOwnedModel(models.Model):
    """Abstract base of every tenant-owned table: ``tenant_id NOT NULL`` plus the manager.

    Each concrete subclass's migration must also enable row-level security on its table
    (``tenants.rls.enable_rls``); a catalog test checks that none is missing.
    """

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")

    objects: TenantScopedManager[Any] = TenantScopedManager()

    class Meta:
        abstract = True
