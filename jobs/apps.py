from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    """The outbox of Celery jobs: work is kept in PostgreSQL until the broker has it."""

    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"
