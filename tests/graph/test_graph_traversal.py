"""The in-process traversal against its SQL forms: the recursive CTE (and SQL/PGQ where the
DuckPGQ extension loads) give the same neighbours at the same depths and the same shortest
path lengths, on random graphs with hubs and cycles (seed 001 "N-hop neighbor traversal",
"Shortest path query")."""

from __future__ import annotations

import random
import uuid
from typing import Any

import duckdb
import pytest

from graph import paths_sql
from graph.adjacency import build
from graph.schema import migrate
from graph.store import traversal_tables
from graph.tenant_sql import tenant_execute
from graph.traversal import find_related, shortest_path

TENANT = str(uuid.UUID(int=42, version=4))
NAMES = {"tenant_id": TENANT, "memory": "memory", "entity": "entity"}


def _graph(seed: int, memories: int = 120, entities: int = 40) -> tuple[Any, list[uuid.UUID],
                                                                        list[uuid.UUID]]:
    """A reader-like database with a random graph: memories mention 1–3 entities (a few
    popular ones), entities relate to each other (with cycles)."""
    rng = random.Random(seed)
    conn = duckdb.connect()
    migrate(conn)
    memory_ids = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(memories)]
    entity_ids = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(entities)]
    weights = [1 / (rank + 1) for rank in range(entities)]
    now = "2026-01-01T00:00:00+00:00"
    for index, eid in enumerate(entity_ids):
        tenant_execute(conn, "INSERT INTO entities VALUES ($tenant_id, $id, $c, $c, $t, [$c], "
                       "CAST($now AS TIMESTAMPTZ), NULL)",
                       {"tenant_id": TENANT, "id": eid, "c": f"e{index}", "t": "concept",
                        "now": now})
    for mid in memory_ids:
        tenant_execute(conn, "INSERT INTO memory_nodes VALUES ($tenant_id, $id, $l, $h, "
                       "CAST($now AS TIMESTAMPTZ), CAST($now AS TIMESTAMPTZ), NULL)",
                       {"tenant_id": TENANT, "id": mid, "l": "user", "h": "x", "now": now})
        for eid in set(rng.choices(entity_ids, weights, k=rng.randint(1, 3))):
            tenant_execute(conn, "INSERT INTO memory_edges VALUES ($tenant_id, $s, $t, $k, $r, "
                           "CAST($now AS TIMESTAMPTZ), NULL)",
                           {"tenant_id": TENANT, "s": mid, "t": eid, "k": "entity",
                            "r": "MENTIONS", "now": now})
        if rng.random() < 0.3:
            a, b = rng.sample(entity_ids, 2)
            tenant_execute(conn, "INSERT INTO entity_edges VALUES ($tenant_id, $s, $t, $r, $m, "
                           "CAST($now AS TIMESTAMPTZ), NULL)",
                           {"tenant_id": TENANT, "s": a, "t": b, "r": "RELATES_TO", "m": mid,
                            "now": now})
    traversal_tables(conn, TENANT)
    return conn, memory_ids, entity_ids


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_neighbours_match_the_recursive_cte(seed: int) -> None:
    conn, memory_ids, entity_ids = _graph(seed)
    graph = build(conn, TENANT)
    for start in (entity_ids[:5] + memory_ids[:5]):
        for depth in (1, 2, 3):
            served = find_related(graph, TENANT, start=start, depth=depth, limit=10_000)
            by_sql = paths_sql.find_related_cte(conn, TENANT, start=start, depth=depth,
                                                limit=10_000)
            assert [(h.node, h.depth) for h in served] == by_sql
            limited = find_related(graph, TENANT, start=start, depth=depth, limit=7)
            assert [(h.node, h.depth) for h in limited] == by_sql[:7]


@pytest.mark.parametrize("seed", [4, 5])
def test_shortest_paths_match_the_recursive_cte_and_are_real_paths(seed: int) -> None:
    conn, memory_ids, entity_ids = _graph(seed)
    graph = build(conn, TENANT)
    rng = random.Random(seed)
    nodes = memory_ids + entity_ids
    for _ in range(40):
        source, target = rng.choice(nodes), rng.choice(nodes)
        path = shortest_path(graph, TENANT, source=source, target=target, max_depth=6)
        length = paths_sql.path_length_cte(conn, TENANT, source=source, target=target,
                                           max_depth=6)
        assert (None if path is None else len(path)) == length
        if path:
            walk = [source, *(hop.node for hop in path)]
            assert walk[-1] == target and len(set(walk)) == len(walk)
            for hop, before in zip(path, walk, strict=False):
                assert hop.via == before
                neighbours, _ = graph.edges(graph.number(before) or 0)
                assert graph.number(hop.node) in neighbours.tolist()


def test_pgq_answers_like_the_cte_where_it_loads() -> None:
    conn, memory_ids, entity_ids = _graph(6)
    if not paths_sql.pgq_available(conn):
        pytest.skip("the DuckPGQ extension is not installed here (DuckDB fetches extensions "
                    "at run time; this machine is offline)")
    for source, target in zip(memory_ids[:10], entity_ids[:10], strict=True):
        assert paths_sql.path_length_pgq(conn, TENANT, source=source, target=target) == \
            paths_sql.path_length_cte(conn, TENANT, source=source, target=target,
                                      max_depth=6)


def test_unknown_nodes_and_cycles_end_cleanly() -> None:
    conn, memory_ids, _ = _graph(7)
    graph = build(conn, TENANT)
    nowhere = uuid.uuid4()
    assert find_related(graph, TENANT, start=nowhere, depth=3, limit=10) == []
    assert shortest_path(graph, TENANT, source=nowhere, target=memory_ids[0], max_depth=6) \
        is None
    assert shortest_path(graph, TENANT, source=memory_ids[0], target=memory_ids[0],
                         max_depth=6) == []
