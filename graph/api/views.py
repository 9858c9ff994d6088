"""The knowledge graph's endpoints under ``/api/v1/graph/`` (seed 001 "Dynamic Graph
Reasoning", "Entity Relation Traversal", "Point-in-time recovery").

- ``GET  graph/entities?q=…&limit=…``: entities by name or alias;
- ``GET  graph/entities/{entity_id}``: one entity;
- ``GET  graph/entities/{entity_id}/memories?limit=…``: the memories that mention it;
- ``GET  graph/memories/{memory_id}/entities``: the entities a memory mentions;
- ``GET  graph/nodes/{node_id}/neighbours?depth=…&limit=…&kind=…``: an entity's or a
  memory's neighbourhood;
- ``GET  graph/path?from=…&to=…`` or ``?fromName=…&toName=…`` (``maxDepth``): the shortest
  path between two nodes, explained;
- ``POST graph/restore`` ``{"at": …}``: point-in-time restore of the caller's graph.

Every read goes to the caller's own graph (``graph.selectors``); an unknown, malformed or
another tenant's id answers the same 404.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from graph import maintenance, selectors
from graph.api.serializers import (
    EntityListSerializer,
    EntityMemoriesSerializer,
    EntitySerializer,
    NeighboursSerializer,
    PathSerializer,
    RestoreResultSerializer,
    RestoreSerializer,
    entities,
    graph_memories,
    graph_nodes,
    path_result,
)
from graph.ops import ENTITY, MEMORY
from memories.api.params import only_params, validated
from memory_project.errors import InvalidInput, QueryTooLong
from memory_project.validation import IDENTIFIER_PATTERN
from tenants.context import require_context

#: Most results one graph read returns, and the defaults of the search and the other lists.
MAX_LIMIT = 100
SEARCH_LIMIT = 20
LIST_LIMIT = 50
#: The longest ``q``, ``fromName`` and ``toName``.
MAX_NAME_LENGTH = 200

_UUID = {"type": "string", "format": "uuid"}
_NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH,
         "pattern": IDENTIFIER_PATTERN}


def _limit_doc(default: int) -> OpenApiParameter:
    return OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                            description=f"1..{MAX_LIMIT}, default {default}")


def _id_doc(name: str, what: str) -> OpenApiParameter:
    return OpenApiParameter(name, _UUID, OpenApiParameter.PATH, description=what)


def limit_param(request: Request, default: int) -> int:
    """The ``limit`` query parameter: an integer from 1 to :data:`MAX_LIMIT`.

    Raises:
        InvalidInput: anything else (``details``: field, min, max).
    """
    raw = request.query_params.get("limit")
    return default if raw is None else selectors.check_depth(raw, maximum=MAX_LIMIT,
                                                             name="limit")


def name_param(request: Request, field: str) -> str:
    """A text query parameter that names an entity (``q``, ``fromName``, ``toName``).

    Raises:
        InvalidInput: missing, blank, or holding NUL.
        QueryTooLong: over :data:`MAX_NAME_LENGTH` characters (``details.max_length``).
    """
    raw = request.query_params.get(field)
    if raw is None or not raw.strip() or "\x00" in raw:
        raise InvalidInput(f"{field} must be a non-empty name.", details={"field": field})
    if len(raw) > MAX_NAME_LENGTH:
        raise QueryTooLong(f"{field} has {len(raw)} characters; the limit is "
                           f"{MAX_NAME_LENGTH}.", details={"field": field,
                                                           "max_length": MAX_NAME_LENGTH,
                                                           "length": len(raw)})
    return raw


class EntitySearchView(APIView):
    """Find entities of the caller's graph by name."""

    operation_name = {"get": "graph.entity_search"}

    @extend_schema(operation_id="graph_entity_search", parameters=[
        OpenApiParameter("q", _NAME, required=True,
                         description="part of a name or alias (case-insensitive)"),
        _limit_doc(SEARCH_LIMIT)], responses={200: EntityListSerializer})
    def get(self, request: Request) -> Response:
        """``{"results": [{id, name, type, aliases}]}``: entities whose name or an alias
        contains ``q``, exact matches first, then by name.

        Raises: 400 ``INVALID_INPUT`` (q missing or blank, limit out of 1..100),
        ``QUERY_TOO_LONG`` (q over 200 characters)."""
        only_params(request, {"q", "limit"})
        found = selectors.entity_search(require_context(), query=name_param(request, "q"),
                                        limit=limit_param(request, SEARCH_LIMIT))
        return Response({"results": entities(found)})


class EntityView(APIView):
    """One entity of the caller's graph."""

    operation_name = {"get": "graph.entity_get"}

    @extend_schema(operation_id="graph_entity_get",
                   parameters=[_id_doc("entity_id", "The entity's id.")],
                   responses={200: EntitySerializer})
    def get(self, request: Request, entity_id: str) -> Response:
        """``{id, name, type, aliases}``. Raises: 404 ``NOT_FOUND`` for a missing, malformed
        or another tenant's id."""
        only_params(request, set())
        entity = selectors.entity_get(require_context(), entity_id=entity_id)
        return Response(entities([entity])[0])


class EntityMemoriesView(APIView):
    """The memories that mention an entity."""

    operation_name = {"get": "graph.entity_memories"}

    @extend_schema(operation_id="graph_entity_memories",
                   parameters=[_id_doc("entity_id", "The entity's id."),
                               _limit_doc(LIST_LIMIT)],
                   responses={200: EntityMemoriesSerializer})
    def get(self, request: Request, entity_id: str) -> Response:
        """``{"entity": {…}, "results": [{id, content, layer, createdAt}]}``, newest
        memory first (the live memories the caller may read). Raises: 404 ``NOT_FOUND``
        (unknown entity), 400 ``INVALID_INPUT`` (limit out of 1..100)."""
        only_params(request, {"limit"})
        ctx = require_context()
        size = limit_param(request, LIST_LIMIT)
        entity = selectors.entity_get(ctx, entity_id=entity_id)
        memories = selectors.entity_memories(ctx, entity_id=entity.id, limit=size)
        return Response({"entity": entities([entity])[0], "results": graph_memories(memories)})


class MemoryEntitiesView(APIView):
    """The entities a memory mentions."""

    operation_name = {"get": "graph.memory_entities"}

    @extend_schema(operation_id="graph_memory_entities",
                   parameters=[_id_doc("memory_id", "The memory's id.")],
                   responses={200: EntityListSerializer})
    def get(self, request: Request, memory_id: str) -> Response:
        """``{"results": [{id, name, type, aliases}]}`` by name (empty until the memory's
        extraction has run). Raises: 404 ``MEMORY_NOT_FOUND`` for a missing, deleted,
        malformed or another tenant's id."""
        only_params(request, set())
        found = selectors.memory_entities(require_context(), memory_id=memory_id)
        return Response({"results": entities(found)})


class NeighboursView(APIView):
    """The neighbourhood of an entity or a memory."""

    operation_name = {"get": "graph.neighbours"}

    @extend_schema(operation_id="graph_neighbours", parameters=[
        _id_doc("node_id", "An entity's or a memory's id."),
        OpenApiParameter("depth", {"type": "integer", "minimum": 1,
                                   "maximum": settings.GRAPH_MAX_DEPTH},
                         description=f"hops, 1..{settings.GRAPH_MAX_DEPTH} "
                                     f"(default {settings.GRAPH_MAX_DEPTH})"),
        _limit_doc(LIST_LIMIT),
        OpenApiParameter("kind", str, enum=[ENTITY, MEMORY],
                         description="only nodes of this kind")],
        responses={200: NeighboursSerializer})
    def get(self, request: Request, node_id: str) -> Response:
        """``{"node": node, "results": [node]}``, nodes ``{id, kind, label, type,
        aliases?, depth}`` nearest first. Raises: 404 for an unknown node, 400
        ``INVALID_INPUT`` for depth, limit or kind out of range."""
        only_params(request, {"depth", "limit", "kind"})
        start, near = selectors.neighbours(
            require_context(), node_id=node_id, depth=request.query_params.get("depth"),
            limit=limit_param(request, LIST_LIMIT), kind=request.query_params.get("kind"))
        return Response({"node": graph_nodes([start])[0], "results": graph_nodes(near)})


class PathView(APIView):
    """The shortest path between two nodes, with its explanation."""

    operation_name = {"get": "graph.path"}

    @extend_schema(operation_id="graph_path", parameters=[
        OpenApiParameter("from", _UUID, description="id of the first node (with to)"),
        OpenApiParameter("to", _UUID, description="id of the second node (with from)"),
        OpenApiParameter("fromName", _NAME, description="name of the first entity "
                                                        "(with toName; instead of from/to)"),
        OpenApiParameter("toName", _NAME, description="name of the second entity"),
        OpenApiParameter("maxDepth", {"type": "integer", "minimum": 1,
                                      "maximum": settings.GRAPH_MAX_PATH_HOPS},
                         description=f"most hops, 1..{settings.GRAPH_MAX_PATH_HOPS} "
                                     f"(default {settings.GRAPH_MAX_PATH_HOPS})")],
        responses={200: PathSerializer})
    def get(self, request: Request) -> Response:
        """``{found, hops, nodes, steps: [{source, target, relation}], explanation}``;
        ``found: false`` with no nodes when the two are not connected within ``maxDepth``.

        Exactly one pair: ``from`` and ``to`` (entity or memory ids) or ``fromName`` and
        ``toName`` (entity names). Raises: 400 ``INVALID_INPUT`` (no pair, both, half a
        pair, maxDepth out of range), 404 (an unknown end, or a name no entity has)."""
        only_params(request, {"from", "to", "fromName", "toName", "maxDepth"})
        params = request.query_params
        ids, names = ("from", "to"), ("fromName", "toName")
        given = {field for field in (*ids, *names) if field in params}
        if given not in (set(ids), set(names)):
            raise InvalidInput("Give either from and to, or fromName and toName.",
                               details={"pairs": [list(ids), list(names)],
                                        "given": sorted(given)})
        by_ids = given == set(ids)
        pair = [params[field] if by_ids else name_param(request, field) for field in
                (ids if by_ids else names)]
        top = settings.GRAPH_MAX_PATH_HOPS
        hops = top if "maxDepth" not in params else selectors.check_depth(
            params["maxDepth"], maximum=top, name="maxDepth")
        find = selectors.path_between if by_ids else selectors.path_between_names
        path = find(require_context(), source=pair[0], target=pair[1], max_depth=hops)
        return Response(path_result(path, max_depth=hops))


class RestoreView(APIView):
    """Point-in-time restore of the caller's graph (admin keys)."""

    operation_name = {"post": "graph.restore"}

    @extend_schema(operation_id="graph_restore", request=RestoreSerializer,
                   responses={200: RestoreResultSerializer})
    def post(self, request: Request) -> Response:
        """Replace the caller's graph with the newest backup taken at or before ``at``, then
        remove the graph data of memories erased since. Audited (``graph_restored``).

        Raises: 400 ``INVALID_INPUT`` (``at`` missing or without a timezone), 404
        ``NOT_FOUND`` (no backup that old), 503 (object store or graph writer
        unavailable)."""
        data = validated(RestoreSerializer, request)
        return Response(maintenance.graph_restore(require_context(), at=data["at"]))
