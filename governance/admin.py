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
from tenants.services import system_context


class PolicyForm(forms.ModelForm):
    """Runs the same validation as the API (patterns compiled and probed for slowness)."""

    class Meta:
        model = Policy
        exclude = ("updated_by",)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
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
