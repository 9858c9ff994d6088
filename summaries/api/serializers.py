"""Request and response shapes of the summary and context endpoints (camelCase).

The selectors return :class:`summaries.selectors.ServedSummary` (a summary row, the scope it
covers and its freshness); :func:`summary_item` turns one into the JSON the views answer with.
Request fields check JSON types only: ranges (budget, summary share, depth, query length) are
checked once, by the service (``summaries.context.ContextRequest.validated``,
``summaries.selectors.parse_depth``), so one message names each rule.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories.api.serializers.memories import IdentifiersField, LayerField
from memory_project.validation import IDENTIFIER_PATTERN, StrictCharField
from summaries.context import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, SUMMARY_SHARE, ContextRequest
from summaries.models import Depth, Priority, SummaryScope
from summaries.selectors import ServedSummary
from tenants.layers import Layer, LayerIdentifiers

LAYERS = [layer.value for layer in Layer]
#: Why a summary is stale (``summaries.selectors.Freshness.reasons``).
STALE_REASONS = ["sources_changed", "invalidated", "max_age"]
#: How ``POST /api/v1/context`` answers: JSON (default) or Markdown.
FORMATS = ["json", "markdown"]


class ObjectIdentifiersField(IdentifiersField):
    """``identifiers``: a JSON object of layer identifiers (``[]``, ``""`` or ``0`` are refused
    rather than read as no identifiers)."""

    # DRF types a field's internal value as JSON data; this field's is the domain object.
    def to_internal_value(self, data: Any) -> LayerIdentifiers:  # type: ignore[override]
        if not isinstance(data, dict):
            raise serializers.ValidationError("identifiers must be an object.")
        return super().to_internal_value(data)


def identifiers_of(data: dict[str, Any]) -> LayerIdentifiers:
    """The ``identifiers`` of validated data (the field's default ``{}`` included)."""
    identifiers = data["identifiers"]
    if isinstance(identifiers, LayerIdentifiers):
        return identifiers
    return LayerIdentifiers.from_mapping(identifiers)


@extend_schema_field({"type": "integer", "minimum": MIN_BUDGET, "maximum": MAX_BUDGET})
class TokenBudgetField(serializers.Field):
    """A JSON integer (not a string, float or boolean); its range is the service's check."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise serializers.ValidationError("Must be an integer number of tokens.")
        return data

    def to_representation(self, value: Any) -> int:
        return int(value)


@extend_schema_field({"type": "number", "minimum": 0, "maximum": 1})
class ShareField(serializers.Field):
    """A JSON number (not a string or boolean); its range is the service's check."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise serializers.ValidationError("Must be a number.")
        return float(data)

    def to_representation(self, value: Any) -> float:
        return float(value)


@extend_schema_field({"type": "string", "minLength": 1,
                      "maxLength": settings.MEMORY_MAX_QUERY_LENGTH,
                      "pattern": IDENTIFIER_PATTERN, "nullable": True})
class QueryField(StrictCharField):
    """What the agent is about to do (a JSON string); blank and over-long queries are the
    service's check (``INVALID_INPUT``, ``QUERY_TOO_LONG``)."""


@extend_schema_field({"type": "string", "enum": list(Depth.values), "nullable": True})
class DepthField(StrictCharField):
    """A depth name (a JSON string); an unknown one is the service's check."""


class ContextRequestSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/context``: whose context (``identifiers``), what for
    (``query``, optional), how many tokens (``budget``), optionally one ``depth`` for every
    summary, the share of the budget summaries may take, and the answer's ``format``."""

    identifiers = ObjectIdentifiersField(required=False, default=dict)
    query = QueryField(required=False, allow_null=True, allow_blank=True,
                       trim_whitespace=False, default=None,
                       help_text="ranks layers and memories by relevance; without it, layers "
                                 "go by precedence and memories by importance")
    budget = TokenBudgetField(required=False, default=DEFAULT_BUDGET,
                              help_text=f"tokens, {MIN_BUDGET}..{MAX_BUDGET}")
    depth = DepthField(required=False, allow_null=True, allow_blank=True, default=None,
                       help_text="one depth for every summary; default: the deepest that fits")
    summaryShare = ShareField(required=False, default=SUMMARY_SHARE,
                              help_text="share of the budget summaries may take, 0..1")
    format = serializers.ChoiceField(
        choices=FORMATS, required=False, allow_null=True, default=None,
        help_text="markdown: answer text/markdown (as with Accept: text/markdown)")

    def to_request(self) -> ContextRequest:
        """The validated body as a :class:`ContextRequest` (ranges not checked yet)."""
        data = self.validated_data
        return ContextRequest(identifiers=identifiers_of(data), query=data["query"],
                              budget=data["budget"], depth=data["depth"],
                              summary_share=data["summaryShare"])


class RegenerateSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/summaries/regenerate``: the layer and the identifiers of the
    scope to summarise again (the layer's required ones; the hierarchy fills in the rest)."""

    layer = LayerField()
    identifiers = ObjectIdentifiersField(required=False, default=dict)


class RegenerateAcceptedSerializer(serializers.Serializer):
    """What ``POST /api/v1/summaries/regenerate`` answers (202): the scope now pending, since
    when, and at which priority."""

    scope = serializers.CharField(read_only=True, help_text="e.g. projectId=p1")
    layer = serializers.ChoiceField(choices=LAYERS, read_only=True)
    pendingSince = serializers.DateTimeField(read_only=True)
    priority = serializers.ChoiceField(choices=["high", "normal"], read_only=True)


def regenerate_accepted(row: SummaryScope) -> dict[str, Any]:
    """A pending scope row as ``{scope, layer, pendingSince, priority}``."""
    return dict(RegenerateAcceptedSerializer({
        "scope": row.scope_key, "layer": row.layer, "pendingSince": row.pending_since,
        "priority": Priority(row.priority).name.lower()}).data)


class SentenceSerializer(serializers.Serializer):
    """One sentence of a summary and the memories it rests on."""

    text = serializers.CharField(read_only=True)
    sourceIds = serializers.ListField(child=serializers.UUIDField(), read_only=True)


class FreshnessFields(serializers.Serializer):
    """Whether a summary still says what its sources say (seed 001 freshness metadata)."""

    stale = serializers.BooleanField(source="freshness.stale", read_only=True)
    needsRegeneration = serializers.BooleanField(source="freshness.needs_regeneration",
                                                 read_only=True)
    ageSeconds = serializers.FloatField(source="freshness.age_seconds", read_only=True)
    reasons = serializers.ListField(child=serializers.ChoiceField(choices=STALE_REASONS),
                                    source="freshness.reasons", read_only=True)


class SummarySerializer(FreshnessFields):
    """A layer summary as served: ``{id, layer, scope, personalized, personalizationContext,
    depth, content, sentences, sourceIds, sourceCount, tokenCount, sourceHash, generatedAt,
    model, trigger, stale, needsRegeneration, ageSeconds, reasons}``. ``scope`` is the
    layer's identifiers (``projectId=p1``); ``tokenCount`` is counted with the tokenizer the
    list names."""

    id = serializers.UUIDField(source="summary.pk", read_only=True)
    layer = serializers.ChoiceField(choices=LAYERS, source="summary.layer", read_only=True)
    scope = serializers.CharField(source="scope.key", read_only=True)
    personalized = serializers.BooleanField(source="summary.personalized", read_only=True)
    personalizationContext = serializers.DictField(
        child=serializers.CharField(), source="summary.personalization_context", read_only=True)
    depth = serializers.ChoiceField(choices=list(Depth.values), source="summary.depth",
                                    read_only=True)
    content = serializers.CharField(source="summary.content", read_only=True)
    sentences = SentenceSerializer(many=True, source="summary.sentences", read_only=True)
    sourceIds = serializers.ListField(child=serializers.UUIDField(), source="summary.source_ids",
                                      read_only=True)
    sourceCount = serializers.IntegerField(source="summary.source_count", read_only=True)
    tokenCount = serializers.IntegerField(source="summary.token_count", read_only=True)
    sourceHash = serializers.CharField(source="summary.source_hash", read_only=True)
    generatedAt = serializers.DateTimeField(source="summary.generated_at", read_only=True)
    model = serializers.CharField(source="summary.model", read_only=True)
    trigger = serializers.CharField(source="summary.trigger", read_only=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """The fields above, freshness as ``Freshness.as_dict`` words it."""
        return {**super().to_representation(instance), **instance.freshness.as_dict()}


class SummaryListSerializer(serializers.Serializer):
    """``{"summaries": [summary], "totalTokens": n, "tokenizer": name}``: in layer
    precedence order (agent first), each layer's depths shortest first."""

    summaries = SummarySerializer(many=True, read_only=True)
    totalTokens = serializers.IntegerField(read_only=True)
    tokenizer = serializers.CharField(read_only=True)


class SummaryAnswerSerializer(serializers.Serializer):
    """``{"summary": summary}``, or ``{"summary": null}`` when the scope has none at that
    depth (yet)."""

    summary = SummarySerializer(read_only=True, allow_null=True)


def summary_item(served: ServedSummary) -> dict[str, Any]:
    """One served summary as the API shows it."""
    return dict(SummarySerializer(served).data)


class ContextSummarySerializer(serializers.Serializer):
    """A summary included in a context, with its relevance ``score`` (``null`` without a
    query) and freshness."""

    id = serializers.UUIDField(read_only=True)
    layer = serializers.ChoiceField(choices=LAYERS, read_only=True)
    scope = serializers.CharField(read_only=True)
    personalized = serializers.BooleanField(read_only=True)
    depth = serializers.ChoiceField(choices=list(Depth.values), read_only=True)
    score = serializers.FloatField(read_only=True, allow_null=True)
    content = serializers.CharField(read_only=True)
    tokenCount = serializers.IntegerField(read_only=True)
    sourceIds = serializers.ListField(child=serializers.UUIDField(), read_only=True)
    generatedAt = serializers.DateTimeField(read_only=True)
    stale = serializers.BooleanField(read_only=True)
    needsRegeneration = serializers.BooleanField(read_only=True)
    ageSeconds = serializers.FloatField(read_only=True)
    reasons = serializers.ListField(child=serializers.ChoiceField(choices=STALE_REASONS),
                                    read_only=True)


class ContextMemorySerializer(serializers.Serializer):
    """A memory included in a context, with its search score (``null`` without a query)."""

    id = serializers.UUIDField(read_only=True)
    layer = serializers.ChoiceField(choices=LAYERS, read_only=True)
    content = serializers.CharField(read_only=True)
    score = serializers.FloatField(read_only=True, allow_null=True)
    tokenCount = serializers.IntegerField(read_only=True)
    occurredAt = serializers.DateTimeField(
        read_only=True, allow_null=True,
        help_text="when what the memory records happened, as its writer gave it; the "
                  "Markdown form puts this day in front of the memory")
    createdAt = serializers.DateTimeField(read_only=True)


class LayerScoreSerializer(serializers.Serializer):
    """A layer's relevance to the query and the depth of its summary that was included
    (``null``: left out; ``reason`` says why, e.g. ``not relevant``, ``over budget``)."""

    layer = serializers.ChoiceField(choices=LAYERS, read_only=True)
    scope = serializers.CharField(read_only=True)
    score = serializers.FloatField(read_only=True, allow_null=True)
    includedDepth = serializers.CharField(read_only=True, allow_null=True,
                                          help_text="sentence, paragraph or detailed")
    reason = serializers.CharField(read_only=True, allow_null=True)


class IncludedSerializer(serializers.Serializer):
    """Ids of what the context holds, in order."""

    summaryIds = serializers.ListField(child=serializers.UUIDField(), read_only=True)
    memoryIds = serializers.ListField(child=serializers.UUIDField(), read_only=True)


class ContextSerializer(serializers.Serializer):
    """An assembled context as JSON (``summaries.context.context_as_dict``): ``tokenCount``
    is that of its Markdown rendering and never over ``budget``."""

    query = serializers.CharField(read_only=True, allow_null=True)
    budget = serializers.IntegerField(read_only=True)
    tokenCount = serializers.IntegerField(read_only=True)
    tokenizer = serializers.CharField(read_only=True)
    summaries = ContextSummarySerializer(many=True, read_only=True)
    memories = ContextMemorySerializer(many=True, read_only=True)
    layerScores = LayerScoreSerializer(many=True, read_only=True)
    included = IncludedSerializer(read_only=True)
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)
