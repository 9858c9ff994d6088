"""The endpoints of layer summaries and context assembly under ``/api/v1/`` (seed 001 "Layer
Summary Storage", "Summary Retrieval", "Get all summaries for context"; issue "Layer summaries
and context assembly").

- ``GET  summaries?userId=…&projectId=…&depth=…``: the summaries of every layer the
  identifiers grant, with freshness;
- ``GET  summaries/{layer}?depth=…&<the layer's identifiers>``: one layer's summary at one
  depth, or ``{"summary": null}``;
- ``POST summaries/regenerate`` ``{"layer", "identifiers"}``: queue a regeneration (202);
- ``POST context`` ``{"identifiers", "query"?, "budget"?, "depth"?, "summaryShare"?,
  "format"?}``: summaries and memories within a token budget, as JSON or Markdown.

Another tenant's identifiers name nothing in the caller's tenant: they answer like missing
ones (no summary, an empty list, a context without another tenant's memories).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.params import only_params, validated
from memories.restrictions import check_layer
from memories.retrieval.partition import resolve_identifiers
from memories.services import references
from memory_project.errors import InvalidInput
from memory_project.validation import IDENTIFIER_PATTERN
from summaries.api.serializers import (
    FORMATS,
    LAYERS,
    ContextRequestSerializer,
    ContextSerializer,
    RegenerateAcceptedSerializer,
    RegenerateSerializer,
    SummaryAnswerSerializer,
    SummaryListSerializer,
    identifiers_of,
    regenerate_accepted,
    summary_item,
)
from summaries.context import context_as_dict, context_assemble
from summaries.models import Depth, Priority
from summaries.scopes import scope_for
from summaries.selectors import personal_for, summaries_for, summary_get
from summaries.services import summary_request
from summaries.tokens import TOKENIZER_NAME
from tenants.context import require_context
from tenants.layers import IDENTIFIER_FIELDS, MAX_IDENTIFIER_LENGTH, LayerIdentifiers, parse_layer

#: The depth ``GET summaries/{layer}`` answers when the call names none.
DEFAULT_DEPTH = Depth.PARAGRAPH.value
MARKDOWN = "text/markdown"
_DEPTHS = list(Depth.values)

IDENTIFIER_DOCS = [
    OpenApiParameter(name, {"type": "string", "minLength": 1,
                            "maxLength": MAX_IDENTIFIER_LENGTH, "pattern": IDENTIFIER_PATTERN},
                     description=f"Identifier {name}.")
    for name in IDENTIFIER_FIELDS
]


def identifiers_param(request: Request) -> LayerIdentifiers:
    """The layer identifiers among the query parameters, each given at most once.

    Raises:
        InvalidInput: an identifier given twice, blank, over-long or holding NUL.
    """
    params = request.query_params
    repeated = sorted(name for name in IDENTIFIER_FIELDS if len(params.getlist(name)) > 1)
    if repeated:
        raise InvalidInput(f"Give each identifier once: {', '.join(repeated)}.",
                           details={"repeated": repeated})
    return LayerIdentifiers.from_mapping(
        {name: params[name] for name in IDENTIFIER_FIELDS if name in params})


def depths_param(request: Request) -> list[str] | None:
    """The ``depth`` query parameter: repeated or comma-separated, duplicates dropped;
    ``None`` when absent (every depth). Unknown names are the selector's check."""
    given = request.query_params.getlist("depth")
    if not given:
        return None
    return list(dict.fromkeys(part.strip() for value in given for part in value.split(",")))


def depth_param(request: Request) -> str:
    """The one ``depth`` of ``GET summaries/{layer}`` (default :data:`DEFAULT_DEPTH`).

    Raises:
        InvalidInput: the parameter is given more than once.
    """
    given = request.query_params.getlist("depth")
    if len(given) > 1:
        raise InvalidInput("Give one depth.", details={"field": "depth", "allowed": _DEPTHS})
    return given[0] if given else DEFAULT_DEPTH


def prefers_markdown(request: Request) -> bool:
    """Whether the ``Accept`` header prefers Markdown to JSON."""
    preferred = request._request.get_preferred_type(["application/json", MARKDOWN])
    return bool(preferred == MARKDOWN)


def wants_markdown(request: Request, body_format: str | None) -> bool:
    """How to answer a context: ``format`` (query parameter or body field), else ``Accept``.

    Raises:
        InvalidInput: an unknown ``format`` query parameter, or one that contradicts the
            body's.
    """
    query_format = request.query_params.get("format")
    if query_format is not None and query_format not in FORMATS:
        raise InvalidInput(f"Unknown format {query_format!r}.",
                           details={"field": "format", "allowed": FORMATS})
    if query_format and body_format and query_format != body_format:
        raise InvalidInput("The format query parameter and body field disagree.",
                           details={"field": "format"})
    chosen = query_format or body_format
    return chosen == "markdown" if chosen else prefers_markdown(request)


class MarkdownOrJsonNegotiation(DefaultContentNegotiation):
    """DRF renders this view's JSON answers and errors; when the caller asks for Markdown
    (``Accept: text/markdown``, ``format``) the view answers the Markdown itself, so the
    request is not refused as unacceptable and an error still is the JSON envelope."""

    def select_renderer(self, request: Request, renderers: Iterable[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        if "format" in request.query_params or prefers_markdown(request):
            first = next(iter(renderers))
            return first, first.media_type
        return super().select_renderer(request, renderers, format_suffix)


class SummaryListView(APIView):
    """The summaries of every layer the identifiers grant."""

    operation_name = {"get": "summary.list"}

    @extend_schema(operation_id="summary_list", parameters=[
        *IDENTIFIER_DOCS,
        OpenApiParameter("depth", {"type": "array", "items": {"type": "string",
                                                              "enum": _DEPTHS}},
                         explode=True, description="only these depths (repeat the "
                                                   "parameter or separate by commas)")],
        responses={200: SummaryListSerializer})
    def get(self, request: Request) -> Response:
        """``{"summaries": [summary], "totalTokens": n, "tokenizer": name}``: every layer
        the identifiers grant (a restricted key's layers only), in precedence order (agent,
        user, session, project, team, org, company), each layer's depths shortest first.

        Each summary: ``{id, layer, scope, personalized, personalizationContext, depth,
        content, sentences: [{text, sourceIds}], sourceIds, sourceCount, tokenCount,
        sourceHash, generatedAt, model, trigger, stale, needsRegeneration, ageSeconds,
        reasons}``. A stale summary (``reasons``: ``sources_changed``, ``invalidated``,
        ``max_age``) is served, flagged, and queued for regeneration.

        Raises: 400 ``INVALID_INPUT`` (an unknown parameter or depth, a bad identifier),
        403 ``UNAUTHORIZED`` (an identifier against a restricted key's pin)."""
        only_params(request, {*IDENTIFIER_FIELDS, "depth"})
        served = summaries_for(require_context(), identifiers=identifiers_param(request),
                               depths=depths_param(request))
        return Response({"summaries": [summary_item(s) for s in served],
                         "totalTokens": sum(s.summary.token_count for s in served),
                         "tokenizer": TOKENIZER_NAME})


class SummaryView(APIView):
    """One layer's summary at one depth."""

    operation_name = {"get": "summary.get"}

    @extend_schema(operation_id="summary_get", parameters=[
        OpenApiParameter("layer", {"type": "string", "enum": LAYERS}, OpenApiParameter.PATH,
                         description="The layer."),
        *IDENTIFIER_DOCS,
        OpenApiParameter("depth", {"type": "string", "enum": _DEPTHS},
                         description=f"default {DEFAULT_DEPTH}")],
        responses={200: SummaryAnswerSerializer})
    def get(self, request: Request, layer: str) -> Response:
        """``{"summary": summary}`` (fields as in the list), or ``{"summary": null}`` when
        the layer's scope has no summary at that depth yet. The layer's identifiers are
        required (``projectId`` for ``project``; ``agentId`` and ``userId`` for ``agent``);
        a layer configured to personalize answers with the user's or session's summary when
        it exists, else with the shared one.

        Raises: 400 ``INVALID_LAYER`` (unknown layer), ``INVALID_INPUT`` (unknown depth or
        parameter), ``MISSING_IDENTIFIER`` (the layer's identifiers are missing), 403
        ``UNAUTHORIZED`` (a layer or identifier a restricted key may not use)."""
        only_params(request, {*IDENTIFIER_FIELDS, "depth"})
        served = summary_get(require_context(), layer=layer,
                             identifiers=identifiers_param(request),
                             depth=depth_param(request))
        return Response({"summary": summary_item(served) if served else None})


class SummaryRegenerateView(APIView):
    """Ask for a layer scope's summaries to be written again."""

    operation_name = {"post": "summary.regenerate"}

    @extend_schema(operation_id="summary_regenerate", request=RegenerateSerializer,
                   responses={202: RegenerateAcceptedSerializer})
    def post(self, request: Request) -> Response:
        """202 ``{"scope", "layer", "pendingSince", "priority": "high"}``: the scope is
        marked pending and its regeneration job queued at high priority (it runs in a
        worker; the summaries' ``generatedAt`` tells when it has). The layer's identifiers
        are required; a layer configured to personalize regenerates the user's or
        session's summary when that identifier is given.

        Raises: 400 ``INVALID_LAYER``, ``INVALID_INPUT``, ``MISSING_IDENTIFIER``; 429
        ``BUDGET_EXCEEDED`` when a language model writes summaries and the summarization
        budget is spent (nothing is queued)."""
        data = validated(RegenerateSerializer, request)
        ctx = require_context()
        layer = parse_layer(data["layer"])
        check_layer(ctx, layer)
        resolved = resolve_identifiers(ctx, identifiers_of(data))
        scope = scope_for(layer, resolved, personal_for(ctx, layer, resolved))
        row = summary_request(ctx, scope=scope, priority=Priority.HIGH, trigger="manual")
        return Response(regenerate_accepted(row), status=status.HTTP_202_ACCEPTED)


class ContextView(APIView):
    """What an agent reads before it acts: summaries and memories within a token budget."""

    operation_name = {"post": "context.assemble"}
    content_negotiation_class = MarkdownOrJsonNegotiation

    @extend_schema(operation_id="context_assemble", request=ContextRequestSerializer,
                   parameters=[OpenApiParameter(
                       "format", {"type": "string", "enum": FORMATS},
                       description="markdown: answer text/markdown (as with Accept: "
                                   "text/markdown)")],
                   responses={(200, "application/json"): ContextSerializer,
                              (200, MARKDOWN): OpenApiTypes.STR})
    def post(self, request: Request) -> HttpResponse:
        """The context for the identifiers: the layers' summaries, most relevant to the
        query first (without a query: by precedence), each at the deepest depth that fits
        the summary share of the budget (30 % unless ``summaryShare`` says otherwise) and
        does not push out a memory more relevant to the query than what it says; then the
        memories that answer the query best, while they fit. ``tokenCount`` is that of
        the Markdown rendering and never exceeds ``budget``; ``layerScores`` says why a
        layer's summary was left out. Every included memory has its reference count bumped.

        JSON by default; Markdown ready for a prompt with ``Accept: text/markdown`` or
        ``format=markdown`` (query parameter or body field), with headers
        ``X-Token-Count`` and ``X-Token-Budget``. Errors are always the JSON envelope.

        Raises: 400 ``INVALID_INPUT`` (budget outside 50..32000, summaryShare outside 0..1,
        unknown depth, blank query, identifiers not an object), ``QUERY_TOO_LONG``, 403
        ``UNAUTHORIZED`` (an identifier against a restricted key's pin)."""
        only_params(request, {"format"})
        body = ContextRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        markdown = wants_markdown(request, body.validated_data["format"])
        ctx = require_context()
        result = context_assemble(ctx, body.to_request())
        references.memory_references_record_after_response(
            ctx, memory_ids=[m.memory.pk for m in result.memories])
        response: HttpResponse
        if markdown:
            response = HttpResponse(result.markdown(), content_type=f"{MARKDOWN}; charset=utf-8")
            response["X-Token-Count"] = str(result.token_count)
            response["X-Token-Budget"] = str(result.budget)
        else:
            response = Response(context_as_dict(result))
        patch_vary_headers(response, ["Accept"])
        return response
