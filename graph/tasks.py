"""Celery tasks of the knowledge graph: thin wrappers that enter the tenant's scope and call a
service. Periodic ones (``memory_project/schedule.py``) fan out one task per active tenant
through :func:`run_job`."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from graph import maintenance
from graph.services import APPLY_TASK, EXTRACT_TASK, graph_apply, graph_extract
from jobs.services import job_enqueue
from memories.tasks import TASK_OPTIONS
from tenants.entry import each_tenant, tenant_job, tenant_task

logger = logging.getLogger(__name__)

#: Per-tenant periodic jobs: name → service taking a TenantContext.
JOBS = {
    "backup": maintenance.graph_backup,
    "integrity": maintenance.graph_integrity_job,
    "purge": maintenance.graph_purge_job,
}
#: Graph writes may wait for the writer: retried like a failed database call.
GRAPH_TASK_OPTIONS: dict[str, Any] = {**TASK_OPTIONS,
                                      "autoretry_for": (*TASK_OPTIONS["autoretry_for"],
                                                        maintenance.RETRYABLE)}


@shared_task(name=EXTRACT_TASK, **GRAPH_TASK_OPTIONS)
def extract_memories(tenant_id: str, memory_ids: list[str]) -> dict[str, Any]:
    """Extract entities and relations of a batch of memories (``graph_extract``)."""
    return tenant_task(tenant_id, "graph-extraction", lambda ctx: graph_extract(
        ctx, memory_ids=memory_ids))


@shared_task(name=APPLY_TASK, **GRAPH_TASK_OPTIONS)
def apply(tenant_id: str, op: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Apply a queued change to a tenant's graph (deletion, soft deletion, restore)."""
    return tenant_task(tenant_id, "graph", lambda ctx: graph_apply(ctx, op=op, payload=payload))


@shared_task(name="graph.run_job", **TASK_OPTIONS)
def run_job(job: str) -> dict[str, int]:
    """Queue graph job ``job`` (:data:`JOBS`) for every active tenant.

    Raises:
        KeyError: unknown job.
    """
    JOBS[job]
    tenants = list(each_tenant())
    for tenant in tenants:
        with tenant_job(tenant, f"graph:{job}") as ctx:
            job_enqueue(ctx, task="graph.tenant_job", args=[job, str(tenant.id)])
    return {"tenants": len(tenants)}


@shared_task(name="graph.tenant_job", **GRAPH_TASK_OPTIONS)
def tenant_graph_job(job: str, tenant_id: str) -> dict[str, Any]:
    """Run graph job ``job`` for one tenant in its scope."""
    result = tenant_task(tenant_id, f"graph:{job}", JOBS[job])
    logger.info("graph job %s for tenant %s: %s", job, tenant_id, result)
    return result


@shared_task(name="graph.checkpoint", **GRAPH_TASK_OPTIONS)
def checkpoint() -> dict[str, int]:
    """Publish the partitions a failed publication left dirty (``graph.store``)."""
    return maintenance.graph_checkpoint()
