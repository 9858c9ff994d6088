"""The summaries' receivers of the memory store's signals (``memories.signals``,
``memories.services.deletion.memories_erased``): bookkeeping in the sender's transaction
(a counter, an invalidation, a queued job), never a generation."""

from __future__ import annotations

import uuid
from typing import Any

from summaries.services import (
    summaries_note_removed,
    summaries_note_stored,
    summaries_note_withdrawn,
)
from tenants.context import require_context


def on_stored(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """New, changed or merged-into memories: count the change; a cited one invalidates."""
    summaries_note_stored(require_context(), memory_ids=memory_ids)


def on_restored(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """Restored memories are sources again: count the change."""
    summaries_note_stored(require_context(), memory_ids=memory_ids)


def on_withdrawn(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """Archived or pruned: their scopes' sources changed."""
    summaries_note_withdrawn(require_context(), memory_ids=memory_ids)


def on_soft_deleted(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """Soft-deleted: summaries citing them are invalidated and regenerated first."""
    summaries_note_removed(require_context(), memory_ids=memory_ids, erased=False)


def on_erased(*, memory_ids: list[uuid.UUID], rows: list[dict[str, Any]] | None = None,
              **_: Any) -> None:
    """Erased: their sentences leave every summary now; those summaries are regenerated; a
    scope (or personalized summary) left without any memory is forgotten with its summaries
    (its identifiers name the erased subject)."""
    summaries_note_removed(require_context(), memory_ids=memory_ids, erased=True,
                           rows=rows or [])
