"""Redis URLs for redis-py and for Celery's transport (``memory_project.redis_urls``)."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings
from kombu import Connection

from memory_project.redis_urls import kombu_url, with_database


def test_a_unix_socket_becomes_kombus_socket_url_with_its_database() -> None:
    assert kombu_url("unix:///var/run/redis.socket") == "redis+socket:///var/run/redis.socket"
    assert (kombu_url("unix:///var/run/redis.socket?db=15")
            == "redis+socket:///var/run/redis.socket?virtual_host=15")


def test_tcp_urls_are_the_same_for_both() -> None:
    assert kombu_url("redis://cache.internal:6379/2") == "redis://cache.internal:6379/2"


def test_with_database_replaces_the_database_in_either_form() -> None:
    assert with_database("unix:///r/redis.socket", 15) == "unix:///r/redis.socket?db=15"
    assert with_database("unix:///r/redis.socket?db=3", 15) == "unix:///r/redis.socket?db=15"
    assert with_database("redis://:pw@h:6379/0", 15) == "redis://:pw@h:6379/15"
    assert with_database("redis://h:6379", 1) == "redis://h:6379/1"
    with pytest.raises(ValueError, match=r"not in 0\.\.15"):
        with_database("redis://h:6379", 16)


def test_redis_py_and_kombu_reach_the_same_database_of_the_embedded_redis() -> None:
    url = with_database(settings.REDIS_URL, 14)
    with redis.Redis.from_url(url) as client, redis.Redis.from_url(settings.REDIS_URL) as main:
        client.flushdb()
        with Connection(kombu_url(url)) as conn:
            conn.SimpleQueue("redis-urls-check").put({"n": 1})
        assert client.exists("redis-urls-check") == 1
        assert main.exists("redis-urls-check") == 0
        client.flushdb()


def test_the_bench_server_gets_a_database_of_its_own_only_on_the_embedded_redis(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.http import BENCH_REDIS_DB, bench_redis_url

    monkeypatch.delenv("REDIS_URL", raising=False)
    assert bench_redis_url() == with_database(settings.REDIS_URL, BENCH_REDIS_DB)
    monkeypatch.setenv("REDIS_URL", "redis://users-redis:6379/0")
    assert bench_redis_url() is None, "a Redis of the user's own is never emptied"
