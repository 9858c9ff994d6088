from __future__ import annotations

from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    """Memories: the entry model, embeddings, services, selectors, search and the API."""

    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories.vector_backend import build
        from vectors.registry import register

        register("pgvector", build)
