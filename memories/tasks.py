"""Celery tasks: thin wrappers that enter a tenant's scope and call a service.

``run_job`` fans a periodic job out to one ``tenant_job`` per active tenant, through the job
outbox (``jobs.services.job_enqueue``: a job the broker cannot take now is sent later, not
lost); each ``tenant_job`` runs inside that tenant's scope (row-level security applies) and
is idempotent, acknowledged late and re-queued if its worker dies, so a retry is always safe.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from celery import shared_task
from django.db import OperationalError

from jobs.services import job_enqueue
from memories.retrieval.semantic import pgvector_settings
from memories.services.planner_statistics import statistics_refresh
from memories.services.reembed import memories_reembed
from memories.services.tenant_vector_index import tenant_indexes_refresh
from memories.tiers.l3 import l3_sync as l3_sync_memories
from tenants.entry import each_tenant, tenant_task
from tenants.entry import tenant_job as entry_job

logger = logging.getLogger(__name__)

#: job name → "module:function" taking a TenantContext and returning a dict of counts.
JOBS: dict[str, str] = {
    "decay": "memories.services.maintenance:decay_run",
    "purge": "memories.services.maintenance:purge_deleted",
    "consolidate": "memories.services.maintenance:consolidate",
    "prune": "memories.services.maintenance:prune_by_feedback",
    "sessions": "memories.services.lifecycle:sessions_cleanup",
    "storage_size": "memories.telemetry:storage_size_refresh",
}

TASK_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "max_retries": 5,
}


def _resolve(job: str) -> Any:
    module, _, name = JOBS[job].partition(":")
    return getattr(importlib.import_module(module), name)


@shared_task(name="memories.run_job", bind=True, **TASK_OPTIONS)
def run_job(self: Any, job: str) -> dict[str, int]:
    """Queue ``job`` for every active tenant, on the queue this task came from.

    Returns ``{"tenants": n}``.

    Raises:
        KeyError: unknown job name.
    """
    _resolve(job)
    queue = (self.request.delivery_info or {}).get("routing_key") or ""
    tenants = list(each_tenant())
    for tenant in tenants:
        with entry_job(tenant, f"job:{job}") as ctx:
            job_enqueue(ctx, task="memories.tenant_job", args=[job, str(tenant.id)],
                        queue=queue)
    return {"tenants": len(tenants)}


@shared_task(name="memories.tenant_job", **TASK_OPTIONS)
def tenant_job(job: str, tenant_id: str) -> dict[str, Any]:
    """Run ``job`` for one tenant inside its scope; a missing or inactive tenant is skipped."""
    result = tenant_task(tenant_id, f"job:{job}", _resolve(job))
    logger.info("job %s for tenant %s: %s", job, tenant_id, result)
    return result


@shared_task(name="memories.tenant_vector_indexes")
def tenant_vector_indexes() -> dict[str, Any]:
    """Build and drop the large tenants' own HNSW indexes
    (``memories.services.tenant_vector_index``); the owner role's DDL, one run at a time.
    Returns the index names built, dropped and kept, or why the run was skipped."""
    run = tenant_indexes_refresh(pgvector_settings(), say=logger.info)
    return {"built": run.built, "dropped": run.dropped, "kept": run.kept,
            "skipped": run.skipped}


@shared_task(name="memories.planner_statistics")
def planner_statistics() -> dict[str, Any]:
    """``ANALYZE`` the memory table when a tenant outgrew the planner's statistics
    (``memories.services.planner_statistics``); the owner role's, one run at a time.
    Returns whether it analyzed, for which tenants (memories, estimate), or why not."""
    run = statistics_refresh()
    return {"analyzed": run.analyzed, "seconds": round(run.seconds, 3), "skipped": run.skipped,
            "stale": [{"tenant": str(e.tenant_id), "rows": e.rows,
                       "estimate": round(e.estimate, 1)} for e in run.stale]}


@shared_task(name="memories.memory_reembed", **TASK_OPTIONS)
def memory_reembed(tenant_id: str, memory_ids: list[str]) -> dict[str, Any]:
    """Re-embed a batch of one tenant's memories with the current model
    (``memories.services.reembed.memories_reembed``: idempotent, exactly once in effect even
    when the message is delivered again after a worker died)."""
    return tenant_task(tenant_id, "job:reembed", memories_reembed, memory_ids=memory_ids)


@shared_task(name="memories.l3_sync", **TASK_OPTIONS)
def l3_sync(tenant_id: str, memory_ids: list[str]) -> dict[str, Any]:
    """Bring L3 (a vector backend other than pgvector) in line with L2 for a batch of one
    tenant's memories (``memories.tiers.l3.l3_sync``: idempotent; an unavailable backend
    leaves the batch in the outbox)."""
    return tenant_task(tenant_id, "job:l3_sync", l3_sync_memories, memory_ids=memory_ids)
