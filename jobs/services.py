"""Hand Celery jobs to the broker through an outbox in PostgreSQL, so that none is lost
while Redis (the broker) is down.

:func:`job_enqueue` writes the job in the caller's transaction and, once that commits,
hands it to the broker at once. When the broker cannot take it (Redis down, or the
``redis`` circuit open) the job stays in the outbox, and :func:`outbox_drain` sends it
later: every 30 s (beat entry "send queued jobs" in ``memory_project.schedule``), and right
after this process next hands a job over successfully. A job leaves the outbox in the
transaction that saw the broker accept it; rows are locked while being sent (``SKIP
LOCKED``), so two drains never send the same job. With ``CELERY_TASK_ALWAYS_EAGER`` the
hand-over runs the task in place instead of publishing it.

Why not Celery's own retries: kombu retries a publish inside the calling process (the
request would wait, and the job dies with the process), and by default a publish to a
stopped Redis blocks for about 6 s. The hand-over here makes one attempt, bounded by
``REDIS_SOCKET_TIMEOUT_SECONDS``, and keeps the job otherwise.

Delivery is at least once: a crash between the broker's acceptance and the delete sends the
job again, with the same task id (the row's id). Every task is idempotent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from jobs.models import QueuedJob
from jobs.selectors import queued_jobs_count
from memory_project.celery import app
from memory_project.resilience import REDIS, call_guarded
from tenants.context import TenantContext
from tenants.entry import run_in_scope, tenant_job
from tenants.models import Tenant

logger = logging.getLogger(__name__)

DRAIN_TASK = "jobs.outbox_drain"
#: Jobs sent per transaction by the drain.
DRAIN_BATCH = 100

# Set when a hand-over failed in this process: the next successful one asks for a drain.
_backlog = threading.Event()
# Each thread's broker connection: ``connection`` holds ``((pid, broker URL), connection)``.
_kept = threading.local()


@transaction.atomic
def job_enqueue(ctx: TenantContext, *, task: str, args: Sequence[Any] = (),
                kwargs: dict[str, Any] | None = None, queue: str = "") -> QueuedJob:
    """Queue a call of Celery task ``task`` (its registered name) for ``ctx``'s tenant.

    The job is stored in the current transaction and handed to the broker after it
    commits (nothing is sent if it rolls back). Must run inside ``ctx``'s tenant scope.

    Args:
        args, kwargs: the task's arguments (JSON-serializable).
        queue: the Celery queue; ``""`` for the default one.

    Returns:
        The stored job; its ``id`` is the Celery task id.

    Raises:
        MissingTenantContext: called outside a tenant scope.
    """
    job = job_defer(ctx, task=task, args=args, kwargs=kwargs, queue=queue)
    job_id = job.pk

    def send() -> None:  # a named function: a robust hook's failure is logged by name
        _send_one(ctx, job_id)

    transaction.on_commit(send, robust=True)
    return job


def job_defer(ctx: TenantContext, *, task: str, args: Sequence[Any] = (),
              kwargs: dict[str, Any] | None = None, queue: str = "") -> QueuedJob:
    """Queue a call of ``task`` like :func:`job_enqueue`, but leave it in the outbox for the
    next drain (every 30 s) instead of handing it over at commit: for a job that found a
    dependency down and tries again later (``memories.tiers.l3``). Must run inside ``ctx``'s
    tenant scope.

    Raises:
        MissingTenantContext: called outside a tenant scope.
    """
    return QueuedJob.objects.create(tenant_id=ctx.tenant_id, task=task, args=list(args),
                                    kwargs=kwargs or {}, queue=queue)


def _send_one(ctx: TenantContext, job_id: Any) -> None:
    """After commit: hand one job to the broker unless a drain holds it already. The
    database going away meanwhile leaves the job in the outbox for the drain (if the broker
    took it before, it is sent twice: delivery is at least once)."""
    try:
        sent = run_in_scope(ctx, _send_if_free, job_id)
    except (OperationalError, InterfaceError) as exc:
        _backlog.set()
        logger.warning("outbox: job %s stays queued, the database is unavailable (%s)",
                       job_id, exc)
        return
    if sent and _backlog.is_set():
        _backlog.clear()
        _request_drain()


def _send_if_free(job_id: Any) -> int:
    job = QueuedJob.objects.select_for_update(skip_locked=True).filter(pk=job_id).first()
    return _hand_over([job]) if job is not None else 0


def outbox_drain() -> dict[str, int]:
    """Send every queued job of every tenant, oldest first, each tenant in its own scope;
    stops at the first job the broker does not take (it and the rest stay queued). Jobs
    another drain is sending at the same moment are skipped, not sent twice.

    Returns:
        ``{"sent": n, "queued": m}``: jobs handed over now, and jobs still waiting after
        the broker refused one (0 when it refused none).
    """
    sent = 0
    for tenant in Tenant.objects.order_by("id"):
        while True:
            with tenant_job(tenant, "job:outbox"):
                batch = list(QueuedJob.objects.select_for_update(skip_locked=True)
                             .order_by("id")[:DRAIN_BATCH])
                done = _hand_over(batch)
            sent += done
            if done < len(batch):
                return {"sent": sent, "queued": queued_jobs_count()}
            if len(batch) < DRAIN_BATCH:
                break
    if sent:
        logger.info("outbox: sent %d queued jobs", sent)
    return {"sent": sent, "queued": 0}


def _hand_over(jobs: list[QueuedJob]) -> int:
    """Publish ``jobs`` (locked, in the current tenant scope) in order; delete each one the
    broker took. Returns how many were sent; stops at the first failure."""
    if not jobs:
        return 0
    sent: list[Any] = []
    failed: QueuedJob | None = None
    error = ""
    try:
        call_guarded(REDIS, _publish, jobs, sent)
    except Exception as exc:  # broker unreachable or its circuit open: keep the rest
        failed, error = jobs[len(sent)], f"{type(exc).__name__}: {exc}"[:500]
    if sent:
        QueuedJob.objects.filter(pk__in=sent).delete()
    if failed is not None:
        _backlog.set()
        QueuedJob.objects.filter(pk=failed.pk).update(attempts=failed.attempts + 1,
                                                      last_error=error)
        logger.warning("outbox: %s stays queued (%s)", failed, error)
    return len(sent)


def _publish(jobs: list[QueuedJob], sent: list[Any]) -> None:
    """Publish ``jobs`` over one broker connection; append each published job's id to
    ``sent`` (the caller deletes those)."""
    if app.conf.task_always_eager:
        app.loader.import_default_modules()  # registers the tasks of every app
        for job in jobs:
            app.tasks[job.task].apply(args=job.args, kwargs=job.kwargs, task_id=str(job.id))
            sent.append(job.pk)
        return
    with _broker_connection() as connection:
        for job in jobs:
            app.send_task(job.task, args=job.args, kwargs=job.kwargs, task_id=str(job.id),
                          queue=job.queue or None, connection=connection, retry=False)
            sent.append(job.pk)


@contextlib.contextmanager
def _broker_connection() -> Iterator[Any]:
    """This thread's broker connection, kept between hand-overs: opening one (connect, then
    declare the queue) cost ~9 ms of every write that queues a job, a publish on a kept one
    ~0.8 ms. Any error drops it, and so do a fork and a change of the broker's URL: the
    next hand-over connects anew.

    It tries once: no connection retries (kombu's default retries a stopped Redis for
    seconds), connect and socket operations bounded by ``REDIS_SOCKET_TIMEOUT_SECONDS``.
    """
    owner = (os.getpid(), str(app.conf.broker_url))
    kept: tuple[tuple[int, str], Any] | None = getattr(_kept, "connection", None)
    if kept is None or kept[0] != owner:
        if kept is not None and kept[0][0] == owner[0]:
            _drop(kept[1])  # another broker URL; a parent's connection is left alone (closing
            # it here would shut the socket the parent still uses)
        timeout = settings.REDIS_SOCKET_TIMEOUT_SECONDS
        kept = (owner, app.connection_for_write(transport_options={
            "max_retries": 0, "socket_connect_timeout": timeout, "socket_timeout": timeout}))
        _kept.connection = kept
    try:
        yield kept[1]
    except BaseException:
        _kept.connection = None
        _drop(kept[1])
        raise


def _drop(connection: Any) -> None:
    with contextlib.suppress(Exception):
        connection.release()


def _request_drain() -> None:
    """Ask a worker to drain the outbox (after the broker came back)."""
    try:
        call_guarded(REDIS, _send_drain_task)
    except Exception as exc:  # the beat entry will drain instead
        logger.warning("outbox: could not ask for a drain (%s)", exc)


def _send_drain_task() -> None:
    with _broker_connection() as connection:
        app.send_task(DRAIN_TASK, connection=connection, retry=False)
