"""Reads of the job outbox."""

from __future__ import annotations

from jobs.models import QueuedJob
from tenants.context import tenant_scope
from tenants.models import Tenant
from tenants.services import system_context


def queued_jobs_count() -> int:
    """Jobs waiting in the outbox, summed over every tenant (each read in its own scope)."""
    total = 0
    for tenant in Tenant.objects.order_by("id"):
        with tenant_scope(system_context(tenant, "job:outbox")):
            total += QueuedJob.objects.count()
    return total
