from __future__ import annotations

from django.apps import AppConfig


class SummariesConfig(AppConfig):
    """Layer summaries and context assembly. On start it registers the ``summaries`` settings
    section and listens to the memory store (``summaries.receivers``)."""

    name = "summaries"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories.services.deletion import memories_erased
        from memories.signals import (
            memories_restored,
            memories_soft_deleted,
            memories_stored,
            memories_withdrawn,
        )
        from summaries import receivers
        from summaries.config import SECTION_KEYS, SummarySettings
        from tenants.tenant_settings import register_section

        register_section("summaries", SECTION_KEYS, SummarySettings.parse)
        memories_stored.connect(receivers.on_stored, dispatch_uid="summaries.stored")
        memories_restored.connect(receivers.on_restored, dispatch_uid="summaries.restored")
        memories_soft_deleted.connect(receivers.on_soft_deleted, dispatch_uid="summaries.soft")
        memories_erased.connect(receivers.on_erased, dispatch_uid="summaries.erased")
        memories_withdrawn.connect(receivers.on_withdrawn, dispatch_uid="summaries.withdrawn")
