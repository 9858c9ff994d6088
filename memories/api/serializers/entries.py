"""The body of ``POST /api/v1/memories/batch-get`` and the entries it returns (seed 004)."""

from __future__ import annotations

from typing import Any

import numpy as np
from rest_framework import serializers

from memories.api.serializers.representation import iso_datetime
from memories.selectors.entries import MAX_BATCH_GET
from memories.tiers.entries import MemoryEntry
from memory_project.validation import StrictBooleanField, StrictCharField


class BatchGetSerializer(serializers.Serializer[Any]):
    """``{"ids": [...], "includeVector": false}``: 1..100 memory ids (strings)."""

    ids = serializers.ListField(child=StrictCharField(max_length=64, trim_whitespace=False),
                                min_length=1, max_length=MAX_BATCH_GET)
    includeVector = StrictBooleanField(default=False)


def entry_json(entry: MemoryEntry, *, include_vector: bool = False) -> dict[str, Any]:
    """An entry as the API returns it: seed 004's fields in camelCase (``strength``,
    ``lastReview``, ``taskId``, ...), plus layer, identifiers, kind, scope, state and
    version; ``vector`` (a list of floats) only with ``include_vector``."""
    body: dict[str, Any] = {
        "id": entry.id, "taskId": entry.task_id, "sessionId": entry.session_id,
        "content": entry.content, "metadata": entry.metadata, "strength": entry.strength,
        "decayRate": entry.decay_rate, "lastReview": iso_datetime(entry.last_review),
        "createdAt": iso_datetime(entry.created_at), "layer": entry.layer,
        "identifiers": entry.identifiers, "kind": entry.kind, "scope": entry.scope,
        "state": entry.state, "version": entry.version,
    }
    if include_vector and entry.vector is not None:
        body["vector"] = np.frombuffer(entry.vector, dtype=np.float32).tolist()
    return body
