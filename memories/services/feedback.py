"""Feedback on retrieved memories (Memory-R1): rewards in [-1, 1] recorded per memory."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from memories.models import Memory, MemoryFeedback, State
from memory_project.errors import (
    InvalidInput,
    MemoryNotFound,
)
from memory_project.validation import unstorable_text
from tenants.audit import audit_cross_tenant_probe, parse_uuid
from tenants.context import TenantContext

MAX_FEEDBACK_IDS = 100


@dataclass(frozen=True)
class FeedbackResult:
    """What one feedback call recorded: per memory its running count and mean reward."""

    memories: list[Memory]

    def as_dict(self) -> dict[str, Any]:
        return {"recorded": len(self.memories), "memories": [
            {"id": str(m.pk), "feedbackCount": m.feedback_count,
             "meanReward": m.reward_sum / m.feedback_count if m.feedback_count else None}
            for m in self.memories]}


def validate_feedback(memory_ids: Any, reward: Any, query: Any) -> tuple[list[uuid.UUID],
                                                                       float, str]:
    """Check a feedback call: 1..100 memory ids (UUIDs; repeats count once), a finite reward
    in [-1, 1], an optional query string (at most ``MEMORY_MAX_QUERY_LENGTH``, storable).

    Raises:
        InvalidInput: anything else (400).
    """
    operation = "memory.feedback"
    if not isinstance(memory_ids, list) or not 1 <= len(memory_ids) <= MAX_FEEDBACK_IDS:
        raise InvalidInput(f"memoryIds must be a list of 1..{MAX_FEEDBACK_IDS} memory ids.",
                           operation=operation)
    ids: list[uuid.UUID] = []
    for raw in memory_ids:
        pk = parse_uuid(raw) if isinstance(raw, str) else None
        if pk is None:
            raise InvalidInput("memoryIds must hold memory ids (UUID strings).",
                               operation=operation)
        if pk not in ids:
            ids.append(pk)
    if (isinstance(reward, bool) or not isinstance(reward, (int, float))
            or not math.isfinite(reward) or not -1.0 <= reward <= 1.0):
        raise InvalidInput("reward must be a number within [-1, 1].", operation=operation,
                           details={"min": -1, "max": 1})
    if query is None:
        query = ""
    if not isinstance(query, str) or unstorable_text(query):
        raise InvalidInput("query must be a string without NUL characters.",
                           operation=operation)
    if len(query) > settings.MEMORY_MAX_QUERY_LENGTH:
        raise InvalidInput(f"query is longer than {settings.MEMORY_MAX_QUERY_LENGTH} "
                           "characters.", operation=operation)
    return ids, float(reward), query


def memory_feedback_record(ctx: TenantContext, *, memory_ids: Any, reward: Any,
                           query: Any = None) -> FeedbackResult:
    """Record a reward for the memories that took part in a task outcome (seed 001
    "Memory-R1 Pruning"): one :class:`MemoryFeedback` row per memory and, in one UPDATE,
    ``feedback_count + 1`` and ``reward_sum + reward`` on each. Deleted memories do not take
    feedback; archived and pruned ones do.

    All or nothing: when any id is not a (non-deleted) memory of the caller's tenant, nothing
    is recorded and the answer does not say which id it was (foreign ids are audited).

    Raises:
        InvalidInput: see :func:`validate_feedback`.
        MemoryNotFound: an unknown, deleted or foreign id (404).
    """
    ids, value, text = validate_feedback(memory_ids, reward, query)
    with transaction.atomic():
        found = set(Memory.objects.select_for_update().filter(pk__in=ids)
                    .exclude(state=State.DELETED).order_by("pk").values_list("pk", flat=True))
        if len(found) == len(ids):
            MemoryFeedback.objects.bulk_create(
                MemoryFeedback(tenant_id=ctx.tenant_id, memory_id=pk, reward=value, query=text,
                               actor=ctx.principal) for pk in ids
            )
            Memory.objects.filter(pk__in=ids).update(
                feedback_count=F("feedback_count") + 1, reward_sum=F("reward_sum") + value)
            by_id = {m.pk: m for m in Memory.objects.filter(pk__in=ids)
                     .only("pk", "feedback_count", "reward_sum")}
            return FeedbackResult(memories=[by_id[pk] for pk in ids])
    for pk in ids:  # outside the atomic block, so that the audit entries stay
        if pk not in found:
            audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    raise MemoryNotFound("One or more memories were not found; nothing was recorded.",
                         operation="memory.feedback")
