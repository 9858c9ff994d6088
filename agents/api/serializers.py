"""Request and response shapes of seed 003's agent memory endpoints (camelCase)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.records import source_of
from memories.models import Memory
from memory_project.validation import StrictCharField


class AgentMemorySerializer(serializers.Serializer):
    """One agent memory as seed 003 shows it. ``id`` is the memory's UUIDv7 (time-ordered,
    like a ULID); ``createdAt`` is ISO 8601 in UTC."""

    id = serializers.UUIDField(read_only=True)
    agentName = serializers.CharField(source="agent_id", read_only=True)
    projectId = serializers.CharField(source="project_id", read_only=True)
    content = serializers.CharField(read_only=True)
    source = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)

    def get_source(self, memory: Memory) -> str:
        """Seed 003's ``extraction`` | ``manual`` | ``system``."""
        return source_of(memory.metadata or {})


class AgentMemoryCreateSerializer(serializers.Serializer):
    """Body of ``POST /api/agents/{agentName}/memories`` (seed 003: ``{projectId, content}``).
    ``source`` defaults to ``manual``; ``userId`` keeps memories per user the agent serves."""

    projectId = StrictCharField(required=False, allow_blank=True)
    content = StrictCharField(trim_whitespace=False)
    source = serializers.ChoiceField(choices=["manual", "system"], default="manual")
    userId = StrictCharField(required=False)


class AgentExtractSerializer(serializers.Serializer):
    """Body of ``POST /api/agents/{agentName}/extract``: the run's transcript (plain text)."""

    projectId = StrictCharField(required=False, allow_blank=True)
    transcript = StrictCharField(trim_whitespace=False, allow_blank=True)
    userId = StrictCharField(required=False)


def agent_memories(memories: list[Memory]) -> list[dict[str, Any]]:
    """``memories`` as seed 003 items."""
    return list(AgentMemorySerializer(memories, many=True).data)
