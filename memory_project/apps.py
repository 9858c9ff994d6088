from __future__ import annotations

from django.apps import AppConfig


class MemoryProjectConfig(AppConfig):
    """Registers the project package for its management commands (``run_stack``)."""

    name = "memory_project"
    label = "memory_project"
    verbose_name = "Memory service"

    def ready(self) -> None:
        """Tracing from the ``OTEL_*`` variables (off unless ``OTEL_TRACES_EXPORTER`` names
        an exporter)."""
        from memory_project import tracing

        tracing.configure()
