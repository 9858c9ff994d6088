"""Request and response shapes of the graph endpoints (camelCase).

The selectors return :class:`graph.selectors.Node`, :class:`graph.selectors.GraphPath` and
:class:`memories.models.Memory`; the functions at the end turn them into the JSON the views
answer with.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rest_framework import serializers

from graph.ops import ENTITY, MEMORY
from graph.selectors import GraphPath, Node
from memories.models import Memory


class EntitySerializer(serializers.Serializer):
    """An entity: ``{id, name, type, aliases}``; ``type`` is the extractor's label
    (``PERSON``, ``ORG``, ``GPE``, …), ``aliases`` the surface forms seen in memories."""

    id = serializers.UUIDField(read_only=True)
    name = serializers.CharField(source="label", read_only=True)
    type = serializers.CharField(read_only=True)
    aliases = serializers.ListField(child=serializers.CharField(), read_only=True)


class GraphNodeSerializer(serializers.Serializer):
    """A node of the graph: ``{id, kind, label, type, aliases?, depth?}``.

    ``kind`` ``entity``: ``label`` is its name, ``type`` its label, ``aliases`` its surface
    forms. ``kind`` ``memory``: ``label`` is the start of its content, ``type`` its layer (no
    ``aliases``). ``depth`` is the hop distance from the node asked about (0 for that node),
    when the answer is a traversal; there, ``via`` is the node it was reached from and
    ``relation`` the relation of that edge (both absent for the node asked about).
    """

    id = serializers.UUIDField(read_only=True)
    kind = serializers.ChoiceField(choices=[ENTITY, MEMORY], read_only=True)
    # API fields named like Field.label and Field.source: DRF's metaclass moves declared
    # fields off the class.
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]
    type = serializers.CharField(read_only=True)
    aliases = serializers.ListField(child=serializers.CharField(), required=False)
    depth = serializers.IntegerField(min_value=0, required=False)
    via = serializers.UUIDField(required=False)
    relation = serializers.CharField(required=False)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """The node without ``aliases`` for a memory and without ``depth`` when unknown."""
        data = dict(super().to_representation(instance))
        if instance.kind != ENTITY:
            data.pop("aliases", None)
        for name in ("depth", "via", "relation"):
            if getattr(instance, name) is None:
                data.pop(name, None)
        return data


class GraphMemorySerializer(serializers.Serializer):
    """A memory that mentions an entity: ``{id, content, layer, createdAt}``."""

    id = serializers.UUIDField(read_only=True)
    content = serializers.CharField(read_only=True)
    layer = serializers.CharField(read_only=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)


class StepSerializer(serializers.Serializer):
    """One edge of a path, in the direction walked: ``{source, target, relation}``
    (``relation``: ``MENTIONS`` or a typed relation such as ``WORKS_AT``)."""

    source = serializers.UUIDField(read_only=True)  # type: ignore[assignment]
    target = serializers.UUIDField(read_only=True)
    relation = serializers.CharField(read_only=True)


class EntityListSerializer(serializers.Serializer):
    """``{"results": [entity]}``."""

    results = EntitySerializer(many=True, read_only=True)


class EntityMemoriesSerializer(serializers.Serializer):
    """``{"entity": entity, "results": [memory]}``, newest memory first."""

    entity = EntitySerializer(read_only=True)
    results = GraphMemorySerializer(many=True, read_only=True)


class NeighboursSerializer(serializers.Serializer):
    """``{"node": node, "results": [node]}``: the node asked about (depth 0) and the nodes
    within the depth asked for, nearest first."""

    node = GraphNodeSerializer(read_only=True)
    results = GraphNodeSerializer(many=True, read_only=True)


class PathSerializer(serializers.Serializer):
    """``{found, hops, nodes, steps, explanation}``: the shortest path from the first node to
    the second (``nodes`` in order, ``steps`` between them, ``explanation`` in words), or
    ``found: false`` with ``hops: 0`` and no nodes or steps when they are not connected."""

    found = serializers.BooleanField(read_only=True)
    hops = serializers.IntegerField(min_value=0, read_only=True)
    nodes = GraphNodeSerializer(many=True, read_only=True)
    steps = StepSerializer(many=True, read_only=True)
    explanation = serializers.CharField(read_only=True)


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date and time that names its timezone (``Z`` or an offset): a time
    without one is refused rather than read in the server's timezone. A moment that falls
    outside Python's years 1..9999 in UTC (``0001-01-01T00:00:00+01:00``) is the first or last
    representable one: "at or before" compares the same way with either."""

    def enforce_timezone(self, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            self.fail("naive")
        try:
            return super().enforce_timezone(value.astimezone(UTC))
        except OverflowError:
            edge = datetime.min if value.year == 1 else datetime.max
            return super().enforce_timezone(edge.replace(tzinfo=UTC))

    default_error_messages = {
        **serializers.DateTimeField.default_error_messages,
        "naive": "Datetime must name its timezone (Z or an offset such as +02:00).",
    }


class RestoreSerializer(serializers.Serializer):
    """Body of ``POST /api/v1/graph/restore``: ``at``, the moment to go back to (the newest
    backup taken at or before it is restored)."""

    at = AwareDateTimeField(help_text="ISO 8601 with a timezone, e.g. 2025-01-02T03:00:00Z")


class RestoreResultSerializer(serializers.Serializer):
    """What a restore did: the backup used and when it was taken, rows per graph table
    before and after, memories erased since the backup (their graph data removed again), and
    the snapshot version now served."""

    backup = serializers.CharField(read_only=True)
    takenAt = serializers.DateTimeField(read_only=True)
    before = serializers.DictField(child=serializers.IntegerField(), read_only=True)
    after = serializers.DictField(child=serializers.IntegerField(), read_only=True)
    erasedSince = serializers.IntegerField(read_only=True)
    version = serializers.IntegerField(allow_null=True, read_only=True)


def entities(nodes: list[Node]) -> list[dict[str, Any]]:
    """Entity nodes as ``{id, name, type, aliases}``."""
    return list(EntitySerializer(nodes, many=True).data)


def graph_nodes(nodes: list[Node]) -> list[dict[str, Any]]:
    """Nodes as ``{id, kind, label, type, aliases?, depth?}``."""
    return list(GraphNodeSerializer(nodes, many=True).data)


def graph_memories(memories: list[Memory]) -> list[dict[str, Any]]:
    """Memories as ``{id, content, layer, createdAt}``."""
    return list(GraphMemorySerializer(memories, many=True).data)


def path_result(path: GraphPath | None, *, max_depth: int) -> dict[str, Any]:
    """A path as ``{found, hops, nodes, steps, explanation}``; ``None`` (not connected within
    ``max_depth`` hops) as ``found: false``."""
    if path is None:
        return {"found": False, "hops": 0, "nodes": [], "steps": [],
                "explanation": f"No path of at most {max_depth} hops connects them."}
    return {"found": True, "hops": path.hops, "nodes": graph_nodes(path.nodes),
            "steps": list(StepSerializer(path.steps, many=True).data),
            "explanation": path.explanation}
