"""The change history of memories: one :class:`MemoryHistory` row per add, update, delete,
restore, archive, prune, merge and erase, written in the transaction of the change.

Erasure (right to erasure, GDPR art. 17): :func:`history_erase` blanks the content and
metadata of every history row of the erased memories and appends an ``erase`` row; who did
what and when stays, what the memory said does not.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from governance.services import review_items_scrub
from memories.models import HistoryAction, Memory, MemoryHistory
from tenants.context import TenantContext


def history_row(
    ctx: TenantContext,
    memory_id: uuid.UUID,
    action: HistoryAction | str,
    *,
    old_content: str | None = None,
    new_content: str | None = None,
    old_metadata: dict[str, Any] | None = None,
    new_metadata: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> MemoryHistory:
    """An unsaved history row of ``memory_id`` by ``ctx.principal`` (save with
    :func:`history_record`). ``details`` must not hold content: ids, counts, reasons only."""
    return MemoryHistory(
        tenant_id=ctx.tenant_id, memory_id=memory_id, action=str(action),
        old_content=old_content, new_content=new_content, old_metadata=old_metadata,
        new_metadata=new_metadata, actor=ctx.principal, details=details or {},
    )


def history_record(rows: Iterable[MemoryHistory]) -> int:
    """Insert history rows in one statement; the caller's transaction makes them atomic with
    the change. Returns how many were written."""
    rows = list(rows)
    if rows:
        MemoryHistory.objects.bulk_create(rows)
    return len(rows)


def history_added(ctx: TenantContext, memories: Iterable[Memory]) -> int:
    """``add`` rows for newly stored memories (content and metadata as stored)."""
    return history_record(
        history_row(ctx, m.pk, HistoryAction.ADD, new_content=m.content,
                    new_metadata=m.metadata, details={"layer": m.layer})
        for m in memories
    )


def history_erase(ctx: TenantContext, memory_ids: list[uuid.UUID], *, reason: str) -> int:
    """Blank old/new content and metadata of every history row of ``memory_ids`` and append
    one ``erase`` row each (``details.reason``: ``"delete"``, ``"identifier"``, ``"purge"``).

    Returns:
        The number of earlier rows blanked.
    """
    if not memory_ids:
        return 0
    blanked = MemoryHistory.objects.filter(memory_id__in=memory_ids).update(
        old_content=None, new_content=None, old_metadata=None, new_metadata=None,
        erased_at=timezone.now(),
    )
    rows = [history_row(ctx, pk, HistoryAction.ERASE, details={"reason": reason})
            for pk in memory_ids]
    for row in rows:
        row.erased_at = timezone.now()
    history_record(rows)
    review_items_scrub(ctx, memory_ids=memory_ids)
    return blanked


def history_texts(memory_ids: list[uuid.UUID]) -> set[str]:
    """Every content the history of ``memory_ids`` holds (before an erasure blanks it)."""
    texts: set[str] = set()
    for old, new in MemoryHistory.objects.filter(memory_id__in=memory_ids).values_list(
            "old_content", "new_content"):
        texts.update(t for t in (old, new) if t)
    return texts


def history_list(memory_id: uuid.UUID) -> list[MemoryHistory]:
    """The active tenant's history rows of ``memory_id``, oldest first."""
    return list(MemoryHistory.objects.filter(memory_id=memory_id).order_by("created_at", "id"))
