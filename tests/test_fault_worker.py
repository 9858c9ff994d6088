"""A Celery worker killed with SIGKILL in the middle of its tasks: every task completes
exactly once in effect (idempotent re-embedding, ``acks_late``,
``task_reject_on_worker_lost``). Prints tasks sent vs completed and duplicates."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings

from tests.fault_helpers import stale_tenant
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def stale_memories(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A committed tenant with 200 memories whose vectors are marked as another model's
    (the worker reads them over its own connection), and nothing cached for them."""
    from django.core.cache import cache

    from memories import embeddings

    texts = [f"note {i}: the team ships release {i} on a Tuesday" for i in range(200)]
    with stale_tenant(django_db_blocker, "Reembed", texts) as tenant:
        # The worker must compute every vector (slow enough to be killed in the middle).
        with django_db_blocker.unblock():
            cache.delete_many([embeddings._cache_key(tenant["tenant"].id,
                                                     embeddings.content_hash(text), "content")
                               for text in texts])
        yield tenant


def test_worker_killed_mid_task(stale_memories: dict[str, Any], django_db_blocker: Any) -> None:
    from memories.models import Memory
    from memories.tasks import memory_reembed
    from tenants.context import tenant_scope
    from tests.test_celery_worker import _env

    queue = f"faults-{time.time_ns()}"
    env = {**_env(), "CELERY_VISIBILITY_TIMEOUT_SECONDS": "2", "EMBEDDING_TORCH_THREADS": "1"}
    ids = stale_memories["ids"]
    batches = [ids[i:i + 5] for i in range(0, len(ids), 5)]
    for batch in batches:
        memory_reembed.apply_async((str(stale_memories["tenant"].id), batch), queue=queue)

    def rows() -> dict[str, tuple[str, int]]:
        with django_db_blocker.unblock(), tenant_scope(stale_memories["ctx"]):
            return {str(pk): (model, version) for pk, model, version in Memory.objects.filter(
                pk__in=ids).values_list("id", "embedding_model", "version")}

    def progress() -> tuple[int, list[int]]:
        found = rows()
        current = sum(1 for model, _ in found.values() if model != "older-model")
        return current, [version for _, version in found.values()]

    def worker() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "memory_project",
                                 "worker", "-Q", queue, "--pool", "solo",
                                 "--loglevel", "WARNING"], env=env)

    first = worker()
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_for(lambda: progress()[0] > 0, 120, "the first worker to start re-embedding")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        done_at_kill = progress()[0]
        # Messages delivered to the killed worker and never acknowledged (kombu's hash).
        in_flight = redis.Redis.from_url(settings.REDIS_URL).hlen("unacked")
        time.sleep(2.5)  # the killed worker's unacknowledged message becomes visible again
        second = worker()
        wait_for(lambda: progress()[0] == len(ids), 180, "every memory to be re-embedded")
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
    done, versions = progress()
    final = rows()
    duplicates = sum(1 for version in versions if version > 2)
    completed = sum(1 for batch in batches
                    if all(final[i][0] != "older-model" for i in batch))
    print(f"\nworker SIGKILL: tasks sent {len(batches)}, completed {completed}; memories "
          f"re-embedded {done} of "
          f"{len(ids)} (done when killed: {done_at_kill}, tasks in flight: {in_flight}), "
          f"duplicates {duplicates}")
    assert 0 < done_at_kill < len(ids), "the worker was not killed in the middle of the work"
    assert in_flight >= 1, "no task was in flight when the worker was killed"
    assert done == len(ids)
    assert completed == len(batches)
    assert versions == [2] * len(ids), "every memory changed exactly once"
    assert duplicates == 0
