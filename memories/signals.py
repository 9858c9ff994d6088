"""What the memory store tells the apps that derive data from memories (the graph,
summaries). Each signal is sent inside the writing transaction with ``tenant_id`` and
``memory_ids``; a receiver that acts on it defers the work until commit
(``transaction.on_commit`` or the transactional job outbox), so a rolled-back write leaves no
trace. Erasure has its own signal, :data:`memories.services.deletion.memories_erased`."""

from __future__ import annotations

from django.dispatch import Signal

#: New memories, or memories whose content changed (added, updated, merged into).
memories_stored = Signal()
#: Memories soft-deleted (``state = deleted``; restorable until purged).
memories_soft_deleted = Signal()
#: Soft-deleted or archived memories restored.
memories_restored = Signal()
#: Active memories archived (by hand, by decay, merged into another, superseded) or pruned:
#: they leave search, recall, list and the summaries' sources, and keep their content.
memories_withdrawn = Signal()
