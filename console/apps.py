from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The browser console: dashboards, memory explorer, policies, review queue, settings."""

    name = "console"
    default_auto_field = "django.db.models.BigAutoField"
