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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from memory_project.errors import RateLimited
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

# KEYS[1]: the slot counter; ARGV[1]: the limit, ARGV[2]: the lease in seconds.
# Returns 1 when a slot was taken, 0 when all ``limit`` slots are in use.
_ACQUIRE = """
local count = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
if count > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
"""

# KEYS[1]: the slot counter. Gives a slot back, never below 0 (the lease may have expired).
_RELEASE = """
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count > 0 then
  return redis.call('DECR', KEYS[1])
end
return 0
"""

_client: redis.Redis | None = None
_scripts: dict[str, Any] = {}
_lock = threading.Lock()


def _script(source: str) -> Any:
    global _client
    with _lock:
        if _client is None:
            timeout = settings.CACHES["default"].get("OPTIONS", {}).get("socket_timeout", 1.0)
            _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout,
                                           socket_connect_timeout=timeout)
            _scripts.clear()
        if source not in _scripts:
            _scripts[source] = _client.register_script(source)
        return _scripts[source]


def _increment(key: str, window: int) -> tuple[int, int]:
    count, ttl = _script(_INCREMENT)(keys=[key], args=[window])
    return int(count), int(ttl)


def reset_client() -> None:
    """Forget the Redis client (it is re-created from settings on the next request)."""
    global _client
    with _lock:
        _client = None
        _scripts.clear()


@contextmanager
def concurrency_slot(key: str, limit: int, *, lease_seconds: int = 120) -> Iterator[None]:
    """Hold one of ``limit`` slots of ``key`` across every process while the block runs.

    A slot is a count in Redis (``slots:<key>``); its expiry (``lease_seconds``, renewed on
    every acquisition) frees the slots of a process that died holding them. Redis unavailable:
    the block runs anyway (fail open, like the rate limit) and the response is flagged
    degraded.

    Raises:
        RateLimited: every slot is taken (429, ``Retry-After: 1``).
    """
    name = f"slots:{key}"
    try:
        taken: bool | None = bool(call_guarded(REDIS, lambda: _script(_ACQUIRE)(
            keys=[name], args=[limit, lease_seconds])))
    except Exception as exc:
        logger.warning("concurrency limiter unavailable, running anyway: %s", exc)
        mark_degraded("rate_limit")
        taken = None
    if taken is False:
        raise RateLimited("Too many expensive requests of this tenant at once; retry shortly.",
                          details={"retryAfter": 1, "limit": limit})
    try:
        yield
    finally:
        if taken:
            try:
                call_guarded(REDIS, lambda: _script(_RELEASE)(
                    keys=[name]))
            except Exception as exc:  # the lease expiry frees it
                logger.warning("could not release a concurrency slot: %s", exc)


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
