"""Who may use the console for which tenant: one membership per Django user.

Platform admins are Django superusers and need no membership (they choose a tenant). A tenant
admin or a reviewer is a Django user with a :class:`ConsoleMembership` naming one tenant and
one role. The table is tenant-owned (row-level security); its read policy also opens the row of
the user named by ``app.console_user_id``, which the console sets for the instant it resolves
a signed-in user's tenant (the same pattern as ``app.api_key_prefix`` for API keys).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tenants.managers import TenantOwnedModel


class ConsoleRole(models.TextChoices):
    """A member's role in the console of their tenant."""

    ADMIN = "admin", "tenant admin"
    REVIEWER = "reviewer", "reviewer"


class ConsoleMembership(TenantOwnedModel):
    """Links a Django user to the one tenant they work for, with a role."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="console_membership")
    role = models.CharField(max_length=16, choices=ConsoleRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user_id} ({self.role})"
