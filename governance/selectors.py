"""Reads of governance."""

from __future__ import annotations

from django.db.models import QuerySet

from governance.models import Policy, ReviewItem
from tenants.models import AuditEntry


def policy_list() -> QuerySet[Policy]:
    """The active tenant's policies by name."""
    return Policy.objects.order_by("name")


def review_list(status: str | None = None, kind: str | None = None) -> QuerySet[ReviewItem]:
    """The active tenant's review items, newest first, optionally by status and kind."""
    items = ReviewItem.objects.order_by("-created_at", "-id")
    if status:
        items = items.filter(status=status)
    if kind:
        items = items.filter(kind=kind)
    return items


def audit_list(action: str | None = None) -> QuerySet[AuditEntry]:
    """The active tenant's audit log, newest first, optionally for one action."""
    entries = AuditEntry.objects.order_by("-created_at", "-id")
    return entries.filter(action=action) if action else entries
