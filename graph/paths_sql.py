"""The traversals of ``graph.traversal`` as single SQL statements, for the engines that can
run them: a recursive CTE with ``USING KEY`` (any DuckDB), and SQL/PGQ (``CREATE PROPERTY
GRAPH``, ``GRAPH_TABLE``, ``MATCH ANY SHORTEST``: seed 001 "SQL/PGQ Query Interface") when the
DuckPGQ extension is installed — DuckDB downloads extensions at run time, which an offline
machine cannot, so :func:`pgq_available` is usually false here.

They answer exactly what the hop-by-hop search answers (the tests hold the three to the same
results) and ``manage.py graph_bench`` times them side by side.
"""

from __future__ import annotations

import uuid
from typing import Any

from graph.tenant_sql import tenant_execute

_WALK = """WITH RECURSIVE walk(node, depth) USING KEY (node) AS (
    SELECT CAST($start AS INTEGER), 0
    UNION
    SELECT a.neighbour, w.depth + 1
      FROM walk w JOIN adjacency a ON a.node = w.node AND a.tenant_id = $tenant_id
     WHERE w.depth < $depth
       AND NOT EXISTS (SELECT 1 FROM recurring.walk r WHERE r.node = a.neighbour)
)
SELECT n.id, w.depth FROM walk w JOIN node_index n ON n.idx = w.node
 AND n.tenant_id = $tenant_id WHERE w.depth > 0 ORDER BY w.depth, n.kind, n.idx LIMIT $limit"""

_PROPERTY_GRAPH = """CREATE OR REPLACE PROPERTY GRAPH memory_graph
    VERTEX TABLES (node_index)
    EDGE TABLES (adjacency SOURCE KEY (node) REFERENCES node_index (idx)
                           DESTINATION KEY (neighbour) REFERENCES node_index (idx))"""
_PGQ_SHORTEST = """SELECT path_length FROM GRAPH_TABLE (memory_graph
    MATCH p = ANY SHORTEST (s:node_index WHERE s.idx = $source)-[a:adjacency]->{1,6}
              (t:node_index WHERE t.idx = $target)
    COLUMNS (path_length(p) AS path_length))"""


def node_numbers(cursor: Any, tenant: str, ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    """The reader's node numbers of ids (ids that are no live node are left out)."""
    rows = tenant_execute(cursor, "SELECT n.id, n.idx FROM node_index n WHERE n.tenant_id = "
                          "$tenant_id AND n.id IN (SELECT unnest($ids))",
                          {"tenant_id": tenant, "ids": ids})
    return {row[0]: row[1] for row in rows}


def find_related_cte(cursor: Any, tenant: str, *, start: uuid.UUID, depth: int,
                     limit: int) -> list[tuple[uuid.UUID, int]]:
    """``(node id, hops)`` within ``depth`` hops of ``start``, nearest first, then by kind
    and id: :func:`graph.traversal.find_related` as one recursive CTE."""
    origin = node_numbers(cursor, tenant, [start]).get(start)
    if origin is None:
        return []
    rows = tenant_execute(cursor, _WALK, {"tenant_id": tenant, "start": origin,
                                          "depth": depth, "limit": limit})
    return [(row[0], row[1]) for row in rows]


def path_length_cte(cursor: Any, tenant: str, *, source: uuid.UUID, target: uuid.UUID,
                    max_depth: int) -> int | None:
    """The hops of the shortest path (``None``: not within ``max_depth``) as one recursive
    CTE: the depth at which the walk from ``source`` first reaches ``target``."""
    reached = dict(find_related_cte(cursor, tenant, start=source, depth=max_depth,
                                    limit=1_000_000))
    return 0 if source == target else reached.get(target)


def pgq_available(conn: Any) -> bool:
    """Whether the DuckPGQ extension loads here (never downloaded by the service)."""
    try:
        conn.execute("LOAD duckpgq").fetchall()
    except Exception:
        return False
    return True


def path_length_pgq(cursor: Any, tenant: str, *, source: uuid.UUID,
                    target: uuid.UUID) -> int | None:
    """The shortest path's hops by SQL/PGQ ``MATCH ANY SHORTEST`` (at most 6), on a reader
    graph where :func:`pgq_available` is true. The property graph is defined on the
    reader's own tables, which hold the one tenant's rows only."""
    numbers = node_numbers(cursor, tenant, [source, target])
    if source not in numbers or target not in numbers:
        return None
    cursor.execute(_PROPERTY_GRAPH).fetchall()
    rows = tenant_execute(cursor, _PGQ_SHORTEST, {"tenant_id": tenant,
                                                  "source": numbers[source],
                                                  "target": numbers[target]})
    return min((int(row[0]) for row in rows), default=None)
