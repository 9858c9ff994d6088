"""Admin base for tenant-owned models: platform staff see every tenant's rows."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest


class TenantOwnedAdmin(admin.ModelAdmin):
    """Lists every tenant's rows for superusers (the request runs inside
    ``dangerously_cross_tenant``, opened by the request middleware); nobody else may enter."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return self.model.objects.dangerously_all_tenants()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)
