from __future__ import annotations

from django.apps import AppConfig


class MemoryProjectConfig(AppConfig):
    """Registers the project package for its management commands (``run_stack``)."""

    name = "memory_project"
    label = "memory_project"
    verbose_name = "Memory service"

    def ready(self) -> None:
        """Tracing from the ``OTEL_*`` variables (off unless ``OTEL_TRACES_EXPORTER`` names
        an exporter); web workers' database statements bounded in time."""
        from django.db.backends.signals import connection_created

        from memory_project import tracing
        from memory_project.postgresql.base import web_statement_timeout

        tracing.configure()
        connection_created.connect(web_statement_timeout,
                                   dispatch_uid="memory_project.statement_timeout")
