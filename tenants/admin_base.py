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

    @staticmethod
    def is_platform_staff(request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.is_platform_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.is_platform_staff(request)

    # Model permissions alone must not open a changelist: only superusers run inside the
    # cross-tenant scope that get_queryset() needs (anyone else would get a 500).
    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return self.is_platform_staff(request) and super().has_add_permission(request, *args)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.is_platform_staff(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.is_platform_staff(request) and super().has_delete_permission(request, obj)
