from __future__ import annotations

from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    """Memories: the entry model, embeddings, services, selectors, search and the API."""

    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from governance.models import ReviewKind
        from governance.services import register_review_executor
        from memories import settings_sections
        from memories.embedding.readiness import embedding_model_probe, warm_up
        from memories.retrieval.pgvector_backend import build
        from memories.retrieval.semantic import session_ef_search
        from memories.services import lifecycle
        from memories.services.deletion import memories_erased
        from memories.signals import memories_restored, memories_soft_deleted, memories_stored
        from memories.telemetry import StorageSizeCollector
        from memories.tiers.l1 import l1_start
        from memories.tiers.receivers import on_memories_changed
        from memory_project.health import register_required
        from memory_project.metrics import register_scrape_collector
        from memory_project.warmup import register_warmup
        from vectors.registry import register

        register("pgvector", build)
        connection_created.connect(session_ef_search, dispatch_uid="memories.ef_search")
        for name, signal in (("stored", memories_stored), ("soft", memories_soft_deleted),
                             ("restored", memories_restored), ("erased", memories_erased)):
            signal.connect(on_memories_changed, dispatch_uid=f"tiers.{name}")
        register_review_executor(ReviewKind.PROMOTION_BLOCKED, lifecycle.review_promotion_approved)
        register_review_executor(ReviewKind.POLICY_HIT, lifecycle.review_policy_hit_approved)
        register_required("embeddingModel", embedding_model_probe)
        register_warmup("embeddingModel", warm_up)
        register_warmup("memoryL1", l1_start)  # its listener connects before the first read
        register_scrape_collector("memory_storage_size", StorageSizeCollector())
        settings_sections.register()
