"""Rate limits counted atomically in Redis: per API key, per tenant, and per address for
invalid keys.

A sliding window (the "sliding window counter" approximation): a request is allowed when
``count(previous window) × (share of it still inside the last WINDOW seconds) +
count(current window) < limit``, so no burst across a window's edge gets more than the limit
(a fixed window allowed twice as much). One Lua script checks every limit of a request and
counts it only when all of them allow it, so concurrent requests on any number of processes
are counted exactly. A request over a limit gets 429 ``RATE_LIMITED`` with ``Retry-After`` =
seconds until the estimate is under it again.

Limits per ``RATE_LIMIT_WINDOW_SECONDS`` (60 s): ``RATE_LIMIT_REQUESTS`` (600) per key, or the
key's own ``rate_limit``; ``RATE_LIMIT_TENANT_REQUESTS`` (3000) per tenant, all its keys
together; ``RATE_LIMIT_INVALID_KEY_REQUESTS`` (30) requests with an unknown, revoked or
expired key per client address (``tenants.authentication``). ``0`` disables a limit. When
Redis cannot be reached (or its circuit is open) the request is let through ("fail open")
and flagged ``X-Memory-Degraded: rate_limit``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
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

# KEYS: for each limit, its current then its previous window's counter.
# ARGV: window length (s), the share of the current window elapsed (0..1), then the limits.
# Returns {1, 0} when allowed (every current counter incremented), else {0, seconds to wait}.
_SLIDING = """
local window = tonumber(ARGV[1])
local elapsed = tonumber(ARGV[2])
local wait = 0
for i = 1, #KEYS / 2 do
  local limit = tonumber(ARGV[2 + i])
  local current = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
  local previous = tonumber(redis.call('GET', KEYS[2 * i]) or '0')
  if previous * (1 - elapsed) + current >= limit then
    local seconds
    if current >= limit then
      seconds = window * (1 - elapsed) + window * (1 - limit / current)
    else
      seconds = window * (1 - elapsed - (limit - current) / previous)
    end
    wait = math.max(wait, math.ceil(seconds))
  end
end
if wait > 0 then
  return {0, math.max(1, wait)}
end
for i = 1, #KEYS / 2 do
  redis.call('INCR', KEYS[2 * i - 1])
  redis.call('EXPIRE', KEYS[2 * i - 1], 2 * window)
end
return {1, 0}
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
            cache_config: dict[str, Any] = dict(settings.CACHES["default"])
            timeout = cache_config.get("OPTIONS", {}).get("socket_timeout", 1.0)
            _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout,
                                           socket_connect_timeout=timeout)
            _scripts.clear()
        if source not in _scripts:
            _scripts[source] = _client.register_script(source)
        return _scripts[source]


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


def sliding_window_hit(limits: Sequence[tuple[str, int]]) -> int | None:
    """Count one request against every ``(name, limit)`` of ``limits`` (0: no limit).

    Returns:
        ``None`` when every limit allows it (it is then counted in each), else the seconds to
        wait. Redis unavailable: ``None`` (fail open) and the request is flagged degraded.
    """
    active = [(name, limit) for name, limit in limits if limit > 0]
    if not active:
        return None
    window = max(1, settings.RATE_LIMIT_WINDOW_SECONDS)
    now = time.time()
    current = math.floor(now / window)
    keys = [f"ratelimit:{name}:{slot}" for name, _ in active
            for slot in (current, current - 1)]
    try:
        allowed, wait = call_guarded(REDIS, lambda: _script(_SLIDING)(
            keys=keys, args=[window, (now % window) / window, *[limit for _, limit in active]]))
    except Exception as exc:
        logger.warning("rate limiter unavailable, letting the request through: %s", exc)
        mark_degraded("rate_limit")
        return None
    return None if int(allowed) else int(wait)


def rate_limit_hit(ctx: TenantContext) -> int | None:
    """Count one request for ``ctx``'s API key and tenant (:func:`sliding_window_hit`)."""
    if ctx.api_key_id is None:
        return None
    per_key = ctx.rate_limit if ctx.rate_limit is not None else settings.RATE_LIMIT_REQUESTS
    return sliding_window_hit([(f"key:{ctx.api_key_id}", per_key),
                               (f"tenant:{ctx.tenant_id}", settings.RATE_LIMIT_TENANT_REQUESTS)])


def invalid_key_hit(address: str) -> int | None:
    """Count one request with an invalid key from ``address``; seconds to wait when over."""
    return sliding_window_hit([(f"badkey:{address}", settings.RATE_LIMIT_INVALID_KEY_REQUESTS)])


def invalid_key_blocked(address: str) -> int | None:
    """Seconds to wait when ``address`` is over its invalid-key limit already (nothing is
    counted), else ``None``."""
    limit = settings.RATE_LIMIT_INVALID_KEY_REQUESTS
    if limit <= 0:
        return None
    window = max(1, settings.RATE_LIMIT_WINDOW_SECONDS)
    now = time.time()
    current = math.floor(now / window)
    try:
        counts = call_guarded(REDIS, lambda: _script("return redis.call('MGET', KEYS[1], "
                                                     "KEYS[2])")(keys=[
            f"ratelimit:badkey:{address}:{current}", f"ratelimit:badkey:{address}:{current - 1}"]))
    except Exception:
        return None
    cur, prev = (int(c or 0) for c in counts)
    elapsed = (now % window) / window
    if prev * (1 - elapsed) + cur >= limit:
        return max(1, math.ceil(window * (1 - elapsed)))
    return None


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
