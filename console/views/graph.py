"""The knowledge graph explorer: find an entity by name, see its neighbourhood drawn and as a
table, the memories that mention it, and the shortest path between two entities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from console.access import ConsoleAccess, console_view
from console.graph_explorer import (
    Neighbourhood,
    checked_name,
    neighbourhood,
    path_answer,
)
from console.models import ConsoleRole
from graph import selectors
from graph.ops import MEMORY
from graph.selectors import GraphNodeNotFound, Node
from memory_project.errors import MemoryServiceError

#: Entities a name search lists at most.
MATCHES = 25
DEFAULT_DEPTH = 2


def _context(request: HttpRequest, access: ConsoleAccess, **extra: Any) -> dict[str, Any]:
    """What every graph page shows: both forms with what was typed, and the hop limits."""
    get = request.GET
    return {
        "access": access, "tab": "graph", "title": f"{access.tenant.name}: knowledge graph",
        "q": get.get("q", ""), "path_from": get.get("from", ""), "path_to": get.get("to", ""),
        "path_hops": get.get("hops", str(settings.GRAPH_MAX_PATH_HOPS)),
        "depths": list(range(1, settings.GRAPH_MAX_DEPTH + 1)),
        "max_path_hops": settings.GRAPH_MAX_PATH_HOPS, **extra,
    }


def _linker(access: ConsoleAccess, depth: int) -> Callable[[Node], str]:
    """Where a click on a node goes: an entity's neighbourhood (same depth), a memory's page."""
    slug = access.tenant.slug

    def link(node: Node) -> str:
        if node.kind == MEMORY:
            return reverse("console:memory", args=[slug, node.id])
        return reverse("console:graph-entity", args=[slug, node.id]) + f"?depth={depth}"
    return link


@console_view(ConsoleRole.ADMIN)
def graph_index(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/graph/?q=&from=&to=&hops=``: entities whose name or an alias
    contains ``q``; with ``from`` and ``to`` (names or ids) the shortest path between them
    within ``hops`` hops, or that there is none. Bad input (an empty or unknown name, hops
    out of range) is a message on the page with status 400 (404 for an unknown name)."""
    extra: dict[str, Any] = {}
    status = 200
    get = request.GET
    if "q" in get:
        try:
            extra["matches"] = selectors.entity_search(
                access.ctx, query=checked_name(get["q"], "Name"), limit=MATCHES)
        except MemoryServiceError as err:
            extra["search_error"], status = err.message, err.status
    if "from" in get or "to" in get:
        try:
            extra["answer"] = path_answer(access.ctx, source=get.get("from", ""),
                                          target=get.get("to", ""),
                                          hops=get.get("hops") or settings.GRAPH_MAX_PATH_HOPS)
        except MemoryServiceError as err:
            extra["path_error"], status = err.message, err.status
    return render(request, "console/graph.html", _context(request, access, **extra),
                  status=status)


@console_view(ConsoleRole.ADMIN)
def graph_entity(request: HttpRequest, access: ConsoleAccess, entity_id: str) -> HttpResponse:
    """``/console/t/<slug>/graph/entities/<id>/?depth=1..3``: the entity, its neighbourhood
    drawn (nodes coloured by kind and type; a click opens an entity's neighbourhood or a
    memory's page) and as a table, and the memories that mention it. A missing, malformed or
    another tenant's id answers the console's not-found page (404); a depth out of range is a
    message on the page (400)."""
    depth = request.GET.get("depth") or str(DEFAULT_DEPTH)
    try:
        entity = selectors.entity_get(access.ctx, entity_id=entity_id)
        memories = selectors.entity_memories(access.ctx, entity_id=entity.id)
    except GraphNodeNotFound:
        return render(request, "console/not_found.html", status=404)
    extra: dict[str, Any] = {"entity": entity, "memories": memories, "depth": depth}
    try:
        found: Neighbourhood = neighbourhood(access.ctx, entity_id=entity.id, depth=depth)
    except MemoryServiceError as err:
        return render(request, "console/graph.html", _context(
            request, access, depth_error=err.message, **extra), status=err.status)
    return render(request, "console/graph.html", _context(
        request, access, near=found, legend=found.legend(),
        drawing=found.drawing(_linker(access, found.depth)), **extra))
