"""Celery tasks of the summaries app: thin wrappers that enter the tenant's scope and call a
service. The beat entry "summaries" (``memory_project/schedule.py``) fans out one batch per
active tenant every minute."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from jobs.services import job_enqueue
from memories.tasks import TASK_OPTIONS
from summaries.services import (
    REGENERATE_TASK,
    summaries_mark_due,
    summaries_run_batch,
    summary_regenerate,
)
from tenants.context import TenantContext
from tenants.entry import each_tenant, tenant_job, tenant_task

BATCH_TASK = "summaries.tenant_batch"


@shared_task(name="summaries.run_due", **TASK_OPTIONS)
def run_due() -> dict[str, int]:
    """Queue one summary batch per active tenant."""
    tenants = list(each_tenant())
    for tenant in tenants:
        with tenant_job(tenant, "summaries") as ctx:
            job_enqueue(ctx, task=BATCH_TASK, args=[str(tenant.id)])
    return {"tenants": len(tenants)}


def _batch(ctx: TenantContext) -> dict[str, Any]:
    marked = summaries_mark_due(ctx)
    return {"marked": marked, **summaries_run_batch(ctx)}


@shared_task(name=BATCH_TASK, **TASK_OPTIONS)
def tenant_batch(tenant_id: str) -> dict[str, Any]:
    """Mark a tenant's due scopes pending and regenerate those whose time has come."""
    return tenant_task(tenant_id, "summaries", _batch)


@shared_task(name=REGENERATE_TASK, **TASK_OPTIONS)
def regenerate_scope(tenant_id: str, scope_id: str) -> dict[str, Any]:
    """Regenerate one scope at once (high priority: invalidation, a manual request)."""
    return tenant_task(tenant_id, "summaries", lambda ctx: summary_regenerate(
        ctx, scope_id=scope_id))
