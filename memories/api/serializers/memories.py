"""Request and response shapes of the memory endpoints (camelCase, as in seed 001)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories.api.serializers.representation import memory_representation
from memories.models import Kind, Memory, MemoryHistory
from memories.retrieval.confidence import memory_confidence
from memories.retrieval.filters import MAX_TASK_ID_LENGTH, task_id_value
from memories.services.memory import MemoryInput
from memory_project.errors import InvalidInput
from memory_project.validation import (
    IDENTIFIER_PATTERN,
    JsonObjectField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    no_nul,
)
from tenants.layers import IDENTIFIER_FIELDS, MAX_IDENTIFIER_LENGTH, Layer, LayerIdentifiers

IDENTIFIERS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {name: {"type": "string", "minLength": 1, "maxLength": MAX_IDENTIFIER_LENGTH,
                          "pattern": IDENTIFIER_PATTERN, "nullable": True}
                   for name in IDENTIFIER_FIELDS},
}


TASK_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": MAX_TASK_ID_LENGTH,
                  "pattern": IDENTIFIER_PATTERN, "nullable": True}


@extend_schema_field(TASK_ID_SCHEMA)
class TaskIdField(serializers.Field):
    """``taskId`` (seed 004 ``TaskID``): a string checked like a layer identifier
    (:func:`memories.retrieval.filters.task_id_value`), or ``null`` for no task."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str | None:
        try:
            return task_id_value(data)
        except InvalidInput as err:
            raise serializers.ValidationError(err.message) from None

    def to_representation(self, value: Any) -> str | None:
        return None if value is None else str(value)


@extend_schema_field({"type": "string", "enum": [x.value for x in Layer]})
class LayerField(StrictCharField):
    """A layer name; the service answers an unknown one with ``INVALID_LAYER``."""


@extend_schema_field(IDENTIFIERS_SCHEMA)
class IdentifiersField(serializers.JSONField):
    """``{"agentId"?, "userId"?, "sessionId"?, "projectId"?, "teamId"?, "orgId"?,
    "companyId"?}``; unknown keys and empty values are rejected."""

    # DRF types a field's internal value as JSON data; this field's is the domain object.
    def to_internal_value(self, data: Any) -> LayerIdentifiers:  # type: ignore[override]
        try:
            return LayerIdentifiers.from_mapping(data)
        except InvalidInput as err:
            raise serializers.ValidationError(err.message) from None


OCCURRED_AT_HELP = (
    "When what the memory records was said or happened on its source's clock (ISO 8601 date "
    "or date-time; e.g. a conversation turn's session time); createdAt is when it was stored. "
    "Hybrid search matches the dates a query names against it (else against createdAt).")


class MemoryWriteSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/memories`` (seed 001 ``AddMemoryInput``)."""

    content = StrictCharField(trim_whitespace=False)
    layer = LayerField()
    identifiers = IdentifiersField(required=False, default=dict)
    metadata = JsonObjectField(required=False, default=dict, validators=[no_nul])
    # An API field named like Field.context: DRF's metaclass moves declared fields off the class.
    context = StrictCharField(  # type: ignore[assignment]
        required=False, default="", allow_blank=True, trim_whitespace=False,
        help_text="Text around the memory that helps find it (keyword search, lower weight).",
    )
    kind = serializers.ChoiceField(choices=Kind.choices, default=Kind.FACT)
    scope = StrictCharField(max_length=100, default="global")
    importance = StrictFloatField(min_value=0, max_value=1, default=0.5)
    confidence = StrictFloatField(min_value=0, max_value=1, default=1.0)
    decayRate = StrictFloatField(min_value=0, max_value=100, default=0.0)
    sensitive = StrictBooleanField(default=False)
    private = StrictBooleanField(default=False)
    taskId = TaskIdField(required=False, default=None,
                         help_text="The task the memory was written for (seed 004 TaskID); "
                                   "an exact filter of list and search, not a layer identifier.")
    occurredAt = serializers.DateTimeField(required=False, default=None, allow_null=True,
                                           help_text=OCCURRED_AT_HELP)

    def to_input(self) -> MemoryInput:
        return memory_input(self.validated_data)


def memory_input(data: dict[str, Any]) -> MemoryInput:
    """A :class:`MemoryInput` from validated :class:`MemoryWriteSerializer` data."""
    identifiers = data["identifiers"]
    if not isinstance(identifiers, LayerIdentifiers):
        identifiers = LayerIdentifiers.from_mapping(identifiers)
    return MemoryInput(
        content=data["content"],
        layer=data["layer"],
        identifiers=identifiers,
        metadata=data["metadata"],
        context=data.get("context", ""),
        kind=data["kind"],
        scope=data["scope"],
        importance=data["importance"],
        confidence=data["confidence"],
        decay_rate=data["decayRate"],
        sensitive=data["sensitive"],
        private=data["private"],
        task_id=data.get("taskId"),
        occurred_at=data.get("occurredAt"),
    )


class BulkAddSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/memories/bulk``: ``{"memories": [AddMemoryInput, ...]}``."""

    # ``many=True`` makes a ListSerializer, which takes min_length (the stubs type the child).
    memories = MemoryWriteSerializer(many=True, allow_empty=False,
                                     min_length=1)  # type: ignore[call-arg]


class BulkDeleteSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/memories/bulk-delete``: ``{"ids": [str, ...], "hard"?: bool}``;
    soft delete unless ``hard`` is true (erase now)."""

    ids = serializers.ListField(
        child=StrictCharField(max_length=64, allow_blank=True, trim_whitespace=False),
        allow_empty=False, min_length=1,
        max_length=1000,
    )
    hard = StrictBooleanField(required=False, default=False)

    @staticmethod
    def is_hard(data: dict[str, Any]) -> bool:
        """Whether a body asks for a hard delete (``"hard": true``; the field is strict)."""
        return data.get("hard") is True


def documented_json(schema: dict[str, Any]) -> type[serializers.JSONField]:
    """A ``JSONField`` documented with ``schema`` (the service checks the values)."""
    return extend_schema_field(schema)(type("JSONField", (serializers.JSONField,), {}))


class FeedbackSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/memories/feedback`` (seed 001 "Memory-R1 Pruning"):
    ``{"memoryIds": [str, ...], "reward": number in [-1, 1], "query"?: str}``. Only the
    shape is checked here; ``memories.services.feedback.validate_feedback`` checks the values."""

    memoryIds = documented_json({"type": "array", "minItems": 1, "maxItems": 100,
                         "items": {"type": "string", "format": "uuid"}})()
    reward = documented_json({"type": "number", "minimum": -1, "maximum": 1})()
    query = documented_json({"type": "string", "nullable": True})(required=False, default=None,
                                                                  allow_null=True)


class MemoryUpdateSerializer(serializers.Serializer):
    """Body of ``PATCH /api/v1/memories/{id}`` (seed 001 ``UpdateMemoryInput``).

    ``version`` (or an ``If-Match`` header) makes the update conditional: 409 when stale.
    """

    content = StrictCharField(trim_whitespace=False, required=False)
    metadata = JsonObjectField(required=False, validators=[no_nul])
    version = serializers.IntegerField(required=False, min_value=1)
    # An API field named like Field.context: DRF's metaclass moves declared fields off the class.
    context = StrictCharField(required=False, allow_blank=True,  # type: ignore[assignment]
                              trim_whitespace=False)
    kind = serializers.ChoiceField(choices=Kind.choices, required=False)
    scope = StrictCharField(max_length=100, required=False)
    importance = StrictFloatField(min_value=0, max_value=1, required=False)
    confidence = StrictFloatField(min_value=0, max_value=1, required=False)
    decayRate = StrictFloatField(min_value=0, max_value=100, required=False)
    sensitive = StrictBooleanField(required=False)
    private = StrictBooleanField(required=False)
    occurredAt = serializers.DateTimeField(required=False, allow_null=True,
                                           help_text=OCCURRED_AT_HELP)

    FIELD_NAMES = {"context": "context", "kind": "kind", "scope": "scope",
                   "importance": "importance", "confidence": "confidence",
                   "decayRate": "decay_rate", "sensitive": "sensitive", "private": "private",
                   "occurredAt": "occurred_at"}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not set(attrs) - {"version"}:
            raise serializers.ValidationError("Nothing to update.")
        return attrs

    def model_fields(self) -> dict[str, Any]:
        return {
            column: self.validated_data[name]
            for name, column in self.FIELD_NAMES.items()
            if name in self.validated_data
        }


class MemorySerializer(serializers.ModelSerializer):
    """A memory entry (seed 001 ``MemoryEntry``) with its scoring and lifecycle fields."""

    identifiers = serializers.DictField(child=serializers.CharField(), read_only=True)
    taskId = serializers.CharField(source="task_id", allow_null=True)
    decayRate = serializers.FloatField(source="decay_rate")
    lastConfirmedAt = serializers.DateTimeField(source="last_confirmed_at", allow_null=True)
    referenceCount = serializers.IntegerField(source="reference_count")
    lastReferencedAt = serializers.DateTimeField(source="last_referenced_at", allow_null=True)
    accessCount = serializers.IntegerField(source="access_count")
    lastAccessedAt = serializers.DateTimeField(source="last_accessed_at", allow_null=True)
    deletedAt = serializers.DateTimeField(source="deleted_at", allow_null=True)
    contentHash = serializers.CharField(source="content_hash")
    occurredAt = serializers.DateTimeField(source="occurred_at", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    baseImportance = serializers.SerializerMethodField()
    effectiveConfidence = serializers.SerializerMethodField()
    confidenceState = serializers.SerializerMethodField()
    prunedAt = serializers.DateTimeField(source="pruned_at", allow_null=True)
    restoredAt = serializers.DateTimeField(source="restored_at", allow_null=True)
    feedbackCount = serializers.IntegerField(source="feedback_count")
    meanReward = serializers.SerializerMethodField()

    class Meta:
        model = Memory
        fields = [
            "id", "content", "layer", "identifiers", "taskId", "metadata", "context", "kind",
            "scope",
            "importance", "baseImportance", "confidence", "effectiveConfidence",
            "confidenceState", "decayRate", "lastConfirmedAt", "referenceCount",
            "lastReferencedAt", "accessCount", "lastAccessedAt", "sensitive", "private",
            "state", "deletedAt", "prunedAt", "restoredAt", "feedbackCount", "meanReward",
            "contentHash", "version", "occurredAt", "createdAt", "updatedAt",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Memory) -> dict[str, Any]:
        """The memory in one pass (``memories.api.serializers.representation``); equal to
        :meth:`field_representation`, and faster (``docs/performance.md``)."""
        return memory_representation(instance)

    def field_representation(self, instance: Memory) -> dict[str, Any]:
        """DRF's field-by-field rendering of the declared fields (the reference the one-pass
        rendering is tested against)."""
        return super().to_representation(instance)

    def get_baseImportance(self, memory: Memory) -> float:
        """The importance the writer gave (``importance`` moves with use)."""
        return memory.importance if memory.base_importance is None else memory.base_importance

    def get_effectiveConfidence(self, memory: Memory) -> float:
        """Seed 002: confidence × exp(−decay_rate × days since last confirmed)."""
        return memory_confidence(memory)[0]

    def get_confidenceState(self, memory: Memory) -> str:
        """``active`` (≥ 0.5), ``fading`` (≥ 0.2) or ``expired`` (< 0.2)."""
        return memory_confidence(memory)[1]

    def get_meanReward(self, memory: Memory) -> float | None:
        """Mean feedback reward since creation or the last restore; ``null`` without any."""
        return memory.reward_sum / memory.feedback_count if memory.feedback_count else None


class MemoryWithEmbeddingSerializer(MemorySerializer):
    """:class:`MemorySerializer` plus ``embedding`` (384 floats)."""

    embedding = serializers.SerializerMethodField()

    class Meta(MemorySerializer.Meta):
        fields = [*MemorySerializer.Meta.fields, "embedding"]
        read_only_fields = fields

    def to_representation(self, instance: Memory) -> dict[str, Any]:
        return {**memory_representation(instance), "embedding": self.get_embedding(instance)}

    def get_embedding(self, memory: Memory) -> list[float]:
        return [float(x) for x in memory.embedding]


class MemoryHistorySerializer(serializers.ModelSerializer):
    """One history row; after an erasure the four content fields are ``null`` and
    ``erasedAt`` is set."""

    memoryId = serializers.UUIDField(source="memory_id")
    oldContent = serializers.CharField(source="old_content", allow_null=True)
    newContent = serializers.CharField(source="new_content", allow_null=True)
    oldMetadata = serializers.JSONField(source="old_metadata", allow_null=True)
    newMetadata = serializers.JSONField(source="new_metadata", allow_null=True)
    erasedAt = serializers.DateTimeField(source="erased_at", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = MemoryHistory
        fields = ["id", "memoryId", "action", "oldContent", "newContent", "oldMetadata",
                  "newMetadata", "actor", "details", "erasedAt", "createdAt"]
        read_only_fields = fields
