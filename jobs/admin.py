"""Admin: the jobs waiting for the broker (read-only; the drain sends and removes them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from jobs.models import QueuedJob
from tenants.admin_base import TenantOwnedAdmin


@admin.register(QueuedJob)
class QueuedJobAdmin(TenantOwnedAdmin):
    list_display = ("created_at", "task", "queue", "attempts", "last_error", "tenant")
    list_filter = ("task", "tenant")
    readonly_fields = [f.name for f in QueuedJob._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
