"""Request and response shapes of seed 003's agent memory endpoints (camelCase)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.conversations import MAX_REQUEST_MESSAGES, ROLES
from agents.records import source_of
from agents.services import MAX_TRANSCRIPT_CHARS
from llm.purposes.memories import MAX_MESSAGE_CHARS
from memories.api.serializers.memories import IdentifiersField, LayerField
from memories.models import Memory
from memory_project.validation import IDENTIFIER_PATTERN, STORABLE_TEXT_PATTERN, StrictCharField
from tenants.layers import MAX_IDENTIFIER_LENGTH

#: Text with at least one character that is not whitespace, without NUL.
TEXT = {"type": "string", "minLength": 1, "pattern": IDENTIFIER_PATTERN}


@extend_schema_field({**TEXT, "maxLength": MAX_IDENTIFIER_LENGTH})
class IdentifierField(StrictCharField):
    """A ``projectId`` or ``userId`` (the services check it)."""


@extend_schema_field(TEXT)
class ContentField(StrictCharField):
    """A memory's content (the memory services check length and policies)."""


@extend_schema_field({**TEXT, "maxLength": MAX_TRANSCRIPT_CHARS})
class TranscriptField(StrictCharField):
    """What the agent did, as plain text (``agents.services.validate_transcript``)."""


class AgentMemorySerializer(serializers.Serializer):
    """One agent memory as seed 003 shows it. ``id`` is the memory's UUIDv7 (time-ordered,
    like a ULID); ``createdAt`` is ISO 8601 in UTC."""

    id = serializers.UUIDField(read_only=True)
    agentName = serializers.CharField(source="agent_id", read_only=True)
    projectId = serializers.CharField(source="project_id", read_only=True)
    content = serializers.CharField(read_only=True)
    # An API field named like Field.source: DRF's metaclass moves declared fields off the class.
    source = serializers.SerializerMethodField()  # type: ignore[assignment]
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)

    def get_source(self, memory: Memory) -> str:
        """Seed 003's ``extraction`` | ``manual`` | ``system``."""
        return source_of(memory.metadata or {})


class AgentMemoryCreateSerializer(serializers.Serializer):
    """Body of ``POST /api/agents/{agentName}/memories`` (seed 003: ``{projectId, content}``).
    ``source`` defaults to ``manual``; ``userId`` keeps memories per user the agent serves."""

    projectId = IdentifierField()
    content = ContentField(trim_whitespace=False)
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["manual", "system"], default="manual")
    userId = IdentifierField(required=False)


class AgentExtractSerializer(serializers.Serializer):
    """Body of ``POST /api/agents/{agentName}/extract``: the run's transcript (plain text)."""

    projectId = IdentifierField()
    transcript = TranscriptField(trim_whitespace=False)
    userId = IdentifierField(required=False)


def agent_memories(memories: list[Memory]) -> list[dict[str, Any]]:
    """``memories`` as seed 003 items."""
    return list(AgentMemorySerializer(memories, many=True).data)


MESSAGE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["role", "content"],
    "properties": {
        "role": {"type": "string", "enum": list(ROLES)},
        "content": {**TEXT, "maxLength": MAX_MESSAGE_CHARS},
        "name": {"type": "string", "maxLength": 100, "pattern": STORABLE_TEXT_PATTERN},
        "createdAt": {"type": "string", "format": "date-time"},
        "id": {"type": "string", "maxLength": 200, "pattern": STORABLE_TEXT_PATTERN},
    },
}


@extend_schema_field({"type": "array", "minItems": 1, "maxItems": MAX_REQUEST_MESSAGES,
                      "items": MESSAGE_SCHEMA})
class MessagesField(serializers.JSONField):
    """The conversation (``agents.conversations.validate_messages`` checks it)."""


class ConversationSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/conversations``: messages, and whose memories they become
    (``layer``, default ``user``, and its identifiers)."""

    messages = MessagesField()
    layer = LayerField(default="user")
    identifiers = IdentifiersField(required=False, default=dict)
    referenceTime = serializers.DateTimeField(
        required=False, allow_null=True, default=None,
        help_text="the time relative dates are resolved against; default: now")
