"""Per-tenant counts of reads by hour and by day (searches and recalls), for the console's
dashboard.

Kept in the cache (Redis) as two counters per call: ``activity:<kind>:<tenant>:<YYYYmmddHH>``
(an hour, kept eight days) and ``activity:<kind>:<tenant>:d<YYYYmmdd>`` (a day, kept 92
days), both in UTC. A count is a hint for people, so a cache failure is logged and never
fails the search. Only calls made with an API key count: the console's own searches and the
commands' (benchmarks, evaluations) are not the tenant's traffic.
Writes per bucket need no counter: the memory history has a row per write.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Literal

from django.utils import timezone

from memory_project.after_response import after_response
from memory_project.thread_cache import thread_cache
from tenants.context import TenantContext

logger = logging.getLogger(__name__)

#: A bucket of the activity series: an hour or a day, in UTC.
Bucket = Literal["hour", "day"]

#: How long an hour's counter is kept (the dashboard's hourly series reach back 7 days).
RETENTION_SECONDS = 8 * 24 * 3600
#: How long a day's counter is kept (the dashboard's daily series reach back 90 days).
DAY_RETENTION_SECONDS = 92 * 24 * 3600
#: The principal prefix of a call made with an API key (``tenants.services``).
API_KEY_PRINCIPAL = "api_key:"


def _key(kind: str, tenant_id: uuid.UUID, start: datetime, bucket: Bucket = "hour") -> str:
    if bucket == "day":
        return f"activity:{kind}:{tenant_id}:d{start:%Y%m%d}"
    return f"activity:{kind}:{tenant_id}:{start:%Y%m%d%H}"


def bucket_start(moment: datetime, bucket: Bucket) -> datetime:
    """The start (UTC, aware) of the hour or day holding ``moment`` (an aware datetime)."""
    start = moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return start.replace(hour=0) if bucket == "day" else start


def bucket_starts(bucket: Bucket, count: int, *, now: datetime | None = None
                  ) -> list[datetime]:
    """The starts of the last ``count`` buckets (UTC, oldest first), the one holding ``now``
    (default: the current time) last. ``count`` below 1 gives an empty list."""
    last = bucket_start(now or timezone.now(), bucket)
    step = timedelta(days=1) if bucket == "day" else timedelta(hours=1)
    return [last - step * i for i in range(count - 1, -1, -1)]


def activity_record_after_response(ctx: TenantContext, kind: str) -> None:
    """Count one ``kind`` for ``ctx``'s tenant once the response is sent, when ``ctx`` is an
    API key's call (module docstring)."""
    if ctx.principal.startswith(API_KEY_PRINCIPAL):
        after_response(partial(activity_record, ctx.tenant_id, kind))


def activity_record(tenant_id: uuid.UUID, kind: str, *, at: datetime | None = None) -> None:
    """Count one ``kind`` (``"search"`` or ``"recall"``) for ``tenant_id`` in the hour and the
    day of ``at`` (default: now)."""
    moment = (at or timezone.now()).astimezone(UTC)
    cache = thread_cache()  # runs after the response, in a copied context: see thread_cache
    for key, timeout in ((_key(kind, tenant_id, moment), RETENTION_SECONDS),
                         (_key(kind, tenant_id, moment, "day"), DAY_RETENTION_SECONDS)):
        try:
            cache.add(key, 0, timeout=timeout)
            cache.incr(key)
        except Exception:  # a dashboard hint must never fail a search
            logger.warning("activity counter %s unavailable", key, exc_info=True)


def activity_per_bucket(tenant_id: uuid.UUID, kind: str, *, bucket: Bucket, count: int,
                        now: datetime | None = None) -> list[tuple[datetime, int]]:
    """``[(bucket start, count)]`` of ``kind`` for the last ``count`` hours or days (UTC,
    oldest first, the current one last and partial), read in one cache round trip.

    Counters older than their retention (module docstring) read as 0; so does every bucket
    when the cache is unavailable (logged).
    """
    slots = bucket_starts(bucket, count, now=now)
    keys = [_key(kind, tenant_id, start, bucket) for start in slots]
    try:
        found = thread_cache().get_many(keys)
    except Exception:
        logger.warning("activity counters unavailable", exc_info=True)
        found = {}
    return [(start, int(found.get(key, 0))) for start, key in zip(slots, keys, strict=True)]


def activity_per_hour(tenant_id: uuid.UUID, kind: str, *, hours: int = 24
                      ) -> list[tuple[datetime, int]]:
    """``[(hour start, count)]`` for the last ``hours`` hours, oldest first (UTC)."""
    return activity_per_bucket(tenant_id, kind, bucket="hour", count=hours)
