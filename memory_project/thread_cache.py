"""Django's default cache with one client per thread, whatever context the code runs in.

Django keeps its cache clients in context-local storage (``asgiref.local.Local``) whose
contents are tagged with the thread that made them. Work that runs on one thread in a copy
of another thread's context (``contextvars.copy_context().run``, as the work deferred until
after the response and a search's concurrent queries do) finds no client of its own there,
so ``django.core.cache.cache`` makes a new one, with a new connection pool and a new Redis
connection, every time, and drops it when the work ends. The search activity counter, which
runs after every search, opened one Redis connection per search that way.

:func:`thread_cache` keeps one client per thread instead, in plain thread-local storage. A
change of the ``CACHES`` or ``REDIS_URL`` setting (tests point them at another server)
retires every thread's client.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.signals import setting_changed

_local = threading.local()
_generation = 0


def thread_cache() -> BaseCache:
    """The default cache (``CACHES["default"]``), one client per thread, kept across calls
    made from copied contexts. Same API and keys as ``django.core.cache.cache``."""
    client: BaseCache | None = getattr(_local, "client", None)
    if client is None or getattr(_local, "generation", None) != _generation:
        if client is not None:
            client.close()
        client = caches.create_connection("default")
        _local.client, _local.generation = client, _generation
    return client


def _settings_changed(*, setting: str, **_: Any) -> None:
    global _generation
    if setting in ("CACHES", "REDIS_URL"):
        _generation += 1


setting_changed.connect(_settings_changed, dispatch_uid="memory_project.thread_cache")
