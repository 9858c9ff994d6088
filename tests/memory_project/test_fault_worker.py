"""A Celery worker killed with SIGKILL in the middle of a task: every task completes
exactly once in effect (idempotent re-embedding, ``acks_late``,
``task_reject_on_worker_lost``). Prints tasks sent vs completed and duplicates.

The kill must land inside a task, never between two: kombu's Redis transport pops a message
(``BRPOP``) before it records it as unacknowledged, so a worker killed in that gap loses the
message outright (the README says how to recover). The test holds a row lock on one memory
of the second batch, so the worker is waiting inside that task when it is killed; the batch's
transaction (memories already re-embedded in it included) is rolled back with it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
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

    from memories.embedding import embedders as embeddings

    texts = [f"note {i}: the team ships release {i} on a Tuesday" for i in range(200)]
    with stale_tenant(django_db_blocker, "Reembed", texts) as tenant:
        # The worker must compute every vector (slow enough to be killed in the middle).
        with django_db_blocker.unblock():
            cache.delete_many([embeddings._cache_key(tenant["tenant"].id,
                                                     embeddings.content_hash(text), "content")
                               for text in texts])
        yield tenant


@contextmanager
def row_locked(tenant_id: str, memory_id: str, database_url: str
               ) -> Iterator[psycopg.Connection[Any]]:
    """Hold ``SELECT ... FOR UPDATE`` on one memory, on a connection of its own (yielded),
    until exit."""
    with psycopg.connect(database_url) as connection:
        connection.execute("SELECT set_config('app.tenant_id', %s, true)", [tenant_id])
        row = connection.execute("SELECT id FROM memories_memory WHERE id = %s FOR UPDATE",
                                 [memory_id]).fetchone()
        assert row is not None, "the memory to lock is not visible"
        try:
            yield connection
        finally:
            connection.rollback()


def _waiting_for_locks(connection: psycopg.Connection[Any]) -> int:
    """Backends of ``connection``'s database waiting for a lock (``pg_locks.granted`` false;
    the view is live, not a snapshot, so an open transaction sees new waiters)."""
    row = connection.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE NOT l.granted AND a.datname = current_database()").fetchone()
    return int(row[0]) if row else 0


def _unacked_for(queue: str) -> int:
    """Messages of ``queue`` delivered and not yet acknowledged (kombu's ``unacked`` hash
    holds ``[message, exchange, routing_key]`` per delivery tag)."""
    with redis.Redis.from_url(settings.REDIS_URL) as client:
        return sum(1 for raw in client.hvals("unacked") if json.loads(raw)[2] == queue)


def test_worker_killed_mid_task(stale_memories: dict[str, Any], django_db_blocker: Any) -> None:
    from memories.models import Memory
    from memories.tasks import memory_reembed
    from tenants.context import tenant_scope
    from tests.memory_project.test_celery_worker import _env

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

    # Batch 1 commits; batch 2 re-embeds two memories in its transaction and waits on the
    # third's lock.
    locked = batches[1][2]
    done_before_lock = len(batches[0])
    first = worker()
    second: subprocess.Popen[bytes] | None = None
    try:
        with row_locked(str(stale_memories["tenant"].id), locked,
                        env["DATABASE_URL"]) as holder:
            wait_for(lambda: progress()[0] == done_before_lock
                     and _waiting_for_locks(holder) > 0, 120,
                     "the first worker to wait inside its second task")
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        done_at_kill = progress()[0]
        in_flight = _unacked_for(queue)
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
    assert done_at_kill == done_before_lock, "the worker was not killed inside its second task"
    assert in_flight == 1, "the second task's message was not in flight when the worker died"
    assert done == len(ids)
    assert completed == len(batches)
    assert versions == [2] * len(ids), "every memory changed exactly once"
    assert duplicates == 0
