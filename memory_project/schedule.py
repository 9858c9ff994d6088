"""Every periodic job, in one place. Stored in django-celery-beat's tables (editable in the
admin under "Periodic tasks"); ``sync_beat_schedule`` adds missing entries and never
overwrites an admin's change.

An entry with ``"job"`` runs ``memories.run_job`` with that job name (see
``memories.tasks.JOBS``), which fans out to one task per active tenant; an entry with
``"task"`` runs that task with its ``"args"`` (none by default).
"""

from __future__ import annotations

import json
from typing import Any

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # Seed 001 "Decay": relevance(t) = initial × (1 − rate)^days; below the threshold a
    # memory is archived, never deleted. Daily at 03:10 UTC.
    "memory decay and archival": {"job": "decay", "crontab": {"minute": "10", "hour": "3"}},
    # Seed 001 "Session Memory Cleanup": close idle sessions, promote important memories,
    # delete session memories when autoDelete is on. Every 15 minutes.
    "session cleanup and promotion": {"job": "sessions", "every_seconds": 900},
    # Soft-deleted memories past the tenant's retention are erased. Daily at 03:40 UTC.
    "purge deleted memories": {"job": "purge", "crontab": {"minute": "40", "hour": "3"}},
    # Seed 001 "Consolidation": merge near-duplicates in the configured layers. Nightly.
    "memory consolidation": {"job": "consolidate", "crontab": {"minute": "20", "hour": "4"}},
    # Seed 001 "Memory-R1 Pruning": memories that keep earning negative reward leave the
    # search index. Hourly.
    "feedback pruning": {"job": "prune", "crontab": {"minute": "5"}},
    # memory_storage_size{layer} for /metrics: memories by layer, counted per tenant.
    # Every 5 minutes.
    "storage size metrics": {"job": "storage_size", "every_seconds": 300},
    # Large tenants get an HNSW index of their own, and lose it once gone or small
    # (memories.services.tenant_vector_index). Hourly.
    "tenant vector indexes": {"task": "memories.tenant_vector_indexes",
                              "crontab": {"minute": "25"}},
    # A tenant that outgrew the planner's statistics of the memory table (new, or filled
    # since the last ANALYZE) gets the table analyzed (memories.services.planner_statistics).
    # Every minute; an idle table costs one catalog read.
    "planner statistics": {"task": "memories.planner_statistics", "every_seconds": 60},
    # Jobs queued while the broker (Redis) was unreachable are handed over once it is back
    # (jobs.services). Every 30 seconds.
    "send queued jobs": {"task": "jobs.outbox_drain", "every_seconds": 30},
    # The platform's security log: which lookups of missing ids named another tenant's
    # object (tenants.audit.security_probes_classify). Every 5 minutes.
    "classify security probes": {"task": "governance.security_probes_classify",
                                 "every_seconds": 300},
    # Seed 001 "Automated Graph Backups": a versioned copy of every tenant's graph snapshot,
    # kept 7 days (GRAPH_BACKUP_RETENTION_DAYS). Every 6 hours.
    "graph backups": {"task": "graph.run_job", "args": ["backup"], "every_seconds": 6 * 3600},
    # Seed 001 "Periodic integrity scan": orphaned graph rows are audited and removed. Daily.
    "graph integrity scan": {"task": "graph.run_job", "args": ["integrity"],
                             "crontab": {"minute": "50", "hour": "3"}},
    # Seed 001 "Soft delete with deferred cleanup": graph data of memories soft-deleted past
    # the tenant's retention is removed. Daily, after the memories' own purge.
    "purge deleted graph data": {"task": "graph.run_job", "args": ["purge"],
                                 "crontab": {"minute": "55", "hour": "3"}},
    # Graph partitions a failed publication left unpublished are published. Every minute.
    "graph checkpoint": {"task": "graph.checkpoint", "every_seconds": 60},
    # Seed 001 "Summary Configuration" and "Summarization batching": every minute, scopes
    # whose time or change trigger fired are marked pending, and pending ones older than the
    # tenant's batch window (5 minutes) are regenerated, by priority and layer.
    "summaries": {"task": "summaries.run_due", "every_seconds": 60},
}


def periodic_task_names() -> list[str]:
    """The tasks the beat starts (``memories.run_job`` for the ``"job"`` entries), sorted."""
    return sorted({str(entry.get("task", "memories.run_job")) for entry in BEAT_SCHEDULE.values()})


def periodic_routes(queue: str) -> dict[str, dict[str, str]]:
    """Celery's ``task_routes``: every task of :func:`periodic_task_names` to ``queue``.
    ``memories.run_job`` queues its per-tenant jobs on the queue it came from, so they follow.
    An admin's queue on an entry (``PeriodicTask.queue``) still wins."""
    return {name: {"queue": queue} for name in periodic_task_names()}


def sync_beat_schedule() -> list[str]:
    """Create the periodic tasks of ``BEAT_SCHEDULE`` that do not exist yet.

    Returns:
        The names created.
    """
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    created = []
    for name, entry in BEAT_SCHEDULE.items():
        if PeriodicTask.objects.filter(name=name).exists():
            continue
        schedule: dict[str, Any] = {}
        if "every_seconds" in entry:
            schedule["interval"], _ = IntervalSchedule.objects.get_or_create(
                every=entry["every_seconds"], period=IntervalSchedule.SECONDS)
        else:
            schedule["crontab"], _ = CrontabSchedule.objects.get_or_create(
                **{"day_of_week": "*", "day_of_month": "*", "month_of_year": "*",
                   "timezone": "UTC", **entry["crontab"]})
        if "task" in entry:
            PeriodicTask.objects.create(name=name, task=entry["task"],
                                        args=json.dumps(entry.get("args", [])), **schedule)
        else:
            PeriodicTask.objects.create(name=name, task="memories.run_job",
                                        args=json.dumps([entry["job"]]), **schedule)
        created.append(name)
    return created
