"""Reads of the job outbox."""

from __future__ import annotations

from jobs.models import QueuedJob
from tenants.entry import tenant_job
from tenants.models import Tenant


def queued_jobs_count() -> int:
    """Jobs waiting in the outbox, summed over every tenant (each read in its own scope)."""
    total = 0
    for tenant in Tenant.objects.order_by("id"):
        with tenant_job(tenant, "job:outbox"):
            total += QueuedJob.objects.count()
    return total
