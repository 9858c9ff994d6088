from __future__ import annotations

from django.apps import AppConfig


class MemoryProjectConfig(AppConfig):
    """Registers the project package for its management commands (``run_stack``)."""

    name = "memory_project"
    label = "memory_project"
    verbose_name = "Memory service"
