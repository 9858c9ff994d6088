"""The graph's receivers of the memory store's signals (``memories.signals``,
``memories.services.deletion.memories_erased``): each queues a job in the sender's
transaction and does nothing else, so a memory write never waits for the graph."""

from __future__ import annotations

import uuid
from typing import Any

from graph.services import graph_queue_change, graph_queue_extraction
from tenants.context import require_context


def on_stored(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """New or changed content: extract again."""
    graph_queue_extraction(require_context(), memory_ids=memory_ids)


def on_erased(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """Erased (hard delete, purge, erasure by identifier): remove their graph data."""
    graph_queue_change(require_context(), op="delete_memories", memory_ids=memory_ids)


def on_soft_deleted(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """Soft-deleted: mark their graph data deleted (purged later)."""
    graph_queue_change(require_context(), op="soft_delete_memories", memory_ids=memory_ids)


def on_restored(*, memory_ids: list[uuid.UUID], **_: Any) -> None:
    """Restored: their graph data is live again."""
    graph_queue_change(require_context(), op="restore_memories", memory_ids=memory_ids)
