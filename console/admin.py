"""Admin: console memberships (platform staff only, like every tenant-owned model)."""

from __future__ import annotations

from django.contrib import admin

from console.models import ConsoleMembership
from tenants.admin_base import TenantOwnedAdmin


@admin.register(ConsoleMembership)
class ConsoleMembershipAdmin(TenantOwnedAdmin):
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("tenant", "role")
    search_fields = ("user__username",)
    raw_id_fields = ("user",)
