from __future__ import annotations

from django.apps import AppConfig


class TenantsConfig(AppConfig):
    """Tenants (companies), their org → team → project hierarchy and API keys."""

    name = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from tenants.rls import grant_app_role

        post_migrate.connect(grant_app_role, sender=self)
