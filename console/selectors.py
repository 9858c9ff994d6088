"""Reads of the console: the dashboard's figures for the tenant in scope (built in
:mod:`console.dashboard`, re-exported here), the platform admins' tenant counts and the
status of API keys on the Settings page. (Console users: :mod:`console.users`.)"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count

from console.dashboard import RANGES as RANGES
from console.dashboard import WRITE_ACTIONS as WRITE_ACTIONS
from console.dashboard import Dashboard as Dashboard
from console.dashboard import TimeRange as TimeRange
from console.dashboard import dashboard_get as dashboard_get
from console.dashboard import time_range_parse as time_range_parse
from console.models import ConsoleMembership
from governance.models import ReviewItem, ReviewStatus
from memories.models import Memory, State
from memory_project.errors import ConfigurationError
from tenants.context import dangerously_cross_tenant
from tenants.models import ApiKey


def tenant_counts() -> dict[Any, dict[str, int]] | None:
    """Per tenant id: active memories, pending review items, active API keys and console
    members, read across tenants through the platform connection (platform admins' tenant
    list). ``None`` when no platform connection is configured."""
    counts: dict[Any, dict[str, int]] = {}

    def add(name: str, rows: Any) -> None:
        for tenant_id, n in rows:
            counts.setdefault(tenant_id, {"memories": 0, "reviews": 0, "keys": 0,
                                          "members": 0})[name] = n

    try:
        with dangerously_cross_tenant("console tenant list"):
            add("memories", Memory.objects.dangerously_all_tenants().filter(
                state=State.ACTIVE).values_list("tenant_id").annotate(Count("id")))
            add("reviews", ReviewItem.objects.dangerously_all_tenants().filter(
                status=ReviewStatus.PENDING).values_list("tenant_id").annotate(Count("id")))
            add("keys", ApiKey.objects.dangerously_all_tenants().filter(
                revoked_at__isnull=True).values_list("tenant_id").annotate(Count("id")))
            add("members", ConsoleMembership.objects.dangerously_all_tenants()
                .values_list("tenant_id").annotate(Count("id")))
    except ConfigurationError:
        return None
    return counts


#: A key expiring sooner than this is flagged on the key list.
KEY_EXPIRY_WARNING = timedelta(days=7)


def key_status(key: ApiKey, now: datetime) -> str:
    """The status of ``key`` at ``now``, as the key list shows it.

    Returns:
        ``"revoked"`` (revoked, whatever its expiry), ``"expired"`` (``expires_at`` is not
        after ``now``), ``"expires in N days"`` (within :data:`KEY_EXPIRY_WARNING`; ``N``
        rounded up, so the last day reads ``"expires in 1 day"``) or ``"active"`` (no
        expiry, or a later one).
    """
    if key.revoked_at is not None:
        return "revoked"
    if key.expires_at is None:
        return "active"
    left = key.expires_at - now
    if left <= timedelta(0):
        return "expired"
    if left > KEY_EXPIRY_WARNING:
        return "active"
    days = math.ceil(left / timedelta(days=1))
    return f"expires in {days} day{'' if days == 1 else 's'}"


def key_status_class(status: str) -> str:
    """The CSS class of a :func:`key_status` value: ``status-revoked``, ``status-expired``,
    ``status-expiring`` or ``status-active``."""
    return "status-expiring" if status.startswith("expires in") else f"status-{status}"


@dataclass(frozen=True)
class KeyRow:
    """A key on the key list, with its :func:`key_status` and that status's CSS class."""

    key: ApiKey
    status: str
    css: str


def api_key_rows(now: datetime) -> list[KeyRow]:
    """The API keys of the tenant in scope, newest first, with their status at ``now``."""
    rows = []
    for key in ApiKey.objects.order_by("-created_at"):
        status = key_status(key, now)
        rows.append(KeyRow(key=key, status=status, css=key_status_class(status)))
    return rows
