"""One cache client per thread for work that runs in copied contexts
(``memory_project.thread_cache``)."""

from __future__ import annotations

import contextvars
import uuid
from concurrent.futures import ThreadPoolExecutor

import redis
from django.conf import settings
from django.test import override_settings

from memories.selectors.activity import activity_per_hour, activity_record
from memory_project.thread_cache import thread_cache


def _connections_received(probe: redis.Redis) -> int:
    return int(probe.info("stats")["total_connections_received"])


def test_it_counts_activity_from_copied_contexts_on_one_redis_connection() -> None:
    tenant_id = uuid.uuid4()
    probe = redis.Redis.from_url(settings.REDIS_URL)  # one connection, opened by its first call
    _connections_received(probe)
    with ThreadPoolExecutor(max_workers=1) as worker:  # as work deferred after a response
        worker.submit(lambda: None).result()
        before = _connections_received(probe)
        for _ in range(20):
            worker.submit(contextvars.copy_context().run, activity_record, tenant_id,
                          "search").result()
        opened = _connections_received(probe) - before
    probe.close()
    assert opened <= 1, f"{opened} Redis connections for 20 counts"
    assert activity_per_hour(tenant_id, "search", hours=1)[-1][1] == 20


def test_it_keeps_the_client_of_a_thread() -> None:
    assert thread_cache() is thread_cache()
    with ThreadPoolExecutor(max_workers=1) as worker:
        assert worker.submit(thread_cache).result() is not thread_cache()


def test_it_follows_a_change_of_the_cache_settings() -> None:
    first = thread_cache()
    caches = {"default": {**settings.CACHES["default"], "KEY_PREFIX": "other"}}
    with override_settings(CACHES=caches):
        changed = thread_cache()
        assert changed is not first and changed.key_prefix == "other"
    assert thread_cache().key_prefix == settings.CACHES["default"]["KEY_PREFIX"]
