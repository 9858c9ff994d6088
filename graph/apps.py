from __future__ import annotations

from django.apps import AppConfig


class GraphConfig(AppConfig):
    """Registered now so that later work only adds models and migrations."""

    name = "graph"
    default_auto_field = "django.db.models.BigAutoField"
