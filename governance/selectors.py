"""Reads of governance."""

from __future__ import annotations

from datetime import datetime

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


def audit_list(action: str | None = None, *, actor: str | None = None,
               since: datetime | None = None, until: datetime | None = None
               ) -> QuerySet[AuditEntry]:
    """The active tenant's audit log, newest first, optionally for one action, an actor
    (case-insensitive substring, e.g. ``alice`` or ``api_key:``) and a time range
    (``since`` inclusive, ``until`` exclusive)."""
    entries = AuditEntry.objects.order_by("-created_at", "-id")
    if action:
        entries = entries.filter(action=action)
    if actor:
        entries = entries.filter(actor__icontains=actor)
    if since is not None:
        entries = entries.filter(created_at__gte=since)
    if until is not None:
        entries = entries.filter(created_at__lt=until)
    return entries


def audit_actions() -> list[str]:
    """The actions that occur in the active tenant's audit log, sorted."""
    return sorted(AuditEntry.objects.order_by().values_list("action", flat=True).distinct())
