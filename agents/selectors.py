"""Reads of seed 003's agent memories (``agents.records`` says how they are stored)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from agents.records import MEMORY_CAP, SHARED_USER, validate_agent_name, validate_project_id
from memories.models import UNSERVED_COLUMNS, Memory
from memories.restrictions import check_layer
from memories.retrieval.partition import layer_queryset, resolve_identifiers
from tenants.context import TenantContext
from tenants.layers import Layer, LayerIdentifiers


def agent_identifiers(ctx: TenantContext, *, agent_name: Any, project_id: Any,
                      user_id: Any = None) -> LayerIdentifiers:
    """The agent-layer identifiers of ``agent_name``'s memories in ``project_id``, resolved
    for the caller: ``userId`` is the caller's (or its key's pinned one) when given, else
    :data:`agents.records.SHARED_USER`.

    Raises:
        InvalidInput: a malformed agent name, project id or user id.
        MissingIdentifier: no project id.
        Unauthorized: the caller's key may not use the agent layer, or is pinned to other
            identifiers.
    """
    check_layer(ctx, Layer.AGENT)
    raw = LayerIdentifiers.from_mapping({
        "agentId": validate_agent_name(agent_name),
        "projectId": validate_project_id(project_id),
        "userId": user_id})  # "" is refused, never read as "no user"
    resolved = resolve_identifiers(ctx, raw)
    return resolved.with_values(userId=SHARED_USER)


def agent_memories_queryset(identifiers: LayerIdentifiers) -> QuerySet[Memory]:
    """Every active memory of the agent+project ``identifiers`` name (already resolved)."""
    return layer_queryset(Layer.AGENT, identifiers).filter(project_id=identifiers.projectId)


def agent_memory_list(ctx: TenantContext, *, agent_name: Any, project_id: Any,
                      user_id: Any = None) -> list[Memory]:
    """The :data:`~agents.records.MEMORY_CAP` (50) most recent memories of ``agent_name`` in
    ``project_id``, newest first (seed 003 "Retrieve memories for an agent and project" and
    "Memory cap enforcement": the cap applies on read, older memories stay stored).

    Raises:
        As :func:`agent_identifiers`.
    """
    identifiers = agent_identifiers(ctx, agent_name=agent_name, project_id=project_id,
                                    user_id=user_id)
    rows = agent_memories_queryset(identifiers).order_by("-id").defer(*UNSERVED_COLUMNS)
    return list(rows[:MEMORY_CAP])
