from __future__ import annotations

from collections.abc import Callable

from django.apps import AppConfig

from tenants.context import TenantContext


class GovernanceConfig(AppConfig):
    """Policies, PII handling, the review queue, the audit and security logs."""

    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from llm.privacy import register_redactor

        register_redactor(remote_redaction)


def remote_redaction(ctx: TenantContext) -> Callable[[str], str] | None:
    """``text -> text`` redacting PII when an enabled policy of the tenant redacts or denies
    it (what a remote language model may see); ``None`` otherwise."""
    from governance.models import PiiHandling
    from governance.pii_guard import redact_for
    from governance.services import policies_in_force

    if not any(p.enabled and p.pii_handling in (PiiHandling.REDACT, PiiHandling.DENY)
               for p in policies_in_force(ctx)):
        return None
    return lambda text: redact_for(ctx, text)[0]
