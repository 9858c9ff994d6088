"""Admin: policies (validated at save), the review queue and the audit log (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from governance import services
from governance.models import Policy, ReviewItem, ReviewStatus
from governance.policies import clean_policy_data
from memory_project.errors import MemoryServiceError
from tenants.admin_base import TenantOwnedAdmin
from tenants.entry import tenant_job
from tenants.models import AuditEntry, SecurityProbe
from tenants.services import system_context


class PolicyForm(forms.ModelForm):
    """Runs the same validation as the API (patterns compiled and probed for slowness)."""

    class Meta:
        model = Policy
        exclude = ("updated_by",)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        fields = {k: data.get(k) for k in ("denied_terms", "denied_patterns", "pii_handling",
                                           "max_content_length", "writable_layers",
                                           "required_metadata", "api_key_prefixes")
                  if data.get(k) is not None}
        try:
            clean_policy_data(fields, partial=True)
        except MemoryServiceError as err:
            raise forms.ValidationError(err.message) from None
        return data


@admin.register(Policy)
class PolicyAdmin(TenantOwnedAdmin):
    form = PolicyForm
    list_display = ("name", "tenant", "enabled", "pii_handling", "updated_at")
    list_filter = ("tenant", "enabled", "pii_handling")
    search_fields = ("name",)


@admin.register(ReviewItem)
class ReviewItemAdmin(TenantOwnedAdmin):
    list_display = ("kind", "status", "reason", "tenant", "created_at", "decided_by")
    list_filter = ("status", "kind", "tenant")
    readonly_fields = [f.name for f in ReviewItem._meta.fields]
    actions = ("approve", "reject")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def _decide(self, request: HttpRequest, queryset: QuerySet[ReviewItem], approve: bool
                ) -> None:
        done = 0
        for item in queryset.filter(status=ReviewStatus.PENDING):
            ctx = system_context(item.tenant, f"admin:{request.user.get_username()}")
            try:
                with tenant_job(ctx):
                    services.review_decide(ctx, item_id=item.pk, approve=approve,
                                           reason="" if approve else "rejected in admin")
                done += 1
            except MemoryServiceError as err:
                messages.error(request, f"{item.pk}: {err.message}")
        messages.info(request, f"{done} item(s) {'approved' if approve else 'rejected'}.")

    @admin.action(description="Approve selected (promote with redaction)")
    def approve(self, request: HttpRequest, queryset: QuerySet[ReviewItem]) -> None:
        self._decide(request, queryset, True)

    @admin.action(description="Reject selected")
    def reject(self, request: HttpRequest, queryset: QuerySet[ReviewItem]) -> None:
        self._decide(request, queryset, False)


@admin.register(AuditEntry)
class AuditEntryAdmin(TenantOwnedAdmin):
    list_display = ("created_at", "action", "actor", "target_type", "target_id", "tenant")
    list_filter = ("action", "tenant")
    search_fields = ("actor", "target_id")
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SecurityProbe)
class SecurityProbeAdmin(admin.ModelAdmin):
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
