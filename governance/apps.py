from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    """Registered now so that later work only adds models and migrations."""

    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"
