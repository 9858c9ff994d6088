"""The Redis the graph's processes coordinate through: the write queue, the writer lock, the
answers, the published snapshot versions and the dirty partitions (``graph.writer``,
``graph.store``). Every key starts with ``GRAPH_REDIS_PREFIX`` (default ``graph:``)."""

from __future__ import annotations

import threading

import redis
from django.conf import settings

_client: redis.Redis | None = None
_lock = threading.Lock()


def redis_client() -> redis.Redis:
    """The process's Redis client for the graph (``REDIS_URL``; 2 s to connect, 5 s per
    call)."""
    global _client
    with _lock:
        if _client is None:
            _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5,
                                           socket_connect_timeout=2)
        return _client


def reset_client() -> None:
    """Forget the Redis client (tests that change ``REDIS_URL``)."""
    global _client
    with _lock:
        _client = None


def key(name: str) -> str:
    """A Redis key of the graph: ``GRAPH_REDIS_PREFIX`` + ``name``."""
    return f"{settings.GRAPH_REDIS_PREFIX}{name}"
