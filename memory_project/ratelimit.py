"""Per-API-key rate limits, counted atomically in Redis.

A fixed window per key: one Lua script increments ``ratelimit:<key id>:<window>`` and sets
its expiry in the same step, so concurrent requests on any number of processes are counted
exactly (DRF's own throttles read, then write, from the cache: racy). A request over the
limit gets 429 ``RATE_LIMITED`` with ``Retry-After`` = seconds until the window ends.

Limits: ``RATE_LIMIT_REQUESTS`` per ``RATE_LIMIT_WINDOW_SECONDS`` (600 per 60 s), or the
key's own ``rate_limit``; ``0`` disables the default limit. When Redis cannot be reached
(or its circuit is open) the request is let through ("fail open") and flagged
``X-Memory-Degraded: rate_limit``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis
from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from memory_project.resilience import REDIS, call_guarded, mark_degraded
from tenants.context import TenantContext

logger = logging.getLogger(__name__)

# KEYS[1]: the window's counter; ARGV[1]: window length in seconds.
# Returns {count after this request, seconds until the counter expires}.
_INCREMENT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
"""

_client: redis.Redis | None = None
_script: Any = None
_lock = threading.Lock()


def _increment(key: str, window: int) -> tuple[int, int]:
    global _client, _script
    with _lock:
        if _client is None:
            timeout = settings.CACHES["default"].get("OPTIONS", {}).get("socket_timeout", 1.0)
            _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout,
                                           socket_connect_timeout=timeout)
            _script = _client.register_script(_INCREMENT)
    count, ttl = _script(keys=[key], args=[window])
    return int(count), int(ttl)


def reset_client() -> None:
    """Forget the Redis client (it is re-created from settings on the next request)."""
    global _client, _script
    with _lock:
        _client = _script = None


def rate_limit_hit(ctx: TenantContext) -> int | None:
    """Count one request for ``ctx``'s API key.

    Returns:
        ``None`` when the request is allowed, else the seconds until the window ends.
        Redis unavailable: ``None`` (fail open) and the request is flagged degraded.
    """
    limit = ctx.rate_limit if ctx.rate_limit is not None else settings.RATE_LIMIT_REQUESTS
    if ctx.api_key_id is None or limit <= 0:
        return None
    window = max(1, settings.RATE_LIMIT_WINDOW_SECONDS)
    key = f"ratelimit:{ctx.api_key_id}:{int(time.time()) // window}"
    try:
        count, ttl = call_guarded(REDIS, _increment, key, window)
    except Exception as exc:
        logger.warning("rate limiter unavailable, letting the request through: %s", exc)
        mark_degraded("rate_limit")
        return None
    return max(1, ttl) if count > limit else None


class ApiKeyRateThrottle(BaseThrottle):
    """DRF throttle applying :func:`rate_limit_hit` to the authenticated key."""

    def __init__(self) -> None:
        self._wait: int | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        if not isinstance(request.auth, TenantContext):
            return True
        self._wait = rate_limit_hit(request.auth)
        return self._wait is None

    def wait(self) -> float | None:
        return float(self._wait) if self._wait is not None else None
