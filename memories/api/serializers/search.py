"""Request and response shapes of search and recall (camelCase)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories.api.serializers.memories import (
    IdentifiersField,
    LayerField,
    MemorySerializer,
)
from memories.retrieval.filters import OPERATORS, MetadataFilter
from memories.retrieval.recall import Recalled, RecallRequest
from memories.retrieval.search import MAX_LIMIT, Mode, SearchHit, SearchRequest
from memories.services.supersede import superseded_chain
from memory_project.errors import InvalidInput
from memory_project.validation import JSON_OBJECT, StrictBooleanField, StrictFloatField
from tenants.layers import LayerIdentifiers


def _known_operators(spec: Any) -> Any:
    """``spec``, unless a custom condition mixes operators with unknown ones.

    ``MetadataFilter.from_json`` reads ``{"gte": 1, "between": 5}`` as equality with that
    object, so a typo in an operator would silently match nothing.

    Raises:
        InvalidInput: a condition object names an operator and an unknown key.
    """
    custom = spec.get("custom") if isinstance(spec, dict) else None
    for name, condition in (custom.items() if isinstance(custom, dict) else ()):
        if isinstance(condition, dict) and set(condition) & set(OPERATORS):
            unknown = sorted(map(str, set(condition) - set(OPERATORS)))
            if unknown:
                raise InvalidInput(
                    f"Unknown operator(s) {', '.join(unknown)} in filter.custom.{name}.",
                    details={"allowed": list(OPERATORS)},
                )
    return spec


@extend_schema_field({**JSON_OBJECT, "nullable": True})
class FilterField(serializers.JSONField):
    """A metadata filter object (or ``null``)."""


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT})
class LimitField(serializers.IntegerField):
    """``limit``: 1..100; the service answers other values with ``INVALID_INPUT``."""


class _RetrievalSerializer(serializers.Serializer):
    identifiers = IdentifiersField(required=False, default=dict)
    layers = serializers.ListField(child=LayerField(), required=False,
                                   allow_empty=False, min_length=1, max_length=7)
    limit = LimitField(required=False, default=10, help_text="1..100")
    filter = FilterField(required=False, default=None, allow_null=True)
    scope = serializers.CharField(max_length=100, required=False, allow_null=True,
                                  default=None)

    def _common(self) -> dict[str, Any]:
        data = self.validated_data
        identifiers = data["identifiers"]
        if not isinstance(identifiers, LayerIdentifiers):
            identifiers = LayerIdentifiers.from_mapping(identifiers)
        return {
            "identifiers": identifiers,
            "layers": tuple(data["layers"]) if data.get("layers") else None,
            "limit": data["limit"],
            "metadata_filter": MetadataFilter.from_json(_known_operators(data.get("filter"))),
            "scope": data.get("scope") or None,
        }


@extend_schema_field({"type": "string", "enum": [m.value for m in Mode]})
class ModeField(serializers.CharField):
    """The search mode; the service answers an unknown one with ``INVALID_INPUT``."""


class SearchRequestSerializer(_RetrievalSerializer):
    """Body of ``POST /api/v1/memories/search`` (seed 001 ``SearchMemoryInput`` + seed 002)."""

    query = serializers.CharField(trim_whitespace=False)
    threshold = StrictFloatField(required=False, allow_null=True, default=None, min_value=0,
                                 max_value=1, help_text="cosine similarity in [0, 1]; default 0.7")
    mode = ModeField(required=False, default="hybrid", help_text="semantic | keyword | hybrid")
    graphHops = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=3,
        help_text="graph expansion (hybrid only): memories the knowledge graph links to the "
                  "entities the query names, within this many hops, fused as a third list; "
                  "0 (default) turns it off")
    fusion = serializers.ChoiceField(
        choices=["rerank", "rrf"], required=False, default="rerank",
        help_text="how hybrid orders its candidates: rerank (default; the learned reranker, "
                  "``score`` is its probability) or rrf (seed 002's reciprocal rank fusion, "
                  "``score`` = ``rrf``); graph expansion always fuses by RRF")
    includeSuperseded = StrictBooleanField(
        required=False, default=False,
        help_text="add to each result the memories it superseded (``superseded``, newest "
                  "first): the facts a conversation replaced, e.g. an old address")

    def to_request(self) -> SearchRequest:
        data = self.validated_data
        return SearchRequest(query=data["query"], threshold=data.get("threshold"),
                             mode=data["mode"], graph_hops=data["graphHops"],
                             fusion=data["fusion"], **self._common())


class RecallRequestSerializer(_RetrievalSerializer):
    """Body of ``POST /api/v1/memories/recall`` (seed 002 ``memory_recall``)."""

    topic = serializers.CharField(trim_whitespace=False, required=False)
    query = serializers.CharField(trim_whitespace=False, required=False,
                                  help_text="alias of topic")
    minConfidence = StrictFloatField(required=False, allow_null=True, default=None,
                                     min_value=0, max_value=1)

    def to_request(self) -> RecallRequest:
        data = self.validated_data
        topic = data.get("topic") or data.get("query")
        if topic is None:
            raise InvalidInput("topic is required.", operation="memory.recall")
        common = self._common()
        return RecallRequest(topic=topic, min_confidence=data.get("minConfidence"), **common)


def search_results(found: list[SearchHit], *, include_superseded: bool = False,
                   graph: bool = False) -> list[dict[str, Any]]:
    """Search results: each memory, its score, layer and the parts of the score (the
    memories serialized together: DRF builds a serializer's fields once per list). With
    ``include_superseded``, each also carries ``superseded``: the memories it replaced,
    newest first (``memories.services.supersede.superseded_chain``). With ``graph`` (a
    graph-expanded search), each carries ``graphRank`` (its rank in the graph's list, or
    null)."""
    memories = MemorySerializer([c.memory for c in found], many=True).data
    chains = [MemorySerializer(superseded_chain(c.memory), many=True).data
              if include_superseded else None for c in found]
    return [
        {
            "memory": memory,
            "score": cand.score,
            "layer": cand.layer.value,
            "similarity": cand.similarity,
            "semanticRank": cand.semantic_rank,
            "keywordScore": cand.keyword_score,
            "keywordRank": cand.keyword_rank,
            "rrf": cand.rrf,
            **({"graphRank": cand.graph_rank} if graph else {}),
            **({"superseded": chain} if chain is not None else {}),
        }
        for cand, memory, chain in zip(found, memories, chains, strict=True)
    ]


def recall_results(recalled: list[Recalled]) -> list[dict[str, Any]]:
    """Recalled memories, each with every part of its composite score."""
    memories = MemorySerializer([r.candidate.memory for r in recalled], many=True).data
    return [
        {
            "memory": memory,
            "score": item.score,
            "layer": item.candidate.layer.value,
            "relevance": item.relevance,
            "importance": item.importance,
            "recency": item.recency,
            "effectiveConfidence": item.effective_confidence,
            "similarity": item.candidate.similarity,
            "keywordScore": item.candidate.keyword_score,
        }
        for item, memory in zip(recalled, memories, strict=True)
    ]
