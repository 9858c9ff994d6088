"""Reads of the console: the dashboard's figures for the tenant in scope."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count
from django.db.models.functions import TruncHour
from django.utils import timezone

from console.models import ConsoleMembership
from governance.models import ReviewItem, ReviewKind, ReviewStatus
from memories.models import HistoryAction, Kind, Memory, MemoryHistory, State
from memories.selectors.activity import activity_per_hour
from memory_project.errors import ConfigurationError
from tenants.context import TenantContext, dangerously_cross_tenant
from tenants.layers import Layer
from tenants.models import ApiKey

#: History actions that count as writes on the dashboard.
WRITE_ACTIONS = (HistoryAction.ADD, HistoryAction.UPDATE, HistoryAction.DELETE,
                 HistoryAction.RESTORE)


@dataclass(frozen=True)
class Dashboard:
    """The figures of one tenant's dashboard.

    ``by_layer``/``by_kind``/``by_state``: memory counts (every layer, kind and state listed,
    zeros included). ``hours``: the last 24 hour starts (UTC, oldest first) with ``writes``,
    ``searches`` and ``recalls`` per hour. ``blocked_promotions``/``pending_reviews``: review
    items waiting.
    """

    by_layer: dict[str, int]
    by_kind: dict[str, int]
    by_state: dict[str, int]
    hours: list[datetime]
    writes: list[int]
    searches: list[int]
    recalls: list[int]
    blocked_promotions: int
    pending_reviews: int

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    def chart_data(self) -> dict[str, Any]:
        """The figures as JSON for the charts."""
        return {
            "layers": self.by_layer, "kinds": self.by_kind, "states": self.by_state,
            "hours": [h.strftime("%H:00") for h in self.hours],
            "writes": self.writes, "searches": self.searches, "recalls": self.recalls,
        }


def _counts(field: str, names: list[str]) -> dict[str, int]:
    found = dict(Memory.objects.values_list(field).annotate(n=Count("pk")).order_by())
    return {name: int(found.get(name, 0)) for name in names}


def dashboard_get(ctx: TenantContext, *, hours: int = 24) -> Dashboard:
    """The dashboard of ``ctx``'s tenant (every memory state counted, deleted included)."""
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    since = now - timedelta(hours=hours - 1)
    per_hour = dict(
        MemoryHistory.objects.filter(created_at__gte=since, action__in=WRITE_ACTIONS)
        .annotate(hour=TruncHour("created_at")).values_list("hour")
        .annotate(n=Count("pk")).order_by()
    )
    searches = activity_per_hour(ctx.tenant_id, "search", hours=hours)
    recalls = activity_per_hour(ctx.tenant_id, "recall", hours=hours)
    slots = [hour for hour, _ in searches]
    pending = ReviewItem.objects.filter(status=ReviewStatus.PENDING)
    return Dashboard(
        by_layer=_counts("layer", [x.value for x in Layer]),
        by_kind=_counts("kind", list(Kind.values)),
        by_state=_counts("state", list(State.values)),
        hours=slots,
        writes=[int(per_hour.get(h, 0)) for h in slots],
        searches=[n for _, n in searches],
        recalls=[n for _, n in recalls],
        blocked_promotions=pending.filter(kind=ReviewKind.PROMOTION_BLOCKED).count(),
        pending_reviews=pending.count(),
    )


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
