"""Reads of the console's graph explorer: an entity's neighbourhood with the edges to draw,
the colours of its nodes, and a path between two entities laid out step by step.

Nodes come from :func:`graph.selectors.neighbours` (the same list the API serves), so the
drawing and the table below it show exactly the same nodes. The edges of the drawing are the
traversal's own (each node and the node it was first reached from, with the relation) plus
every mention between an entity and a memory that are both shown
(:func:`graph.selectors.entity_memory_ids`). Edges are drawn without a direction: traversals
walk them either way and report the way walked.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from graph import selectors
from graph.ops import ENTITY, MEMORY, MENTIONS
from graph.selectors import GraphPath, Node
from memory_project.errors import InvalidInput
from tenants.audit import parse_uuid
from tenants.context import TenantContext

#: Nodes a neighbourhood shows at most (nearest first).
LIMIT = 60
#: Characters of a node's label in the drawing (the table shows it whole).
SHORT = 28
#: Characters a name typed into a form may have.
MAX_NAME = 200
MEMORY_COLOUR = "#8a8f98"
#: Colours of the entity types extraction gives (``llm.purposes.entities.ENTITY_TYPES``, in
#: any case); any other type gets one of :data:`SPARE` by its name.
TYPE_COLOURS = {
    "PERSON": "#417690", "ORGANISATION": "#b8860b", "ORGANIZATION": "#b8860b",
    "PLACE": "#2e7d32", "OBJECT": "#6f42c1", "EVENT": "#ba2121", "DATE": "#00838f",
    "CONCEPT": "#d84315",
}
SPARE = ("#1565c0", "#ad1457", "#558b2f", "#4527a0", "#00695c", "#795548", "#37474f")


def colour(node: Node) -> str:
    """The drawing's colour of a node: memories grey, entities by type."""
    if node.kind == MEMORY:
        return MEMORY_COLOUR
    key = node.type.upper()
    return TYPE_COLOURS.get(key) or SPARE[zlib.crc32(key.encode()) % len(SPARE)]


def _short(text: str) -> str:
    return text if len(text) <= SHORT else text[:SHORT - 1] + "\u2026"


@dataclass(frozen=True)
class Edge:
    """An edge of the drawing between ``source`` and ``target`` (``relation`` e.g. MENTIONS).
    Drawn without a direction: traversals walk edges either way."""

    source: uuid.UUID
    target: uuid.UUID
    relation: str


@dataclass
class Neighbourhood:
    """An entity, the nodes within ``depth`` hops of it (nearest first) and the edges
    between them that the drawing shows."""

    centre: Node
    nodes: list[Node]
    edges: list[Edge]
    depth: int

    def legend(self) -> list[tuple[str, str]]:
        """``(label, colour)`` of each kind of node shown, entity types by name."""
        found = {(("memory" if n.kind == MEMORY else n.type or "entity"), colour(n))
                 for n in [self.centre, *self.nodes]}
        return sorted(found, key=lambda item: (item[0] == "memory", item[0]))

    def drawing(self, link: Callable[[Node], str]) -> dict[str, Any]:
        """The JSON the page embeds for the drawing; ``link(node)`` is where a click on the
        node goes."""
        def shown(node: Node) -> dict[str, Any]:
            return {"id": str(node.id), "kind": node.kind, "type": node.type,
                    "label": node.label, "short": _short(node.label),
                    "depth": node.depth or 0, "colour": colour(node), "href": link(node)}
        return {
            "centre": str(self.centre.id), "depth": self.depth,
            "nodes": [shown(self.centre)] + [shown(n) for n in self.nodes],
            "edges": [{"source": str(e.source), "target": str(e.target),
                       "relation": e.relation} for e in self.edges],
        }


def _edges(ctx: TenantContext, centre: Node, nodes: list[Node]) -> list[Edge]:
    shown = {centre.id, *(n.id for n in nodes)}
    found: dict[frozenset[uuid.UUID], Edge] = {}
    for node in nodes:
        if node.via is not None and node.via in shown:
            found[frozenset((node.via, node.id))] = Edge(node.via, node.id, node.relation or "")
    entity_ids = [n.id for n in [centre, *nodes] if n.kind == ENTITY]
    for entity, memories in selectors.entity_memory_ids(ctx, entity_ids).items():
        for memory in memories:
            pair = frozenset((memory, entity))
            if memory in shown and pair not in found:
                found[pair] = Edge(memory, entity, MENTIONS)
    return list(found.values())


def neighbourhood(ctx: TenantContext, *, entity_id: Any, depth: Any) -> Neighbourhood:
    """The neighbourhood of one of the tenant's entities, ``depth`` hops deep.

    Raises:
        GraphNodeNotFound: missing, malformed or another tenant's entity id (checked first).
        InvalidInput: depth not an integer from 1 to ``GRAPH_MAX_DEPTH``.
    """
    entity = selectors.entity_get(ctx, entity_id=entity_id)
    hops = selectors.check_depth(depth, name="Depth")
    centre, nodes = selectors.neighbours(ctx, node_id=entity.id, depth=hops, limit=LIMIT)
    return Neighbourhood(centre, nodes, _edges(ctx, centre, nodes), hops)


def checked_name(value: str, label: str) -> str:
    """A name typed into a form, stripped.

    Raises:
        InvalidInput: empty, or longer than :data:`MAX_NAME`.
    """
    text = value.strip()
    if not text:
        raise InvalidInput(f"{label}: type a name.", details={"field": label})
    if len(text) > MAX_NAME:
        raise InvalidInput(f"{label}: at most {MAX_NAME} characters.",
                           details={"field": label, "max_length": MAX_NAME})
    return text


@dataclass
class PathStep:
    """A node of a path and the relation of the edge that led to it from the node before
    (``None`` for the first node)."""

    node: Node
    relation: str | None = None


@dataclass
class PathAnswer:
    """The path form's answer: the two entities, the hop limit and the path, if any."""

    source: Node
    target: Node
    hops: int
    path: GraphPath | None
    steps: list[PathStep] = field(default_factory=list)


def _end(ctx: TenantContext, value: str, label: str) -> Node:
    text = checked_name(value, label)
    if parse_uuid(text) is not None:
        return selectors.entity_get(ctx, entity_id=text)
    return selectors.entity_named(ctx, text, field=label)


def path_answer(ctx: TenantContext, *, source: str, target: str, hops: Any) -> PathAnswer:
    """The shortest path between two entities given by name or id, within ``hops`` hops
    (1 to ``GRAPH_MAX_PATH_HOPS``).

    Raises:
        InvalidInput: an empty or too long name, or hops out of range.
        GraphNodeNotFound: no entity of that name or id in the tenant.
    """
    start = _end(ctx, source, "From")
    end = _end(ctx, target, "To")
    limit = selectors.check_depth(hops, maximum=settings.GRAPH_MAX_PATH_HOPS, name="Hops")
    path = selectors.path_between(ctx, source=start.id, target=end.id, max_depth=limit)
    answer = PathAnswer(start, end, limit, path)
    if path is not None:
        answer.steps = [PathStep(path.nodes[0])] + [
            PathStep(node, step.relation)
            for node, step in zip(path.nodes[1:], path.steps, strict=False)]
    return answer
