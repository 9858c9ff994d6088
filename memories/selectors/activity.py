"""Per-tenant counts of reads by hour (searches and recalls), for the console's dashboard.

Kept in the cache (Redis) under ``activity:<kind>:<tenant>:<YYYYmmddHH>`` for two days; a
count is a hint for people, so a cache failure is logged and never fails the search. Only
calls made with an API key count: the console's own searches and the commands' (benchmarks,
evaluations) are not the tenant's traffic.
Writes per hour need no counter: the memory history has a row per write.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from functools import partial

from django.utils import timezone

from memory_project.after_response import after_response
from memory_project.thread_cache import thread_cache
from tenants.context import TenantContext

logger = logging.getLogger(__name__)

RETENTION_SECONDS = 48 * 3600
#: The principal prefix of a call made with an API key (``tenants.services``).
API_KEY_PRINCIPAL = "api_key:"


def _key(kind: str, tenant_id: uuid.UUID, hour: datetime) -> str:
    return f"activity:{kind}:{tenant_id}:{hour:%Y%m%d%H}"


def activity_record_after_response(ctx: TenantContext, kind: str) -> None:
    """Count one ``kind`` for ``ctx``'s tenant once the response is sent, when ``ctx`` is an
    API key's call (module docstring)."""
    if ctx.principal.startswith(API_KEY_PRINCIPAL):
        after_response(partial(activity_record, ctx.tenant_id, kind))


def activity_record(tenant_id: uuid.UUID, kind: str) -> None:
    """Count one ``kind`` (``"search"`` or ``"recall"``) for ``tenant_id`` in this hour."""
    key = _key(kind, tenant_id, timezone.now())
    cache = thread_cache()  # runs after the response, in a copied context: see thread_cache
    try:
        cache.add(key, 0, timeout=RETENTION_SECONDS)
        cache.incr(key)
    except Exception:  # a dashboard hint must never fail a search
        logger.warning("activity counter %s unavailable", key, exc_info=True)


def activity_per_hour(tenant_id: uuid.UUID, kind: str, *, hours: int = 24
                      ) -> list[tuple[datetime, int]]:
    """``[(hour start, count)]`` for the last ``hours`` hours, oldest first (UTC)."""
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    slots = [now - timedelta(hours=i) for i in range(hours - 1, -1, -1)]
    try:
        found = thread_cache().get_many([_key(kind, tenant_id, h) for h in slots])
    except Exception:
        logger.warning("activity counters unavailable", exc_info=True)
        found = {}
    return [(h, int(found.get(_key(kind, tenant_id, h), 0))) for h in slots]
