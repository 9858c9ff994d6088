"""A real Celery worker and Celery beat, on the embedded Redis, run the session-cleanup job
from the database schedule: an idle session's important memory is promoted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from memories.models import Memory
from memories.services.memory import MemoryInput, memory_add
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.layers import LayerIdentifiers

TENANT_TABLES = ("memories_memoryfeedback", "memories_memoryhistory", "memories_memory",
                 "memories_closedsession", "governance_auditentry", "governance_reviewitem",
                 "tenants_apikey")


def _env() -> dict[str, str]:
    name = connections["default"].settings_dict["NAME"]
    url = urlunsplit(urlsplit(settings.DATABASE_URL)._replace(path=f"/{name}"))
    owner = urlunsplit(urlsplit(settings.DATABASE_OWNER_URL)._replace(path=f"/{name}"))
    platform = urlunsplit(urlsplit(settings.DATABASE_PLATFORM_URL)._replace(path=f"/{name}"))
    return {**os.environ, "DATABASE_URL": url, "DATABASE_OWNER_URL": owner,
            "DATABASE_PLATFORM_URL": platform,
            "REDIS_URL": settings.REDIS_URL, "DJANGO_SETTINGS_MODULE": "memory_project.settings"}


@pytest.fixture
def committed(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A committed tenant with an idle session (the worker reads another connection)."""
    with django_db_blocker.unblock():
        tenant = tenant_services.tenant_create(name=f"Worker {uuid.uuid4().hex[:8]}")
        tenant.settings = {"lifecycle": {"sessionCleanup": {"retentionPeriod": "1s"}}}
        tenant.save(update_fields=["settings"])
        ctx = tenant_services.system_context(tenant, "test")
        with tenant_scope(ctx):
            memory = memory_add(ctx, item=MemoryInput(
                content="The user prefers dark mode in every editor", layer="session",
                identifiers=LayerIdentifiers(userId="u1", sessionId="s-worker"),
                importance=0.95)).memory
            Memory.objects.filter(pk=memory.pk).update(
                updated_at=timezone.now() - timedelta(hours=1))
        yield {"tenant": tenant, "ctx": ctx, "memory": memory}
        _delete_tenant(str(tenant.id))


def _delete_tenant(tenant_id: str) -> None:
    """Remove a committed tenant and every row it owns (as the owner role), in whatever
    order the foreign keys allow."""
    with transaction.atomic(using="owner"), connections["owner"].cursor() as cursor:
        cursor.execute("SELECT table_name FROM information_schema.columns "
                       "WHERE table_schema = 'public' AND column_name = 'tenant_id'")
        pending = [row[0] for row in cursor.fetchall()]
        for _ in range(len(pending) + 1):
            for table in list(pending):
                try:
                    with transaction.atomic(using="owner"):
                        cursor.execute(f'DELETE FROM "{table}" WHERE tenant_id = %s',
                                       [tenant_id])
                    pending.remove(table)
                except IntegrityError:
                    continue
        cursor.execute("DELETE FROM tenants_tenant WHERE id = %s", [tenant_id])


@pytest.mark.slow
def test_it_runs_the_beat_schedule_on_a_real_worker(committed: dict[str, Any],
                                                     django_db_blocker: Any) -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    queue = f"test-{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        every, _ = IntervalSchedule.objects.get_or_create(every=2, period=IntervalSchedule.SECONDS)
        task = PeriodicTask.objects.create(name=f"sessions {queue}", task="memories.run_job",
                                           args=json.dumps(["sessions"]), interval=every,
                                           queue=queue)
    celery = [sys.executable, "-m", "celery", "-A", "memory_project"]
    worker = subprocess.Popen([*celery, "worker", "-Q", queue, "--concurrency", "1",
                               "--pool", "solo", "--loglevel", "WARNING"], env=_env())
    beat = subprocess.Popen([*celery, "beat", "--scheduler", settings.CELERY_BEAT_SCHEDULER,
                             "--max-interval", "1", "--loglevel", "WARNING",
                             "--schedule", os.devnull], env=_env())
    promoted: list[Memory] = []
    try:
        deadline = time.monotonic() + 90
        with django_db_blocker.unblock():
            while time.monotonic() < deadline and not promoted:
                with tenant_scope(committed["ctx"]):
                    promoted = list(Memory.objects.filter(layer="user", user_id="u1"))
                time.sleep(1)
    finally:
        for process in (beat, worker):
            process.terminate()
        for process in (beat, worker):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        with django_db_blocker.unblock():
            task.delete()
    assert len(promoted) == 1, "the worker did not promote the idle session's memory in time"
    copy = promoted[0]
    assert copy.content == "The user prefers dark mode in every editor"
    assert copy.metadata["promotedFrom"]["id"] == str(committed["memory"].pk)
