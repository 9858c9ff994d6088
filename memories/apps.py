from __future__ import annotations

from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    """Memories: the entry model, embeddings, services, selectors, search and the API."""

    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"
