from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """Agents: seed 003's agent memories API, post-run extraction, and the commands agents
    run around their work (``memory-agent``)."""

    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"
