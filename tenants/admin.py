"""Admin: tenants, their hierarchy, API keys (the key is shown once, at creation), and the
audit and security logs (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from tenants import services
from tenants.admin_base import TenantOwnedAdmin
from tenants.entry import tenant_job
from tenants.models import (
    ApiKey,
    AuditEntry,
    Organization,
    Project,
    SecurityProbe,
    Team,
    Tenant,
)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "is_active", "created_at")
    search_fields = ("name", "slug")
    readonly_fields = ("id", "created_at")


class _HierarchyAdmin(TenantOwnedAdmin):
    list_filter = ("tenant",)
    search_fields = ("external_id", "name")


@admin.register(Organization)
class OrganizationAdmin(_HierarchyAdmin):
    list_display = ("external_id", "name", "tenant", "created_at")


@admin.register(Team)
class TeamAdmin(_HierarchyAdmin):
    list_display = ("external_id", "name", "org", "tenant")


@admin.register(Project)
class ProjectAdmin(_HierarchyAdmin):
    list_display = ("external_id", "name", "team", "tenant")


class ApiKeyCreateForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ("tenant", "name", "expires_at")


@admin.register(ApiKey)
class ApiKeyAdmin(TenantOwnedAdmin):
    list_display = ("prefix", "name", "tenant", "created_at", "expires_at", "revoked_at",
                    "last_used_at")
    list_filter = ("tenant",)
    search_fields = ("prefix", "name")
    actions = ("revoke",)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False,
                 **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ()
        return ("tenant", "prefix", "key_hash", "roles", "created_at", "created_by",
                "expires_at", "revoked_at", "last_used_at", "allowed_layers",
                "pinned_identifiers", "rate_limit")

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            return
        with tenant_job(obj.tenant, f"admin:{request.user.get_username()}") as ctx:
            key, raw_key = services.api_key_create(ctx, name=obj.name, expires_at=obj.expires_at)
        for f in ApiKey._meta.concrete_fields:  # the saved row, for the admin's own messages
            setattr(obj, f.attname, getattr(key, f.attname))
        messages.warning(request, f"New API key (shown once, copy it now): {raw_key}")

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


class _ReadOnlyAdmin(admin.ModelAdmin):
    """Logs: nothing is added, changed or deleted from the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(_ReadOnlyAdmin, TenantOwnedAdmin):
    """The tenants' audit log (append-only)."""

    list_display = ("created_at", "action", "actor", "target_type", "target_id", "tenant")
    list_filter = ("action", "tenant")
    search_fields = ("actor", "target_id")
    readonly_fields = [f.name for f in AuditEntry._meta.fields]


@admin.register(SecurityProbe)
class SecurityProbeAdmin(_ReadOnlyAdmin):
    """The platform's security log (read-only; superusers only, through the platform role)."""

    list_display = ("created_at", "prober_tenant_id", "actor", "target_type", "target_id",
                    "cross_tenant")
    list_filter = ("cross_tenant", "target_type")
    search_fields = ("actor", "target_id")
    list_per_page = 50
    show_full_result_count = False

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)
