"""A fault survived: jobs enqueued while Redis (the Celery broker) is stopped wait in
PostgreSQL (the job outbox) and each runs exactly once on a real worker after Redis returns.
The test prints its figures (jobs queued vs completed, duplicates)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from tests.fault_helpers import RedisServer, stale_tenant
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def stale_memories(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A committed tenant with 22 memories marked as another model's (re-embedding work for
    a worker, which reads them over its own connection)."""
    texts = [f"note {i} written before the redis outage" for i in range(22)]
    with stale_tenant(django_db_blocker, "Outbox", texts) as tenant:
        yield tenant


@pytest.fixture
def own_broker(own_redis: RedisServer) -> Iterator[RedisServer]:
    """This process's Celery app publishes to ``own_redis``."""
    from memory_project.celery import app

    broker = app.conf.broker_url
    app.conf.broker_url = f"redis+socket://{own_redis.socket}"
    try:
        yield own_redis
    finally:
        app.conf.broker_url = broker


_SUCCEEDED = re.compile(r"memories\.memory_reembed\[([0-9a-f-]{36})\] succeeded")
_DRAINED = re.compile(r"jobs\.outbox_drain\[[0-9a-f-]{36}\] succeeded[^{]*\{'sent': (\d+)")


def test_jobs_queued_while_redis_is_down_run_once_it_is_back(
        own_broker: RedisServer, stale_memories: dict[str, Any],
        django_db_blocker: Any) -> None:
    """Jobs enqueued while the broker is down stay in PostgreSQL (the outbox) and each
    runs exactly once after Redis returns: the first hand-over that succeeds asks a worker
    to drain the outbox."""
    from jobs.models import QueuedJob
    from jobs.services import job_enqueue
    from memories.models import Memory
    from tenants.context import tenant_scope
    from tests.memory_project.test_celery_worker import _env

    redis_server = own_broker
    ctx, ids = stale_memories["ctx"], stale_memories["ids"]
    tenant_id = str(stale_memories["tenant"].id)
    queue = f"outage-{time.time_ns()}"
    batches = [ids[i:i + 2] for i in range(0, len(ids), 2)]
    during, after = batches[:-1], batches[-1]

    def enqueue(batch: list[str]) -> str:
        with django_db_blocker.unblock(), tenant_scope(ctx):
            return str(job_enqueue(ctx, task="memories.memory_reembed",
                                   args=[tenant_id, batch], queue=queue).pk)

    def queued() -> int:
        with django_db_blocker.unblock(), tenant_scope(ctx):
            return int(QueuedJob.objects.count())

    def rows() -> list[tuple[str, int]]:
        with django_db_blocker.unblock(), tenant_scope(ctx):
            return list(Memory.objects.filter(pk__in=ids)
                        .values_list("embedding_model", "version"))

    redis_server.stop()
    slowest = 0.0
    job_ids = []
    for batch in during:
        started = time.monotonic()
        job_ids.append(enqueue(batch))
        slowest = max(slowest, time.monotonic() - started)
    queued_during = queued()
    assert queued_during == len(during), "every job enqueued during the outage is kept"

    redis_server.start()
    log = redis_server.socket.parent / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memory_project", "worker", "-Q",
         f"{queue},{settings.CELERY_TASK_DEFAULT_QUEUE},{settings.PERIODIC_JOBS_QUEUE}",
         "--pool", "solo", "--loglevel", "INFO"],
        env={**_env(), "REDIS_URL": redis_server.url, "EMBEDDING_TORCH_THREADS": "1",
             "LOG_FORMAT": "plain"},
        stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        time.sleep(1.1)  # the redis circuit of this process half-opens
        job_ids.append(enqueue(after))  # handed over at once; asks a worker for a drain
        wait_for(lambda: all(model != "older-model" for model, _ in rows()), 180,
                 "every queued job to run")
        wait_for(lambda: len(_SUCCEEDED.findall(log.read_text())) >= len(job_ids), 30,
                 "the worker to log every task")
        time.sleep(1)  # a duplicate delivery, if any, would show up now
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
    text = log.read_text()
    runs = Counter(_SUCCEEDED.findall(text))
    drained = sum(int(n) for n in _DRAINED.findall(text))
    versions = [version for _, version in rows()]
    duplicates = sum(n - 1 for n in runs.values())
    print(f"\nredis outage, queued work: jobs enqueued during the outage {len(during)} "
          f"(slowest enqueue {slowest * 1000:.0f} ms), kept in PostgreSQL {queued_during}; "
          f"after Redis returned: sent by the drain {drained}, enqueued after 1, "
          f"completed {sum(1 for j in job_ids if runs[j])} of {len(job_ids)}, "
          f"duplicates {duplicates}; memories re-embedded "
          f"{sum(1 for v in versions if v == 2)} of {len(ids)}")
    assert slowest < 2.0, "a stopped broker must not hold the caller"
    assert drained == len(during)
    assert set(runs) == set(job_ids), text[-3000:]
    assert duplicates == 0
    assert versions == [2] * len(ids), "every memory changed exactly once"
    assert queued() == 0


