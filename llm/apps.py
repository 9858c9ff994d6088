from __future__ import annotations

from django.apps import AppConfig


class LlmConfig(AppConfig):
    """The one language-model layer: client, local model, purposes, budgets, usage."""

    name = "llm"
    verbose_name = "Language model"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from llm.budgets import LlmSettings
        from llm.health import llm_component
        from memory_project import health
        from memory_project.resilience import breaker_profile
        from tenants.tenant_settings import register_section

        health.register_component("llm", llm_component)
        register_section("llm", {"budget", "cacheTtlSeconds"}, LlmSettings.parse)
        # Seed 001 MR-H2 "Failure Rate Monitoring": open at 5 % failed calls in 5 minutes
        # (at least 20 calls), or at CIRCUIT_BREAKER_FAIL_MAX (5) failures within it.
        breaker_profile("llm", window_seconds=300.0, failure_rate=0.05, min_calls=20)

