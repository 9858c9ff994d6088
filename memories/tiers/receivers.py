"""The tiers' receivers of the memory store's signals (``memories.signals``,
``memories.services.deletion.memories_erased``), sent in the writer's transaction."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memories.tiers.l1 import l1_forget
from memories.tiers.l3 import l3_queue
from tenants.context import require_context


def on_memories_changed(*, memory_ids: list[Any], **_: Any) -> None:
    """Stored, changed, soft-deleted, restored or erased memories: queue their sync to L3
    (nothing with pgvector), and drop them from this process's L1 as soon as the
    transaction commits (the other processes drop them on the commit's notification,
    ``memories.tiers.l1``; this one need not wait for it)."""
    ctx = require_context()
    l3_queue(ctx, memory_ids)
    keys = [(str(ctx.tenant_id), str(i)) for i in memory_ids]
    transaction.on_commit(lambda: l1_forget(keys))
