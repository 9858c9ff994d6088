from __future__ import annotations

from django.apps import AppConfig


class GraphConfig(AppConfig):
    """The knowledge graph. On start it listens to the memory store: a stored or changed
    memory queues its extraction, a deleted, soft-deleted or restored one queues the same
    change to its graph data (``graph.services``), in the memory write's transaction; and it
gives search its graph expansion (``graph.expansion``)."""

    name = "graph"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from graph import receivers
        from graph.expansion import expand
        from memories.retrieval.expansion import register_expander
        from memories.services.deletion import memories_erased
        from memories.signals import memories_restored, memories_soft_deleted, memories_stored

        memories_stored.connect(receivers.on_stored, dispatch_uid="graph.stored")
        memories_erased.connect(receivers.on_erased, dispatch_uid="graph.erased")
        memories_soft_deleted.connect(receivers.on_soft_deleted, dispatch_uid="graph.soft")
        memories_restored.connect(receivers.on_restored, dispatch_uid="graph.restored")
        register_expander(expand)
