"""Memory endpoints under ``/api/v1/memories`` (seed 001 "Core Operations")."""

from __future__ import annotations

import time
import uuid
from typing import Any, cast

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memories.api.params import bool_param, int_param, only_params
from memories.api.serializers.entries import BatchGetSerializer, entry_json
from memories.api.serializers.memories import (
    BulkAddSerializer,
    BulkDeleteSerializer,
    FeedbackSerializer,
    MemoryHistorySerializer,
    MemorySerializer,
    MemoryUpdateSerializer,
    MemoryWithEmbeddingSerializer,
    MemoryWriteSerializer,
    memory_input,
)
from memories.api.serializers.search import (
    RecallRequestSerializer,
    SearchRequestSerializer,
    recall_results,
    search_results,
)
from memories.models import Memory, State
from memories.retrieval.filters import SOURCE_TYPES, MetadataFilter
from memories.retrieval.recall import memory_recall
from memories.retrieval.search import memory_search
from memories.selectors import memory as selectors
from memories.selectors.entries import memory_batch_get
from memories.services import deletion, feedback, references
from memories.services import memory as services
from memory_project.errors import InvalidInput, MemoryNotFound
from memory_project.openapi import EnvelopedListSchema
from memory_project.validation import IDENTIFIER_PATTERN
from tenants.api.mixins import TenantScopedViewSetMixin
from tenants.context import require_context
from tenants.layers import IDENTIFIER_FIELDS, Layer, LayerIdentifiers


def _memory_queryset() -> Any:
    return Memory.objects.exclude(state=State.DELETED)


def _if_match(request: Request) -> int | None:
    raw = request.headers.get("If-Match")
    if not raw:
        return None
    try:
        return int(raw.strip().removeprefix("W/").strip('"'))
    except ValueError:
        raise InvalidInput("If-Match must be a memory version (an ETag from GET).") from None


def _memory(memory: Memory, request: Request) -> dict[str, Any]:
    return _memories([memory], request)[0]


def _memories(memories: list[Memory], request: Request) -> list[dict[str, Any]]:
    """Memories as the API shows them, serialized together (DRF builds fields once)."""
    with_embedding = request.query_params.get("includeEmbedding") in ("true", "1")
    serializer = MemoryWithEmbeddingSerializer if with_embedding else MemorySerializer
    return list(serializer(memories, many=True).data)


IDENTIFIER_PARAMS = [
    OpenApiParameter(name, str, required=False, description=f"Identifier {name}.",
                     pattern=IDENTIFIER_PATTERN, allow_blank=False)
    for name in IDENTIFIER_FIELDS
]


class MemoryViewSet(TenantScopedViewSetMixin, viewsets.GenericViewSet):
    """Add, bulk add, get, update, delete, bulk delete and list memories of the caller's tenant."""

    serializer_class = MemorySerializer
    schema = EnvelopedListSchema()
    queryset_selector = staticmethod(_memory_queryset)
    not_found_error = MemoryNotFound
    lookup_value_regex = "[^/]+"
    pagination_class = None
    operation_name = {
        "create": "memory.add", "bulk": "memory.bulk_add", "retrieve": "memory.get",
        "partial_update": "memory.update", "destroy": "memory.delete",
        "bulk_delete": "memory.bulk_delete", "list": "memory.list",
        "search": "memory.search", "recall": "memory.recall", "restore": "memory.restore",
        "history": "memory.history", "feedback": "memory.feedback", "erase": "memory.erase",
        "batch_get": "memory.batch_get",
    }

    def operation_for(self, request: Request) -> str | None:
        """A hard delete is another operation than a soft one (``tenants.permissions``): it
        cannot be undone, so it needs more than the writer role."""
        if self.action == "destroy" and request.query_params.get("hard", "").lower() in (
                "true", "1"):
            return "memory.delete_hard"
        if self.action == "bulk_delete" and isinstance(request.data, dict) and \
                BulkDeleteSerializer.is_hard(request.data):
            return "memory.bulk_delete_hard"
        return None

    @extend_schema(
        request=MemoryWriteSerializer,
        responses={201: inline_serializer("AddMemoryOutput", {
            "memory": MemorySerializer(), "embeddingGenerated": serializers.BooleanField()})},
    )
    def create(self, request: Request) -> Response:
        """Add a memory; the embedding is generated (or taken from the cache)."""
        body = MemoryWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = services.memory_add(require_context(), item=body.to_input())
        return Response(
            {"memory": _memory(result.memory, request),
             "embeddingGenerated": result.embedding_generated},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=BulkAddSerializer, responses={201: dict})
    @action(detail=False, methods=["post"])
    def bulk(self, request: Request) -> Response:
        """Add up to ``MEMORY_MAX_BULK_ITEMS`` memories in one transaction, embedded in batches."""
        body = BulkAddSerializer(data=request.data)
        if not body.is_valid():
            errors = body.errors.get("memories")
            if isinstance(errors, dict):  # DRF keys item errors by position
                index = min((i for i in errors if isinstance(i, int)), default=None)
            elif isinstance(errors, list):
                index = next((i for i, e in enumerate(errors) if e), None)
            else:
                index = None
            raise InvalidInput("Invalid input; see details.",
                               details={"fields": body.errors, **(
                                   {"index": index} if index is not None else {})})
        items = [memory_input(raw) for raw in body.validated_data["memories"]]
        results = services.memory_bulk_add(require_context(), items=items)
        return Response(
            {"results": [
                {"memory": _memory(r.memory, request), "embeddingGenerated": r.embedding_generated}
                for r in results
            ]},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(responses={200: inline_serializer("GetMemoryOutput", {
        "memory": MemorySerializer()})})
    def retrieve(self, request: Request, pk: str) -> Response:
        """Get one memory; another tenant's id answers exactly like a missing one (404)."""
        memory = cast(Memory, self.get_object())
        references.memory_references_record(require_context(), memory_ids=[memory.pk])
        memory.refresh_from_db()
        response = Response({"memory": _memory(memory, request)})
        response["ETag"] = f'"{memory.version}"'
        return response

    @extend_schema(request=BatchGetSerializer, responses={200: inline_serializer(
        "BatchGetOutput", {"entries": serializers.ListField(child=serializers.DictField()),
                           "missing": serializers.ListField(child=serializers.CharField())})})
    @action(detail=False, methods=["post"], url_path="batch-get")
    def batch_get(self, request: Request) -> Response:
        """Get up to 100 memory entries by id in one call (seed 004 "Batch retrieve"), served
        by L1, then L2, then L3; ids found nowhere (another tenant's included) are listed in
        ``missing``. ``X-Memory-Tiers`` says how many entries each tier served."""
        body = BatchGetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ctx = require_context()
        found = memory_batch_get(ctx, ids=body.validated_data["ids"])
        references.memory_references_record_after_response(
            ctx, memory_ids=[uuid.UUID(entry.id) for entry in found.entries])
        include_vector = body.validated_data["includeVector"]
        response = Response({
            "entries": [entry_json(e, include_vector=include_vector) for e in found.entries],
            "missing": found.missing})
        response["X-Memory-Tiers"] = ", ".join(f"{k}={v}" for k, v in found.tiers.items())
        return response

    @extend_schema(request=MemoryUpdateSerializer, responses={200: dict})
    def partial_update(self, request: Request, pk: str) -> Response:
        """Update content (re-embeds) and/or metadata (shallow merge); 409 on a stale version."""
        body = MemoryUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        expected = data.get("version")
        header = _if_match(request)
        if header is not None:
            expected = header
        result = services.memory_update(
            require_context(),
            memory_id=pk,
            content=data.get("content"),
            metadata=data.get("metadata"),
            expected_version=expected,
            fields=body.model_fields(),
        )
        response = Response({
            "memory": _memory(result.memory, request),
            "embeddingRegenerated": result.embedding_regenerated,
        })
        response["ETag"] = f'"{result.memory.version}"'
        return response

    @extend_schema(
        parameters=[OpenApiParameter("hard", bool, description="erase now (default: soft)")],
        responses={200: inline_serializer("DeleteMemoryOutput", {
            "success": serializers.BooleanField()})},
    )
    def destroy(self, request: Request, pk: str) -> Response:
        """Delete a memory: soft by default (restorable, purged after the tenant's retention);
        ``?hard=true`` erases it and blanks its history content now. Idempotent: a missing
        (or another tenant's) id also succeeds."""
        only_params(request, {"hard"})
        hard = bool_param(request, "hard")
        return Response({"success": deletion.memory_delete(require_context(), memory_id=pk,
                                                           hard=hard)})

    @extend_schema(request=BulkDeleteSerializer, responses={200: inline_serializer(
        "BulkDeleteOutput", {"deleted": serializers.IntegerField(),
                             "failed": serializers.ListField(child=serializers.CharField())})})
    @action(detail=False, methods=["post"], url_path="bulk-delete")
    def bulk_delete(self, request: Request) -> Response:
        """Delete many memories (soft unless ``"hard": true``):
        ``{"deleted": n, "failed": [malformed ids]}``."""
        body = BulkDeleteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(deletion.memory_bulk_delete(
            require_context(), memory_ids=body.validated_data["ids"],
            hard=body.validated_data["hard"]))

    @extend_schema(
        operation_id="v1_memories_erase",
        parameters=[OpenApiParameter(name, str, required=False, pattern=IDENTIFIER_PATTERN,
                                     allow_blank=False) for name in deletion.ERASE_IDENTIFIERS],
        responses={200: inline_serializer("EraseOutput", {"erased": serializers.IntegerField()})},
    )
    def erase(self, request: Request) -> Response:
        """``DELETE /api/v1/memories?userId=...`` (or agentId, sessionId, projectId; several
        must all match): erase every memory of that identifier in the caller's tenant, in any
        layer and state, with its history content (a data-subject request). Needs the admin
        role; audited. ``{"erased": n}``; no identifier → 400."""
        ctx = require_context()
        identifiers: dict[str, str] = {}
        for name in request.query_params:
            values = request.query_params.getlist(name)
            if len(values) != 1:
                raise InvalidInput(f"{name} must be given once.", operation="memory.erase")
            identifiers[name] = values[0]
        return Response({"erased": deletion.memory_erase_by_identifiers(
            ctx, identifiers=identifiers)})

    @extend_schema(request=None, responses={200: inline_serializer("RestoreOutput", {
        "memory": MemorySerializer(), "restored": serializers.BooleanField()})})
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, pk: str) -> Response:
        """Restore a soft-deleted, archived (decayed or merged) or pruned memory;
        ``restored`` is false when it was active already. 404 when it does not exist (also
        when erased)."""
        memory, restored = deletion.memory_restore(require_context(), memory_id=pk)
        return Response({"memory": _memory(memory, request), "restored": restored})

    @extend_schema(responses={200: inline_serializer("HistoryOutput", {
        "history": MemoryHistorySerializer(many=True)})})
    @action(detail=True, methods=["get"])
    def history(self, request: Request, pk: str) -> Response:
        """The memory's changes, oldest first; readable after a soft delete, content blanked
        after an erasure. Another tenant's id answers like a missing one (404)."""
        rows = selectors.memory_history(require_context(), memory_id=pk)
        return Response({"history": MemoryHistorySerializer(rows, many=True).data})

    @extend_schema(request=FeedbackSerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def feedback(self, request: Request) -> Response:
        """Reward memories for a task outcome (seed 001 "Memory-R1 Pruning"): one reward in
        [-1, 1] for every listed memory. All or nothing: an unknown or foreign id → 404
        ``MEMORY_NOT_FOUND`` without saying which; answers ``{"recorded": n, "memories":
        [{"id", "feedbackCount", "meanReward"}]}``."""
        body = FeedbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        result = feedback.memory_feedback_record(
            require_context(), memory_ids=data["memoryIds"], reward=data["reward"],
            query=data.get("query"))
        return Response(result.as_dict())

    @extend_schema(
        parameters=[
            OpenApiParameter("layer", str, required=True, enum=[x.value for x in Layer]),
            *IDENTIFIER_PARAMS,
            OpenApiParameter("cursor", str, pattern=r"^(?:[A-Za-z0-9_-]{22})?$",
                             description="nextCursor of the previous page; absent or empty "
                                         "for the first page"),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1,
                                       "maximum": selectors.MAX_PAGE_SIZE},
                             description="1..100, default 50"),
            OpenApiParameter("tags", str, description="comma-separated; any of them (OR)"),
            OpenApiParameter("sourceType", str, enum=sorted(SOURCE_TYPES)),
            OpenApiParameter("hasKnowledgePointer", bool),
        ],
        description=(
            "List one layer's memories, newest first, with cursor pagination and filters. "
            "Metadata filters: ``custom.<field>=value`` (equality) or "
            "``custom.<field>__<op>=value`` with op one of contains, gt, gte, lt, lte."),
        responses={200: inline_serializer("ListMemoriesOutput", {
            "memories": MemorySerializer(many=True),
            "nextCursor": serializers.CharField(allow_null=True),
            "totalCount": serializers.IntegerField()})},
    )
    def list(self, request: Request) -> Response:
        """List one layer's memories, newest first, with cursor pagination and filters."""
        params = request.query_params
        layer = params.get("layer")
        if not layer:
            raise InvalidInput("The layer query parameter is required.")
        identifiers = LayerIdentifiers.from_mapping(
            {k: params[k] for k in IDENTIFIER_FIELDS if k in params}
        )
        page = selectors.memory_list(
            require_context(),
            layer=layer,
            identifiers=identifiers,
            cursor=params.get("cursor"),
            limit=int_param(request, "limit", selectors.DEFAULT_PAGE_SIZE),
            metadata_filter=MetadataFilter.from_query_params(params),
        )
        return Response({
            "memories": _memories(page.memories, request),
            "nextCursor": page.next_cursor,
            "totalCount": page.total_count,
        })

    @extend_schema(request=SearchRequestSerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def search(self, request: Request) -> Response:
        """Search by meaning, keyword or both (hybrid, the default), layer by layer.

        Results are ordered by layer precedence (agent first), then score; each carries the
        parts of its score (``similarity``, ``keywordRank``, ``rrf``). Every returned memory
        has its reference count bumped (one UPDATE per request, once the response is sent).
        The per-layer semantic and keyword queries run at the same time
        (``MEMORY_SEARCH_THREADS``).
        """
        body = SearchRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ctx = require_context()
        started = time.perf_counter()
        found = memory_search(ctx, body.to_request(), concurrent=True)
        searched_ms = (time.perf_counter() - started) * 1000
        references.memory_references_record_after_response(
            ctx, memory_ids=[c.memory.pk for c in found.results])
        response = Response({
            "results": search_results(
                found.results, include_superseded=body.validated_data["includeSuperseded"],
                graph=bool(body.validated_data["graphHops"])),
            "totalCount": found.total_count,
            "searchedLayers": [layer.value for layer in found.searched_layers],
        })
        response["Server-Timing"] = ", ".join(
            f"{name};dur={ms:.2f}"
            for name, ms in {**found.timings_ms, "search": searched_ms}.items()
        )
        return response

    @extend_schema(request=RecallRequestSerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def recall(self, request: Request) -> Response:
        """Recall memories about a topic by composite score (seed 002 ``memory_recall``):
        relevance, importance, recency and effective confidence, weighted per scope."""
        body = RecallRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ctx = require_context()
        recalled = memory_recall(ctx, body.to_request(), concurrent=True)
        references.memory_references_record_after_response(
            ctx, memory_ids=[r.candidate.memory.pk for r in recalled]
        )
        return Response({"results": recall_results(recalled)})
