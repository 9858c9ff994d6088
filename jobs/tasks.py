"""Celery task of the job outbox (thin: calls the service)."""

from __future__ import annotations

from celery import shared_task

from jobs import services


@shared_task(name=services.DRAIN_TASK, acks_late=True, reject_on_worker_lost=True)
def outbox_drain() -> dict[str, int]:
    """Send the jobs queued while the broker was unreachable (``jobs.services.outbox_drain``).

    Returns ``{"sent": n, "queued": m}``.
    """
    return services.outbox_drain()
