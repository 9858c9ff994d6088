from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    """Policies, PII handling and the review queue (the audit and security logs are in tenants)."""

    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance.services import remote_redaction
        from llm.privacy import register_redactor

        register_redactor(remote_redaction)
