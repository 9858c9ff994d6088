"""Admin: memories (list, filter by layer, kind and state, search in content), their history
and feedback (read-only)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from memories.models import UNSERVED_COLUMNS, Memory, MemoryFeedback, MemoryHistory
from memories.services.deletion import memories_erase
from tenants.admin_base import TenantOwnedAdmin
from tenants.audit import audit_record
from tenants.entry import tenant_job
from tenants.models import Tenant


@admin.register(Memory)
class MemoryAdmin(TenantOwnedAdmin):
    list_display = ("short_content", "layer", "kind", "state", "scope", "importance",
                    "tenant", "created_at")
    list_filter = ("layer", "kind", "state", "tenant")
    search_fields = ("content",)
    exclude = UNSERVED_COLUMNS
    readonly_fields = [f.name for f in Memory._meta.fields if f.name not in UNSERVED_COLUMNS]
    list_per_page = 50
    show_full_result_count = False

    @admin.display(description="content")
    def short_content(self, memory: Memory) -> str:
        return memory.content[:80]

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        self.delete_queryset(request, Memory.objects.dangerously_all_tenants().filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        """Deleting here is an erasure like ``DELETE ?hard=true``: through the service, in each
        memory's tenant, so that history, caches and derived data go too (a plain row delete
        would leave the content in the history)."""
        by_tenant: dict[Any, list[Any]] = {}
        for tenant_id, pk in queryset.values_list("tenant_id", "pk"):
            by_tenant.setdefault(tenant_id, []).append(pk)
        for tenant in Tenant.objects.filter(pk__in=by_tenant):
            with tenant_job(tenant, f"admin:{request.user.get_username()}") as ctx:
                erased = memories_erase(ctx, memory_ids=by_tenant[tenant.pk], reason="admin")
                audit_record(ctx, action="memories_erased", target_type="memory",
                             details={"reason": "admin", "count": erased})

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # memories are added through the API, which embeds them

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyTenantAdmin(TenantOwnedAdmin):
    """Platform staff may look; history and feedback change only through the services."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(MemoryHistory)
class MemoryHistoryAdmin(ReadOnlyTenantAdmin):
    list_display = ("memory_id", "action", "actor", "erased_at", "tenant", "created_at")
    list_filter = ("action", "tenant")
    search_fields = ("memory_id",)
    list_per_page = 50
    show_full_result_count = False


@admin.register(MemoryFeedback)
class MemoryFeedbackAdmin(ReadOnlyTenantAdmin):
    list_display = ("memory_id", "reward", "actor", "tenant", "created_at")
    list_filter = ("tenant",)
    list_per_page = 50
    show_full_result_count = False
