"""Reads of the knowledge graph for the API, the console and search: entities, the memories
that mention them, neighbourhoods, and paths with a reading a person can follow (seed 001
"Dynamic Graph Reasoning": "return a reasoning path explaining the link").

Every function takes the caller's :class:`TenantContext` and reads the tenant's own reader
graph (``graph.store.reader``) through the tenant query layer. Unknown ids, malformed ids and
another tenant's ids all raise the same 404 (:class:`GraphNodeNotFound`, or
``MEMORY_NOT_FOUND`` for a memory id, which is also recorded as a probe).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from graph import store
from graph.ops import ENTITY, MEMORY, MENTIONS
from graph.tenant_sql import tenant_execute
from graph.traversal import Hop, find_related, shortest_path
from llm.purposes.entities import canonical_name
from memories.models import Memory, State
from memory_project.errors import InvalidInput, MemoryNotFound, NotFound
from tenants.audit import audit_cross_tenant_probe, owned_or_not_found, parse_uuid
from tenants.context import TenantContext

SNIPPET_CHARS = 160


class GraphNodeNotFound(NotFound):
    """No such entity or memory in the caller's graph (404 ``NOT_FOUND``)."""

    default_message = "No such node in the graph."


@dataclass(frozen=True)
class Node:
    """A node as the API shows it: ``kind`` is ``entity`` (``label`` its name, ``type``) or
    ``memory`` (``label`` the start of its content, ``type`` its layer). In a neighbourhood,
    ``depth`` is its hop distance, ``via`` the node it was reached from and ``relation`` the
    relation of that edge."""

    id: uuid.UUID
    kind: str
    label: str
    type: str
    aliases: tuple[str, ...] = ()
    depth: int | None = None
    via: uuid.UUID | None = None
    relation: str | None = None


@dataclass(frozen=True)
class Step:
    """One edge of a path, as stored: ``source`` → ``target`` (a path may walk it either
    way)."""

    source: uuid.UUID
    target: uuid.UUID
    relation: str


@dataclass
class GraphPath:
    """A path: its nodes from source to target, its steps, and ``explanation`` in words."""

    nodes: list[Node]
    steps: list[Step]
    explanation: str = ""
    hops: int = field(init=False)

    def __post_init__(self) -> None:
        self.hops = len(self.steps)


def check_depth(depth: Any, *, maximum: int | None = None, name: str = "depth") -> int:
    """``depth`` as an int within 1..maximum (default ``GRAPH_MAX_DEPTH``, 3).

    Raises:
        InvalidInput: not an integer in range (``details`` give the bounds).
    """
    top = maximum or settings.GRAPH_MAX_DEPTH
    try:
        value = int(depth)
    except (TypeError, ValueError):
        value = 0
    if isinstance(depth, bool) or not 1 <= value <= top or str(depth).strip() != str(value):
        raise InvalidInput(f"{name} must be an integer from 1 to {top}.",
                           details={"field": name, "min": 1, "max": top})
    return value


def _cursor(ctx: TenantContext, tables: tuple[str, ...] | None = None) -> Any:
    graph = store.reader(ctx.tenant_id)
    return graph.cursor(tables) if tables else graph.cursor()


def _tenant(ctx: TenantContext) -> str:
    return str(ctx.tenant_id)


def _entity_rows(ctx: TenantContext, sql: str, *, tables: tuple[str, ...] = ("entities",),
                 **params: Any) -> list[Node]:
    rows = tenant_execute(_cursor(ctx, tables), sql,
                          {"tenant_id": _tenant(ctx), **params})
    return [Node(id=row[0], kind=ENTITY, label=row[1], type=row[2], aliases=tuple(row[3]))
            for row in rows]


def entity_search(ctx: TenantContext, *, query: str, limit: int = 20) -> list[Node]:
    """Entities whose canonical name or an alias contains ``query`` (case-insensitive),
    exact matches first, then by name."""
    needle = canonical_name(query) or query.strip().casefold()
    if not needle:
        raise InvalidInput("q must name an entity.", details={"field": "q"})
    return _entity_rows(
        ctx, "SELECT id, name, type, aliases FROM entities WHERE tenant_id = $tenant_id "
        "AND deleted_at IS NULL AND (contains(canonical, $needle) OR len(list_filter(aliases, "
        "lambda x: contains(lower(x), $needle))) > 0) ORDER BY canonical <> $needle, name, id "
        "LIMIT $limit", needle=needle, limit=limit)


def entity_get(ctx: TenantContext, *, entity_id: Any) -> Node:
    """One entity of the caller's tenant.

    Raises:
        GraphNodeNotFound: missing, malformed or another tenant's id.
    """
    pk = parse_uuid(entity_id)
    rows = [] if pk is None else _entity_rows(
        ctx, "SELECT id, name, type, aliases FROM entities WHERE tenant_id = $tenant_id "
        "AND id = $id AND deleted_at IS NULL", id=pk)
    if not rows:
        raise GraphNodeNotFound(details={"id": str(entity_id)})
    return rows[0]


def entities_by_name(ctx: TenantContext, names: list[str]) -> list[Node]:
    """The entities whose canonical name is one of ``names`` (already canonical)."""
    if not names:
        return []
    return _entity_rows(
        ctx, "SELECT id, name, type, aliases FROM entities WHERE tenant_id = $tenant_id AND "
        "deleted_at IS NULL AND canonical IN (SELECT unnest($names))", names=names)


def known_types(ctx: TenantContext) -> dict[str, str]:
    """Every canonical entity name of the tenant with its type: extraction finds these names
    in any case and keeps their type; search matches queries against them. Read once per
    snapshot version (``ReaderGraph.entity_types``); the caller gets its own copy."""
    return dict(store.reader(ctx.tenant_id).entity_types())


def _memory(ctx: TenantContext, memory_id: Any) -> Memory:
    return owned_or_not_found(
        ctx, Memory.objects.exclude(state=State.DELETED), memory_id,
        not_found=lambda: MemoryNotFound(operation="graph.memory_entities",
                                         details={"id": str(memory_id)}))


def memory_entities(ctx: TenantContext, *, memory_id: Any) -> list[Node]:
    """The entities a memory mentions, by name.

    Raises:
        MemoryNotFound: no such (live) memory in the caller's tenant.
    """
    memory = _memory(ctx, memory_id)
    return _entity_rows(
        ctx, "SELECT e.id, e.name, e.type, e.aliases FROM entities e WHERE e.tenant_id = "
        "$tenant_id AND e.deleted_at IS NULL AND e.id IN (SELECT m.target_id FROM memory_edges m "
        "WHERE m.tenant_id = $tenant_id AND m.source_id = $id AND m.deleted_at IS NULL) "
        "ORDER BY e.name, e.id", id=memory.pk, tables=("entities", "memory_edges"))


def entity_memory_ids(ctx: TenantContext, entity_ids: list[uuid.UUID]) -> dict[uuid.UUID,
                                                                                 list[uuid.UUID]]:
    """For each entity, the ids of the memories that mention it (newest first)."""
    if not entity_ids:
        return {}
    rows = tenant_execute(
        _cursor(ctx, ("memory_edges",)), "SELECT m.target_id, m.source_id FROM memory_edges m "
        "WHERE m.tenant_id = $tenant_id AND m.deleted_at IS NULL AND m.relation = $mentions "
        "AND m.target_id IN (SELECT unnest($ids)) ORDER BY m.source_id DESC",
        {"tenant_id": _tenant(ctx), "ids": entity_ids, "mentions": MENTIONS})
    found: dict[uuid.UUID, list[uuid.UUID]] = {}
    for entity, memory in rows:
        found.setdefault(entity, []).append(memory)
    return found


def entity_memories(ctx: TenantContext, *, entity_id: Any, limit: int = 50) -> list[Memory]:
    """The live memories that mention an entity, newest first.

    Raises:
        GraphNodeNotFound: no such entity in the caller's tenant.
    """
    entity = entity_get(ctx, entity_id=entity_id)
    ids = entity_memory_ids(ctx, [entity.id]).get(entity.id, [])
    return list(Memory.objects.exclude(state=State.DELETED).filter(pk__in=ids)
                .order_by("-created_at", "pk")[:limit])


def _node_kind(ctx: TenantContext, node_id: Any) -> tuple[uuid.UUID, str]:
    """The id and kind of an entity or memory id; 404 when it is neither."""
    pk = parse_uuid(node_id)
    if pk is not None:
        if _entity_rows(ctx, "SELECT id, name, type, aliases FROM entities WHERE tenant_id = "
                        "$tenant_id AND id = $id AND deleted_at IS NULL", id=pk):
            return pk, ENTITY
        if Memory.objects.exclude(state=State.DELETED).filter(pk=pk).exists():
            return pk, MEMORY
        audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    raise GraphNodeNotFound(details={"id": str(node_id)})


def describe(ctx: TenantContext, hops: Sequence[tuple[uuid.UUID, str, int | None]]
             ) -> list[Node]:
    """Nodes with their labels: entity names from the graph, memory snippets from the
    memory store (memories deleted meanwhile are left out)."""
    entity_ids = [pk for pk, kind, _ in hops if kind == ENTITY]
    memory_ids = [pk for pk, kind, _ in hops if kind == MEMORY]
    entities = {n.id: n for n in _entity_rows(
        ctx, "SELECT id, name, type, aliases FROM entities WHERE tenant_id = $tenant_id AND "
        "id IN (SELECT unnest($ids))", ids=entity_ids)} if entity_ids else {}
    memories = {m.pk: m for m in Memory.objects.exclude(state=State.DELETED)
                .filter(pk__in=memory_ids).only("pk", "content", "layer")}
    nodes = []
    for pk, kind, depth in hops:
        if kind == ENTITY and pk in entities:
            e = entities[pk]
            nodes.append(Node(pk, ENTITY, e.label, e.type, e.aliases, depth))
        elif kind == MEMORY and pk in memories:
            m = memories[pk]
            nodes.append(Node(pk, MEMORY, _snippet(m.content), m.layer, (), depth))
    return nodes


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS - 1] + "…"


def neighbours(ctx: TenantContext, *, node_id: Any, depth: Any = None, limit: int = 50,
               kind: str | None = None) -> tuple[Node, list[Node]]:
    """The node and the nodes within ``depth`` hops of it (default and maximum
    ``GRAPH_MAX_DEPTH``), nearest first.

    Raises:
        InvalidInput: depth outside 1..max, or an unknown ``kind``.
        GraphNodeNotFound / MemoryNotFound: unknown node.
    """
    hops = check_depth(settings.GRAPH_MAX_DEPTH if depth is None else depth)
    if kind not in (None, ENTITY, MEMORY):
        raise InvalidInput("kind must be entity or memory.", details={"field": "kind"})
    pk, start_kind = _node_kind(ctx, node_id)
    found = find_related(store.reader(ctx.tenant_id).adjacency(), _tenant(ctx), start=pk,
                         depth=hops, limit=limit, kind=kind)
    start = describe(ctx, [(pk, start_kind, 0)])[0]
    steps = {h.node: h for h in found}
    return start, [replace(node, via=steps[node.id].via, relation=steps[node.id].relation)
                   for node in describe(ctx, [(h.node, h.kind, h.depth) for h in found])]


def path_between(ctx: TenantContext, *, source: Any, target: Any,
                 max_depth: Any = None) -> GraphPath | None:
    """The shortest path between two entities or memories (ids), with its explanation;
    ``None`` when they are not connected within ``max_depth`` hops (default and maximum
    ``GRAPH_MAX_PATH_HOPS``, 6).

    Raises:
        GraphNodeNotFound / MemoryNotFound: an unknown end (another tenant's included).
        InvalidInput: max_depth out of range.
    """
    hops = check_depth(settings.GRAPH_MAX_PATH_HOPS if max_depth is None else max_depth,
                       maximum=settings.GRAPH_MAX_PATH_HOPS, name="maxDepth")
    source_id, source_kind = _node_kind(ctx, source)
    target_id, _ = _node_kind(ctx, target)
    if source_id == target_id:
        node = describe(ctx, [(source_id, source_kind, 0)])
        return GraphPath(node, [], f"{_said(node[0])} is the node itself.")
    found = shortest_path(store.reader(ctx.tenant_id).adjacency(), _tenant(ctx),
                          source=source_id, target=target_id, max_depth=hops)
    if found is None:
        return None
    return _as_path(ctx, source_id, source_kind, found)


def entity_named(ctx: TenantContext, name: Any, *, field: str) -> Node:
    """The entity a name resolves to (its canonical form, then the closest alias match).

    Raises:
        InvalidInput: an empty name. GraphNodeNotFound: no entity of that name.
    """
    if not isinstance(name, str) or not canonical_name(name):
        raise InvalidInput(f"{field} must name an entity.", details={"field": field})
    exact = entities_by_name(ctx, [canonical_name(name)])
    found = exact or entity_search(ctx, query=name, limit=1)
    if not found:
        raise GraphNodeNotFound(f"No entity named {name!r}.", details={"field": field})
    return found[0]


def path_between_names(ctx: TenantContext, *, source: Any, target: Any,
                       max_depth: Any = None) -> GraphPath | None:
    """:func:`path_between` for two entity names ("Project A", "Memory Leak"): the reasoning
    path of seed 001 "Entity Relation Traversal"."""
    start = entity_named(ctx, source, field="fromName")
    end = entity_named(ctx, target, field="toName")
    return path_between(ctx, source=start.id, target=end.id, max_depth=max_depth)


def _as_path(ctx: TenantContext, source: uuid.UUID, kind: str, hops: list[Hop]) -> GraphPath:
    nodes = describe(ctx, [(source, kind, 0)] + [(h.node, h.kind, h.depth) for h in hops])
    steps = [Step(h.node, h.via or source, h.relation or "") if h.reversed
             else Step(h.via or source, h.node, h.relation or "") for h in hops]
    return GraphPath(nodes, steps, explain(nodes, steps))


#: How a relation reads when a path walks it backwards (target, then source).
PASSIVE = {"WORKS_ON": "is worked on by", "CAUSED_BY": "caused", "LOCATED_IN": "is the place of",
           "PART_OF": "includes", "KNOWS": "knows", "HAPPENED_ON": "is the date of",
           "RELATES_TO": "relates to"}
#: Characters of a memory quoted in an explanation.
QUOTED_CHARS = 80


def _said(node: Node) -> str:
    if node.kind != MEMORY:
        return node.label
    text = node.label if len(node.label) <= QUOTED_CHARS else (
        node.label[:QUOTED_CHARS - 1].rstrip() + "…")
    return f"“{text}”"


def explain(nodes: list[Node], steps: list[Step]) -> str:
    """A path in words, one clause per step, each after the first starting from where the
    previous one ended: "Project A is mentioned in memory “…”, which mentions Memory Leak."
    A relation walked against its stored direction reads in the passive ("is worked on
    by")."""
    if len(nodes) < 2:
        return ""
    clauses = []
    for index, (left, right, step) in enumerate(zip(nodes, nodes[1:], steps, strict=False)):
        forward = step.source == left.id
        if step.relation == MENTIONS:
            verb = "mentions" if left.kind == MEMORY else "is mentioned in memory"
        elif forward:
            verb = step.relation.lower().replace("_", " ")
        else:
            verb = PASSIVE.get(step.relation, f"is the object of {step.relation.lower()} by")
        subject = _said(left) if index == 0 else "which"
        clauses.append(f"{subject} {verb} {_said(right)}")
    return ", ".join(clauses) + "."
