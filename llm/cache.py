"""Answers of identical requests, reused (seed 001 MR-H3 "Query Refinement Caching", for
every purpose): keyed by tenant, the tenant's cache generation, purpose, model, prompt
version and the normalised input (runs of whitespace collapsed; a purpose may fold case
itself), so no tenant can ever be served another's answer. Two levels: a per-process LRU of
``LLM_CACHE_SIZE`` entries (10,000) in front of Redis; both expire after the tenant's
``llm.cacheTtlSeconds`` (1 hour). Erasing memories bumps the tenant's generation (kept in
Redis), so no answer derived from erased content is served again by any process. Redis
unavailable: the cache is skipped (flagged degraded), never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from typing import Any

from cachetools import LRUCache
from django.conf import settings
from django.core.cache import cache

from memory_project.resilience import REDIS, call_guarded, mark_degraded

logger = logging.getLogger(__name__)

_local: LRUCache[str, tuple[float, Any]] | None = None
_lock = threading.RLock()  # put() holds it while _store() takes it


def _store() -> LRUCache[str, tuple[float, Any]]:
    global _local
    with _lock:
        if _local is None:
            _local = LRUCache(maxsize=max(1, settings.LLM_CACHE_SIZE))
        return _local


def normalize(value: Any) -> str:
    """The input as the cache sees it: JSON with sorted keys, whitespace collapsed."""
    return " ".join(json.dumps(value, sort_keys=True, ensure_ascii=False).split())


def _generation_key(tenant_id: uuid.UUID) -> str:
    return f"llm:generation:{tenant_id}"


def generation(tenant_id: uuid.UUID) -> int | None:
    """The tenant's cache generation (0 until the first erasure); ``None`` when Redis does
    not answer (then nothing is cached or served from the cache)."""
    try:
        return int(call_guarded(REDIS, cache.get, _generation_key(tenant_id)) or 0)
    except Exception as exc:
        logger.warning("llm cache unavailable (generation): %s", exc)
        mark_degraded("cache")
        return None


def invalidate_tenant(tenant_id: uuid.UUID) -> None:
    """Make every cached answer of the tenant unreachable, in every process.

    Raises:
        Exception: Redis's error when it cannot be reached (the caller decides).
    """
    key = _generation_key(tenant_id)
    cache.add(key, 0, timeout=None)
    cache.incr(key)
    with _lock:
        if _local is not None:
            for stale in [k for k in _local if k.startswith(f"llm:{tenant_id}:")]:
                _local.pop(stale, None)


def cache_key(tenant_id: uuid.UUID, generation: int, purpose: str, model: str, version: str,
              payload: Any) -> str:
    """The cache key of one request (the tenant first: no key is shared across tenants)."""
    digest = hashlib.sha256(normalize(payload).encode()).hexdigest()
    model_digest = hashlib.sha256(model.encode()).hexdigest()[:16]
    return f"llm:{tenant_id}:{generation}:{purpose}:{version}:{model_digest}:{digest}"


def get(key: str) -> Any | None:
    """The cached answer of ``key``, or ``None``."""
    local = _store()
    with _lock:
        found = local.get(key)
    if found is not None and found[0] > time.monotonic():
        return found[1]
    try:
        raw = call_guarded(REDIS, cache.get, key)
    except Exception as exc:
        logger.warning("llm cache unavailable (read): %s", exc)
        mark_degraded("cache")
        return None
    return json.loads(raw) if raw else None


def put(key: str, value: Any, ttl: int) -> None:
    """Keep ``value`` (JSON-serialisable) for ``ttl`` seconds (0: not at all)."""
    if ttl <= 0:
        return
    with _lock:
        _store()[key] = (time.monotonic() + ttl, value)
    try:
        call_guarded(REDIS, cache.set, key, json.dumps(value), timeout=ttl)
    except Exception as exc:
        logger.warning("llm cache unavailable (write): %s", exc)
        mark_degraded("cache")


def clear_local() -> None:
    """Empty this process's level (tests)."""
    with _lock:
        if _local is not None:
            _local.clear()
