from __future__ import annotations

from django.apps import AppConfig


class SummariesConfig(AppConfig):
    """Registered now so that later work only adds models and migrations."""

    name = "summaries"
    default_auto_field = "django.db.models.BigAutoField"
