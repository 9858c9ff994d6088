"""A memory entry as the storage tiers hold it (seed 004 "Memory entry structure").

Seed 004's fields map onto the memory model (``docs/storage-tiers.md``): ``ID`` → ``id``,
``TaskID`` → ``task_id``, ``SessionID`` → ``session_id``, ``Content`` → ``content``,
``Vector`` → ``embedding``, ``Metadata`` → ``metadata``, ``Strength`` → ``confidence`` (its
effective value decays by ``decay_rate`` per day from ``LastReview``,
``memories.retrieval.confidence``), ``LastReview`` → ``last_confirmed_at`` (else
``created_at``; a consolidation merge moves it), ``CreatedAt`` → ``created_at``. An entry
also carries what an access check and the API need: layer, identifiers, kind, scope, state
and version.

Entries are immutable snapshots: the L1 cache shares them between requests and threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memories.models import Memory

#: Columns an entry is built from (with ``embedding`` when the vector is wanted).
ENTRY_COLUMNS = (
    "id", "task_id", "session_id", "content", "metadata", "confidence", "decay_rate",
    "last_confirmed_at", "created_at", "layer", "agent_id", "user_id", "project_id",
    "team_id", "org_id", "company_id", "kind", "scope", "state", "version")


@dataclass(frozen=True)
class MemoryEntry:
    """One memory entry (seed 004). ``vector`` holds the embedding as float32 bytes
    (``None`` when it was not read); ``strength`` is in [0, 1], ``decay_rate`` per day."""

    id: str
    task_id: str | None
    session_id: str | None
    content: str
    vector: bytes | None
    metadata: dict[str, Any]
    strength: float
    decay_rate: float
    last_review: datetime
    created_at: datetime
    layer: str
    identifiers: dict[str, str]
    kind: str
    scope: str
    state: str
    version: int


def entry_of(memory: Memory, *, with_vector: bool) -> MemoryEntry:
    """The entry of a memory row loaded with :data:`ENTRY_COLUMNS` (and ``embedding`` when
    ``with_vector``)."""
    vector = (np.asarray(memory.embedding, dtype=np.float32).tobytes()
              if with_vector and memory.embedding is not None else None)
    return MemoryEntry(
        id=str(memory.pk), task_id=memory.task_id, session_id=memory.session_id,
        content=memory.content, vector=vector, metadata=dict(memory.metadata or {}),
        strength=float(memory.confidence), decay_rate=float(memory.decay_rate),
        last_review=memory.last_confirmed_at or memory.created_at,
        created_at=memory.created_at, layer=memory.layer,
        identifiers=dict(memory.identifiers), kind=memory.kind, scope=memory.scope,
        state=memory.state, version=int(memory.version))
