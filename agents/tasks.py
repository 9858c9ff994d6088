"""Celery tasks of the agents app: thin wrappers that enter the tenant's scope and call a
service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from agents.conversations import INGEST_TASK, conversation_ingest_job
from agents.services import EXTRACT_TASK, agent_learnings_store
from memories.tasks import TASK_OPTIONS
from tenants.entry import tenant_task


@shared_task(name=EXTRACT_TASK, **TASK_OPTIONS)
def extract_learnings(tenant_id: str, *, identifiers: dict[str, str],
                      transcript: str) -> dict[str, Any]:
    """Post-run extraction for one agent+project (``agents.services.agent_learnings_store``).

    Returns ``{"stored": n, "known": n, "refused": n, "fallback": bool}``.
    """
    def body(ctx: Any) -> dict[str, Any]:
        outcome = agent_learnings_store(ctx, identifiers=identifiers, transcript=transcript)
        return {"stored": len(outcome.stored), "known": outcome.known,
                "refused": outcome.refused, "fallback": outcome.fallback}

    return tenant_task(tenant_id, "agent-extraction", body)


@shared_task(name=INGEST_TASK, **TASK_OPTIONS)
def ingest_conversation(tenant_id: str, *, messages: list[dict[str, Any]], layer: str,
                        identifiers: dict[str, str], reference_time: str) -> dict[str, Any]:
    """Conversation ingestion (``agents.conversations.conversation_ingest``).

    Returns ``{"added", "superseded", "known", "refused", "fallback"}``.
    """
    return tenant_task(tenant_id, "conversation-ingestion", conversation_ingest_job,
                       messages=messages, layer=layer, identifiers=identifiers,
                       reference_time=reference_time)
