"""The tenant dashboard's figures: memories per layer, kind and state; writes, searches and
recalls per hour or per day over a chosen time range (UTC); review items waiting.

Counts come from SQL aggregates (one query per series) and, for searches and recalls, from
the cache counters of :mod:`memories.selectors.activity` (one round trip per series).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, Q
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone

from governance.models import ReviewItem, ReviewKind, ReviewStatus
from memories.models import HistoryAction, Kind, Memory, MemoryHistory, State
from memories.selectors.activity import Bucket, activity_per_bucket, bucket_starts
from tenants.context import TenantContext
from tenants.layers import Layer

#: History actions that count as writes on the dashboard.
WRITE_ACTIONS = (HistoryAction.ADD, HistoryAction.UPDATE, HistoryAction.DELETE,
                 HistoryAction.RESTORE)

#: The query parameter of the memory browser each bar chart drills down to.
DRILL_PARAMS = {"layers": "layer", "kinds": "kind", "states": "state"}


@dataclass(frozen=True)
class TimeRange:
    """A time range of the activity chart: ``count`` buckets of one ``bucket`` (hour or day,
    UTC), the current one last. ``name`` is the ``?range=`` value, ``label`` its words."""

    name: str
    label: str
    bucket: Bucket
    count: int

    @property
    def per(self) -> str:
        """``"per hour"`` or ``"per day"``."""
        return f"per {self.bucket}"


#: The ranges of the activity chart, by ``?range=`` value (at most 200 points each).
RANGES: dict[str, TimeRange] = {r.name: r for r in (
    TimeRange("24h", "last 24 hours", "hour", 24),
    TimeRange("7d", "last 7 days", "hour", 7 * 24),
    TimeRange("30d", "last 30 days", "day", 30),
    TimeRange("90d", "last 90 days", "day", 90),
)}
DEFAULT_RANGE = RANGES["24h"]


def time_range_parse(raw: str | None) -> tuple[TimeRange, str | None]:
    """The range named ``raw`` and ``None``; for an unknown name, the default range (24 h) and
    ``raw`` (to say so). A missing or empty ``raw`` is the default, silently."""
    if not raw:
        return DEFAULT_RANGE, None
    found = RANGES.get(raw)
    return (found, None) if found is not None else (DEFAULT_RANGE, raw)


@dataclass(frozen=True)
class Dashboard:
    """The figures of one tenant's dashboard.

    ``by_layer``/``by_kind``/``by_state``: memory counts (every layer, kind and state listed,
    zeros included). ``span``: the activity range; ``buckets``: its bucket starts (UTC,
    oldest first) with ``writes``, ``searches`` and ``recalls`` per bucket. ``written``: new
    memories (history ``add`` rows) in the range. ``blocked_promotions``/``pending_reviews``:
    review items waiting.
    """

    by_layer: dict[str, int]
    by_kind: dict[str, int]
    by_state: dict[str, int]
    span: TimeRange
    buckets: list[datetime]
    writes: list[int]
    searches: list[int]
    recalls: list[int]
    written: int
    blocked_promotions: int
    pending_reviews: int

    @property
    def total(self) -> int:
        """Every memory of the tenant, whatever its state."""
        return sum(self.by_state.values())

    @property
    def labels(self) -> list[str]:
        """The buckets' axis labels: ``HH:00`` (24 h), ``MM-DD HH:00`` (7 d), ``YYYY-MM-DD``."""
        if self.span.bucket == "day":
            fmt = "%Y-%m-%d"
        else:
            fmt = "%H:00" if self.span.count <= 24 else "%m-%d %H:00"
        return [start.strftime(fmt) for start in self.buckets]

    def links(self, memories_url: str) -> dict[str, dict[str, str]]:
        """Per chart (``layers``, ``kinds``, ``states``), per name: the memory browser's URL
        listing those memories (``memories_url`` + ``?layer=<name>`` and so on)."""
        counts = {"layers": self.by_layer, "kinds": self.by_kind, "states": self.by_state}
        return {chart: {name: f"{memories_url}?{urlencode({DRILL_PARAMS[chart]: name})}"
                        for name in counts[chart]} for chart in DRILL_PARAMS}

    def table(self, memories_url: str) -> list[tuple[str, list[tuple[str, int, str]]]]:
        """The bar charts as rows ``(heading, [(name, count, drill-down URL)])``."""
        links = self.links(memories_url)
        return [(heading, [(name, n, links[chart][name]) for name, n in counts.items()])
                for heading, chart, counts in (("Layer", "layers", self.by_layer),
                                               ("Kind", "kinds", self.by_kind),
                                               ("State", "states", self.by_state))]

    def chart_data(self, memories_url: str = "") -> dict[str, Any]:
        """The figures as JSON for the charts: counts per layer/kind/state, the range
        (``range``, ``bucket``), the series with their ``labels`` and ISO ``buckets``, and
        ``links`` (:meth:`links`) with their base ``memoriesUrl``."""
        return {
            "layers": self.by_layer, "kinds": self.by_kind, "states": self.by_state,
            "range": self.span.name, "bucket": self.span.bucket,
            "labels": self.labels, "buckets": [start.isoformat() for start in self.buckets],
            "writes": self.writes, "searches": self.searches, "recalls": self.recalls,
            "memoriesUrl": memories_url, "links": self.links(memories_url),
        }


def _counts(field: str, names: list[str]) -> dict[str, int]:
    found = dict(Memory.objects.values_list(field).annotate(n=Count("pk")).order_by())
    return {name: int(found.get(name, 0)) for name in names}


def _writes(span: TimeRange, slots: list[datetime]) -> tuple[list[int], int]:
    """Writes per bucket of ``slots`` and the memories added in them: one SQL aggregate."""
    step = timedelta(days=1) if span.bucket == "day" else timedelta(hours=1)
    trunc = TruncDay if span.bucket == "day" else TruncHour
    rows = (
        MemoryHistory.objects
        .filter(created_at__gte=slots[0], created_at__lt=slots[-1] + step,
                action__in=WRITE_ACTIONS)
        .annotate(slot=trunc("created_at", tzinfo=UTC)).values("slot")
        .annotate(n=Count("pk"), added=Count("pk", filter=Q(action=HistoryAction.ADD)))
        .order_by()
    )
    per_slot: dict[datetime, int] = {}
    added = 0
    for row in rows:
        per_slot[row["slot"]] = int(row["n"])
        added += int(row["added"])
    return [per_slot.get(start, 0) for start in slots], added


def dashboard_get(ctx: TenantContext, *, span: TimeRange = DEFAULT_RANGE,
                  now: datetime | None = None) -> Dashboard:
    """The dashboard of ``ctx``'s tenant (every memory state counted, deleted included) with
    activity over ``span`` ending in the bucket of ``now`` (default: the current time)."""
    moment = now or timezone.now()
    slots = bucket_starts(span.bucket, span.count, now=moment)
    writes, written = _writes(span, slots)
    searches = activity_per_bucket(ctx.tenant_id, "search", bucket=span.bucket,
                                   count=span.count, now=moment)
    recalls = activity_per_bucket(ctx.tenant_id, "recall", bucket=span.bucket,
                                  count=span.count, now=moment)
    pending = ReviewItem.objects.filter(status=ReviewStatus.PENDING)
    return Dashboard(
        by_layer=_counts("layer", [x.value for x in Layer]),
        by_kind=_counts("kind", list(Kind.values)),
        by_state=_counts("state", list(State.values)),
        span=span,
        buckets=slots,
        writes=writes,
        searches=[n for _, n in searches],
        recalls=[n for _, n in recalls],
        written=written,
        blocked_promotions=pending.filter(kind=ReviewKind.PROMOTION_BLOCKED).count(),
        pending_reviews=pending.count(),
    )
