from __future__ import annotations

from django.apps import AppConfig


class VectorsConfig(AppConfig):
    """Vector backends. Loads the backend configuration at start-up, so an unknown backend
    or a missing setting stops the process with ``INVALID_BACKEND_CONFIG``."""

    name = "vectors"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from vectors.registry import configured

        configured()
