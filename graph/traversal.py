"""Graph traversal on a tenant's read-only graph (``graph.store.reader``): n-hop neighbours
and shortest paths (seed 001 "SQL/PGQ Query Interface", "Dynamic Graph Reasoning").

The graph is undirected for traversal: every live memory → entity mention and entity →
entity relation can be walked both ways. Both queries are breadth-first searches over the
reader's in-process index (``graph.adjacency``: compressed sparse rows), which stop as soon
as the answer is known: the neighbours once ``limit`` nodes are reached at the current depth,
the path once the searches from both ends meet (the smaller frontier grows first). A node is
kept at the depth it was first reached, so cycles cannot loop.

The same queries as single SQL statements — recursive CTEs with ``USING KEY``, and SQL/PGQ
(``GRAPH_TABLE`` / ``MATCH ANY SHORTEST``) when the DuckPGQ extension loads — are in
``graph.paths_sql``; the tests hold them to the same answers. They are not the serving path:
on a 100k-edge tenant a recursive CTE costs ~20–40 ms whatever the depth (it re-joins the
whole adjacency at every hop) and every statement costs ~1 ms of round trip, where the
in-process search answers in well under a millisecond (``manage.py graph_bench`` prints both).

Spans ``graph.find_related`` / ``graph.shortest_path`` carry the query type, tenant, hops,
result count and duration; histograms ``graph_query_duration_seconds{query}``,
``graph_query_result_count{query}`` and ``graph_traversal_depth`` (seed 001 "Graph Query
Observability").
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import Histogram

from graph.adjacency import Adjacency
from memory_project.tracing import span

QUERY_SECONDS = Histogram("graph_query_duration_seconds", "Graph query duration", ["query"],
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                   0.5, 1.0))
RESULT_COUNT = Histogram("graph_query_result_count", "Rows a graph query returned", ["query"],
                         buckets=(0, 1, 5, 10, 25, 50, 100, 250, 1000))
TRAVERSAL_DEPTH = Histogram("graph_traversal_depth", "Hops of a graph traversal",
                            buckets=(1, 2, 3, 4, 5, 6))

@dataclass(frozen=True)
class Hop:
    """A node reached by a traversal: its id and kind (``entity``/``memory``), its hop
    distance, the node it was reached from and the relation of that step (``reversed``: the
    relation is stored from this node to ``via``)."""

    node: uuid.UUID
    kind: str
    depth: int
    via: uuid.UUID | None
    relation: str | None
    reversed: bool = False


@contextmanager
def _observed(query: str, tenant: str, depth: int) -> Iterator[dict[str, Any]]:
    started = time.perf_counter()
    outcome: dict[str, Any] = {"results": 0}
    with span(f"graph.{query}", **{"graph.query_type": query, "tenant.id": tenant,
                                   "graph.hops": depth}) as current:
        yield outcome
        seconds = time.perf_counter() - started
        current.set_attribute("graph.result_count", outcome["results"])
        current.set_attribute("graph.duration_ms", round(seconds * 1000, 3))
    QUERY_SECONDS.labels(query).observe(seconds)
    RESULT_COUNT.labels(query).observe(outcome["results"])
    TRAVERSAL_DEPTH.observe(depth)


class _Search:
    """One breadth-first search's state over node numbers: the depth each node was reached
    at (-1: not yet), the node it was reached from and the relation code of that edge."""

    def __init__(self, graph: Adjacency, origin: int) -> None:
        size = len(graph)
        self.graph = graph
        self.depth = np.full(size, -1, dtype=np.int32)
        self.parent = np.full(size, -1, dtype=np.int64)
        self.relation = np.full(size, -1, dtype=np.int32)
        self.depth[origin] = 0
        self.frontier = np.array([origin], dtype=np.int64)
        self.level = 0

    def grow(self) -> np.ndarray:
        """Reach the frontier's unreached neighbours (one hop); returns them, ascending."""
        graph, frontier = self.graph, self.frontier
        starts, ends = graph.offsets[frontier], graph.offsets[frontier + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        self.level += 1
        if total == 0:
            self.frontier = np.empty(0, dtype=np.int64)
            return self.frontier
        firsts = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        positions = np.arange(total) + firsts
        neighbours = graph.neighbours[positions]
        fresh_mask = self.depth[neighbours] < 0
        fresh, first = np.unique(neighbours[fresh_mask], return_index=True)
        sources = np.repeat(frontier, lengths)[fresh_mask][first]
        self.depth[fresh] = self.level
        self.parent[fresh] = sources
        self.relation[fresh] = graph.relations[positions[fresh_mask][first]]
        self.frontier = fresh
        return fresh

    def step(self, number: int) -> tuple[int, int | None, int | None]:
        """``(depth, parent, relation code)`` of a reached node."""
        parent = int(self.parent[number])
        relation = int(self.relation[number])
        return (int(self.depth[number]), parent if parent >= 0 else None,
                relation if relation >= 0 else None)


def _hops(graph: Adjacency, reached: dict[int, tuple[int, int | None, int | None]],
          chosen: list[int]) -> list[Hop]:
    """``Hop``s of node numbers (``reached``: number → depth, parent, relation code)."""
    hops = []
    for number in chosen:
        depth, parent, code = reached[number]
        relation, backwards = graph.relation(code) if code is not None else (None, False)
        hops.append(Hop(graph.node(number), graph.kind(number), depth,
                        graph.node(parent) if parent is not None else None, relation,
                        backwards))
    return hops


def find_related(graph: Adjacency, tenant: str, *, start: uuid.UUID, depth: int, limit: int,
                 kind: str | None = None) -> list[Hop]:
    """The nodes within ``depth`` hops of ``start``, nearest first, then by kind and id.

    Args:
        graph: the tenant's traversal index (``ReaderGraph.adjacency()``).
        tenant: the tenant (for the span).
        kind: only nodes of this kind (``"memory"`` or ``"entity"``), or every node.
        limit: at most this many nodes.
    """
    with _observed("find_related", tenant, depth) as outcome:
        origin = graph.number(start)
        if origin is None:
            return []
        search = _Search(graph, origin)
        wanted_kind = graph.kind_names.index(kind) if kind in graph.kind_names else None
        chosen: list[int] = []
        while search.level < depth and len(search.frontier) and len(chosen) < limit:
            fresh = search.grow()
            kinds = graph.kinds[fresh]
            if kind is not None:
                fresh, kinds = fresh[kinds == wanted_kind], kinds[kinds == wanted_kind]
            ordered = fresh[np.lexsort((fresh, kinds))]
            chosen += ordered[:limit - len(chosen)].tolist()
        outcome["results"] = len(chosen)
        return _hops(graph, {n: search.step(n) for n in chosen}, chosen)


def shortest_path(graph: Adjacency, tenant: str, *, source: uuid.UUID, target: uuid.UUID,
                  max_depth: int) -> list[Hop] | None:
    """The fewest-hops path from ``source`` to ``target`` as the list of steps after the
    source (the last one is the target), or ``None`` when they are not connected within
    ``max_depth`` hops. Bidirectional breadth-first search (module doc)."""
    with _observed("shortest_path", tenant, max_depth) as outcome:
        start, goal = graph.number(source), graph.number(target)
        if start is None or goal is None:
            return None
        forward, backward = _Search(graph, start), _Search(graph, goal)
        meeting = start if start == goal else None
        while (meeting is None and len(forward.frontier) and len(backward.frontier)
               and forward.level + backward.level < max_depth):
            side, other = ((forward, backward) if len(forward.frontier) <= len(backward.frontier)
                           else (backward, forward))
            fresh = side.grow()
            touching = fresh[other.depth[fresh] >= 0]
            if len(touching):
                meeting = int(touching[np.argmin(forward.depth[touching]
                                                 + backward.depth[touching])])
        if meeting is None:
            return None
        path = _joined(forward, backward, meeting)
        outcome["results"] = len(path) - 1
        return _hops(graph, path, list(path)[1:])


def _joined(forward: _Search, backward: _Search, meeting: int
            ) -> dict[int, tuple[int, int | None, int | None]]:
    """The path through ``meeting`` as number → (step, previous number, relation code), in
    order from the source."""
    chain: list[tuple[int, int | None, int | None]] = []
    node: int | None = meeting
    while node is not None:  # back to the source
        _, parent, relation = forward.step(node)
        chain.append((node, parent, relation))
        node = parent
    chain.reverse()
    steps = {n: (i, parent, relation) for i, (n, parent, relation) in enumerate(chain)}
    current, position = meeting, len(chain) - 1
    while (following := backward.step(current)[1]) is not None:  # on to the target
        position += 1
        steps[following] = (position, current, backward.step(current)[2])
        current = following
    return steps
