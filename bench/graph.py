"""The knowledge graph at scale (``manage.py graph_bench``): a synthetic tenant graph of a
given number of edges, then the figures seed 001 asks for — traversal latency ("sub-millisecond
for local operations"), snapshot export, cold start from object storage ("< 3 seconds"),
backup and point-in-time restore.

The synthetic graph: ``edges / 5`` memories, each mentioning three entities and deriving two
entity relations; entities are drawn from ``edges / 20`` names with a Zipf-like popularity
(``rank^-1.1``), so a few are hubs, as in real conversations. Rows are written straight into
the writer's file (through the tenant query layer) and published like any write.
"""

from __future__ import annotations

import random
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from graph import backups, store
from graph.ops import ENTITY, MEMORY, MENTIONS
from graph.partitions import all_partitions
from graph.paths_sql import find_related_cte
from graph.tenant_sql import tenant_execute
from graph.traversal import find_related, shortest_path
from graph.writer import graph_write, writer_lock


def synthetic_rows(edges: int, tenant: str, seed: int = 7) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of the four tables for a graph of about ``edges`` edges (module doc)."""
    rng = random.Random(seed)
    memories = max(1, edges // 5)
    names = max(10, edges // 20)
    weights = [1 / (rank + 1) ** 1.1 for rank in range(names)]
    entity_ids = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(names)]
    now = "2026-01-01T00:00:00+00:00"
    rows: dict[str, list[tuple[Any, ...]]] = {"memory_nodes": [], "entities": [],
                                               "memory_edges": [], "entity_edges": []}
    for index, eid in enumerate(entity_ids):
        rows["entities"].append((tenant, eid, f"entity {index}", f"Entity {index}", "concept",
                                 [f"Entity {index}"], now, None))
    for _ in range(memories):
        mid = uuid.UUID(int=rng.getrandbits(128), version=4)
        rows["memory_nodes"].append((tenant, mid, "project", "x", now, now, None))
        chosen = list(dict.fromkeys(rng.choices(entity_ids, weights, k=3)))
        for eid in chosen:
            rows["memory_edges"].append((tenant, mid, eid, ENTITY, MENTIONS, now, None))
        for _ in range(2):
            source, target = rng.sample(entity_ids, 2) if len(chosen) < 2 else chosen[:2]
            rows["entity_edges"].append((tenant, source, target, "RELATES_TO", mid, now, None))
            chosen.reverse()
    return rows


def load(tenant: str, rows: dict[str, list[tuple[Any, ...]]]) -> float:
    """Write the rows into the writer's file and publish the tenant's full snapshot;
    returns the seconds the publication (Parquet export + two-phase commit) took."""
    with writer_lock() as held:
        if not held:
            raise RuntimeError("the graph writer lock is held elsewhere")
        with store.writer_connection() as conn:
            for table, values in rows.items():
                columns = list(zip(*values, strict=True))[1:]
                unnested = ", ".join(f"unnest($c{i})" for i in range(len(columns)))
                tenant_execute(conn, f"INSERT INTO {table} SELECT * FROM (SELECT CAST("
                               f"$tenant_id AS UUID) AS tenant_id, {unnested}) WHERE "
                               "tenant_id = $tenant_id",
                               {"tenant_id": tenant, **{f"c{i}": list(column)
                                                        for i, column in enumerate(columns)}})
            store.mark_dirty(tenant, all_partitions())
            started = time.perf_counter()
            store.publish(conn, tenant)
            return time.perf_counter() - started


def cold_start(tenant: str) -> tuple[float, float]:
    """Seconds to the first answer of a process that has nothing loaded (no reader, no
    part-file cache): the entity lookup (``entities`` only), then the first traversal."""
    store.forget_readers()
    cache = Path(store.writer_path()).parent / "cache" / tenant
    for part in cache.glob("*.parquet"):
        part.unlink()
    started = time.perf_counter()
    graph = store.reader(tenant)
    tenant_execute(graph.cursor(("entities",)), "SELECT count(*) FROM entities WHERE "
                   "tenant_id = $tenant_id", {"tenant_id": tenant})
    first = time.perf_counter() - started
    graph.adjacency()
    return first, time.perf_counter() - started


def timed(samples: int, call: Callable[[], Any]) -> list[float]:
    """Milliseconds of ``samples`` calls (after one warm-up call)."""
    call()
    out = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def latencies(tenant: str, rows: dict[str, list[tuple[Any, ...]]], samples: int,
              seed: int = 11) -> dict[str, list[float]]:
    """Query latencies on the loaded reader: neighbours at depth 1–3 from random entities,
    memories of an entity, shortest paths between random memories."""
    rng = random.Random(seed)
    reader = store.reader(tenant)
    cursor, graph = reader.cursor(), reader.adjacency()
    entity_ids = [row[1] for row in rows["entities"]]
    memory_ids = [row[1] for row in rows["memory_nodes"]]
    figures: dict[str, list[float]] = {}
    def neighbours(depth: int) -> Callable[[], Any]:
        return lambda: find_related(graph, tenant, start=rng.choice(entity_ids), depth=depth,
                                    limit=50)

    def by_cte(depth: int) -> Callable[[], Any]:
        return lambda: find_related_cte(cursor, tenant, start=rng.choice(entity_ids),
                                        depth=depth, limit=50)

    for depth in (1, 2, 3):
        figures[f"neighbours depth {depth}"] = timed(samples, neighbours(depth))
    figures["memories of an entity"] = timed(samples, lambda: find_related(
        graph, tenant, start=rng.choice(entity_ids), depth=1, limit=50, kind=MEMORY))
    figures["shortest path"] = timed(samples, lambda: shortest_path(
        graph, tenant, source=rng.choice(memory_ids), target=rng.choice(memory_ids),
        max_depth=6))
    for depth in (1, 3):
        figures[f"recursive CTE depth {depth}"] = timed(max(10, samples // 10), by_cte(depth))
    return figures


def freshness(tenant: str, rows: dict[str, list[tuple[Any, ...]]], writes: int,
              seed: int = 13) -> tuple[list[float], list[float]]:
    """Milliseconds of ``writes`` one-memory writes until acknowledged (committed and
    published), and of the first traversal after each (the reader reloading the new
    snapshot): how long until a write is visible, and what the first read then costs."""
    rng = random.Random(seed)
    names = [row[2] for row in rows["entities"]]
    acknowledged, first_reads = [], []
    for _ in range(writes):
        memory = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        picked = rng.sample(names, 2)
        payload = {"memory": {"id": memory, "layer": "project", "contentHash": "x",
                              "createdAt": "2026-01-01T00:00:00+00:00"},
                   "entities": [{"canonical": n, "name": n, "type": "concept"} for n in picked],
                   "relations": [{"source": picked[0], "target": picked[1],
                                  "type": "RELATES_TO"}]}
        started = time.perf_counter()
        graph_write(tenant, "upsert_memory", payload, timeout=120)
        acknowledged.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        found = find_related(store.reader(tenant).adjacency(), tenant,
                             start=uuid.UUID(memory), depth=1, limit=10)
        first_reads.append((time.perf_counter() - started) * 1000)
        assert len(found) == 2, found
    return acknowledged, first_reads


def backup_and_restore(tenant: str) -> tuple[float, float]:
    """Seconds of a backup of the tenant's snapshot and of a restore from it."""
    started = time.perf_counter()
    with writer_lock():
        info = backups.backup_create(uuid.UUID(tenant))
    backed = time.perf_counter() - started
    assert info is not None
    started = time.perf_counter()
    graph_write(tenant, "restore_backup", {"prefix": info.prefix,
                                           "takenAt": info.taken_at.isoformat()},
                timeout=600)
    return backed, time.perf_counter() - started


def summary(values: list[float]) -> str:
    """``p50 … p95 …`` in milliseconds."""
    return (f"p50 {np.percentile(values, 50):8.2f} ms   "
            f"p95 {np.percentile(values, 95):8.2f} ms")


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A directory for the benchmark's own writer file and object store."""
    return tempfile.TemporaryDirectory(prefix="graph-bench-")
