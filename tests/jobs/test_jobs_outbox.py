"""The job outbox (``jobs.services``): a job is stored with the transaction that asks for it,
handed to the broker after commit, kept when the broker cannot take it, and sent once by
the drain; each tenant's queued jobs are its own (RLS and the scoped manager)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import transaction

from jobs import services
from jobs.models import QueuedJob
from jobs.selectors import queued_jobs_count
from memory_project import resilience
from memory_project.celery import app
from tenants.context import tenant_scope

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_backlog() -> Iterator[None]:
    """The "a hand-over failed in this process" flag is per process: clear it around tests."""
    services._backlog.clear()
    yield
    services._backlog.clear()


@pytest.fixture
def queue() -> Iterator[str]:
    """A queue of its own on the test Redis (nothing consumes it); emptied afterwards."""
    name = f"outbox-test-{uuid.uuid4().hex[:8]}"
    yield name
    redis.Redis.from_url(settings.REDIS_URL).delete(name)


def messages(queue: str) -> list[dict[str, Any]]:
    """The task messages waiting in ``queue`` (kombu's Redis list), oldest first."""
    raw = redis.Redis.from_url(settings.REDIS_URL).lrange(queue, 0, -1)
    return [json.loads(item)["headers"] for item in reversed(raw)]


@pytest.fixture
def broker_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker is a Unix socket nobody listens on."""
    def dead() -> Any:
        return app.connection_for_write(
            url="redis+socket:///nonexistent/redis.sock",
            transport_options={"max_retries": 0, "socket_connect_timeout": 1.0})

    monkeypatch.setattr(services, "_broker_connection", dead)


def enqueue(tenant: Any, queue: str) -> QueuedJob:
    with tenant_scope(tenant.ctx):
        return services.job_enqueue(tenant.ctx, task="memories.tenant_job",
                                    args=["storage_size", str(tenant.tenant.id)],
                                    kwargs={}, queue=queue)


def queued(tenant: Any) -> list[QueuedJob]:
    with tenant_scope(tenant.ctx):
        return list(QueuedJob.objects.all())


def test_it_sends_the_job_after_commit_and_forgets_it(
        tenant_a: Any, queue: str, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = enqueue(tenant_a, queue)
    assert [j.pk for j in queued(tenant_a)] == [job.pk], "stored with the transaction"
    assert messages(queue) == [], "nothing is sent before the commit"
    for callback in callbacks:
        callback()
    [message] = messages(queue)
    assert message["id"] == str(job.pk)
    assert message["task"] == "memories.tenant_job"
    assert queued(tenant_a) == []


def test_a_rolled_back_transaction_sends_nothing(
        tenant_a: Any, queue: str, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                enqueue(tenant_a, queue)
                raise RuntimeError("the change failed")
        except RuntimeError:
            pass
    assert callbacks == []
    assert queued(tenant_a) == [] and messages(queue) == []


def test_a_stopped_broker_keeps_the_job_and_answers_at_once(
        tenant_a: Any, queue: str, broker_down: None,
        django_capture_on_commit_callbacks: Any) -> None:
    started = time.monotonic()
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue(tenant_a, queue)
    assert time.monotonic() - started < 1.0, "a stopped broker must not hold the caller"
    [kept] = queued(tenant_a)
    assert kept.pk == job.pk
    assert kept.attempts == 1
    assert "OperationalError" in kept.last_error
    assert messages(queue) == []


def test_an_open_redis_circuit_keeps_jobs_without_trying(
        tenant_a: Any, queue: str, broker_down: None,
        django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(7):
            enqueue(tenant_a, queue)
    assert resilience.breaker("redis").current_state == "open"
    jobs = queued(tenant_a)
    assert len(jobs) == 7
    assert sum("BackendCircuitOpen" in j.last_error for j in jobs) == 2


def test_the_drain_sends_every_queued_job_once_in_order(
        tenant_a: Any, tenant_b: Any, queue: str, monkeypatch: pytest.MonkeyPatch,
        django_capture_on_commit_callbacks: Any) -> None:
    dead = services._broker_connection
    monkeypatch.setattr(services, "_broker_connection", lambda: app.connection_for_write(
        url="redis+socket:///nonexistent/redis.sock", transport_options={"max_retries": 0}))
    with django_capture_on_commit_callbacks(execute=True):
        ids = [str(enqueue(tenant, queue).pk) for tenant in (tenant_a, tenant_b, tenant_a)]
    assert queued_jobs_count() == 3
    monkeypatch.setattr(services, "_broker_connection", dead)  # the broker is back
    resilience.reset_breakers()
    assert services.outbox_drain() == {"sent": 3, "queued": 0}
    sent = [m["id"] for m in messages(queue)]
    assert sorted(sent) == sorted(ids) and len(set(sent)) == 3
    assert sent[:2] == [ids[0], ids[2]] or sent[1:] == [ids[0], ids[2]], "per tenant, in order"
    assert queued_jobs_count() == 0
    assert services.outbox_drain() == {"sent": 0, "queued": 0}, "nothing is sent twice"
    assert len(messages(queue)) == 3


def test_the_drain_stops_at_the_first_refusal_and_keeps_the_rest(
        tenant_a: Any, queue: str, broker_down: None,
        django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):
            enqueue(tenant_a, queue)
    resilience.reset_breakers()
    assert services.outbox_drain() == {"sent": 0, "queued": 3}
    assert [j.attempts for j in queued(tenant_a)] == [2, 1, 1]


def test_the_next_successful_hand_over_asks_for_a_drain(
        tenant_a: Any, queue: str, monkeypatch: pytest.MonkeyPatch,
        django_capture_on_commit_callbacks: Any) -> None:
    requested: list[bool] = []
    monkeypatch.setattr(services, "_send_drain_task", lambda: requested.append(True))
    services._backlog.clear()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(tenant_a, queue)
    assert requested == [], "no backlog, no drain"
    services._backlog.set()  # a hand-over failed earlier in this process
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(tenant_a, queue)
    assert requested == [True]
    assert not services._backlog.is_set()


def test_queued_jobs_are_the_tenants_own(
        tenant_a: Any, tenant_b: Any, queue: str, broker_down: None,
        django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(tenant_a, queue)
    assert len(queued(tenant_a)) == 1
    assert queued(tenant_b) == []
    with tenant_scope(tenant_b.ctx), transaction.atomic():
        # Lock 1 alone: the database hides tenant A's row even without the manager's filter.
        assert QueuedJob._base_manager.count() == 0


def test_eager_mode_runs_the_task_in_place(
        tenant_a: Any, monkeypatch: pytest.MonkeyPatch,
        django_capture_on_commit_callbacks: Any) -> None:
    ran: list[Any] = []
    monkeypatch.setattr("memories.telemetry.storage_size_refresh",
                        lambda ctx: ran.append(ctx.tenant_id) or {"user": 1})
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            enqueue(tenant_a, "")
    finally:
        app.conf.task_always_eager = eager
    assert ran == [tenant_a.tenant.id]
    assert queued(tenant_a) == []


def test_the_drain_runs_every_thirty_seconds_from_the_beat_schedule() -> None:
    from memory_project.schedule import BEAT_SCHEDULE

    entry = BEAT_SCHEDULE["send queued jobs"]
    assert entry == {"task": services.DRAIN_TASK, "every_seconds": 30}
    app.loader.import_default_modules()
    assert services.DRAIN_TASK in app.tasks


def test_a_kept_broker_connection_loses_nothing_when_redis_restarts(
        tenant_a: Any, own_redis: Any, django_capture_on_commit_callbacks: Any) -> None:
    """The thread keeps its broker connection between hand-overs; a Redis restart under it
    at worst keeps one job for the drain, and the next hand-over connects anew."""
    broker = app.conf.broker_url
    app.conf.broker_url = f"redis+socket://{own_redis.socket}"
    client = redis.Redis.from_url(own_redis.url)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            first = enqueue(tenant_a, "restart-q")
        with services._broker_connection() as kept:
            pass
        with services._broker_connection() as again:
            assert again is kept, "one connection per thread, kept"
        own_redis.stop()
        own_redis.start()
        resilience.reset_breakers()
        with django_capture_on_commit_callbacks(execute=True):
            second = enqueue(tenant_a, "restart-q")
            third = enqueue(tenant_a, "restart-q")
        waiting = {str(j.pk) for j in queued(tenant_a)}
        sent = {json.loads(m)["headers"]["id"] for m in client.lrange("restart-q", 0, -1)}
        assert str(first.pk) not in waiting, "sent before the restart"
        assert str(third.pk) in sent, "the hand-over after a failure connects anew"
        assert {str(second.pk), str(third.pk)} <= sent | waiting, "nothing is lost"
    finally:
        app.conf.broker_url = broker
        with services._broker_connection():
            pass  # back on the test broker


def test_a_forked_child_opens_its_own_broker_connection_and_leaves_the_parents(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with services._broker_connection() as parents:
        pass
    released: list[Any] = []
    monkeypatch.setattr(parents, "release", lambda: released.append(True))
    monkeypatch.setattr(services.os, "getpid", lambda: -1)  # as a forked child sees it
    with services._broker_connection() as childs:
        assert childs is not parents
    assert released == [], "closing it would shut the socket the parent still uses"
