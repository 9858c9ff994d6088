"""How a tenant's graph rows are cut into snapshot partitions, so that a write re-exports only
what it touched (seed 001 "Incremental persistence": "track dirty pages").

Each table is cut into :data:`BUCKETS` partitions by the last hexadecimal digit of its
partition key (random in a UUIDv7 and in a UUIDv5): a memory's node, edges and derived entity
edges fall in the same bucket number of their three tables; an entity in the bucket of its
own id. A partition is named ``<table>-<bucket, two digits>`` (``memory_edges-07``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from graph.schema import TABLES

BUCKETS = 16

#: The column whose id decides a row's bucket, per table.
PARTITION_KEY = {
    "memory_nodes": "id",
    "entities": "id",
    "memory_edges": "source_id",
    "entity_edges": "memory_id",
}
#: The SQL expression of a row's bucket digit (compared with a ``$bucket`` parameter).
BUCKET_SQL = {table: f"right(CAST({column} AS VARCHAR), 1)"
              for table, column in PARTITION_KEY.items()}


def bucket_of(value: uuid.UUID | str) -> str:
    """The bucket digit (``"0"``–``"f"``) of an id."""
    return str(value)[-1].lower()


def partition_name(table: str, bucket: str) -> str:
    """``memory_edges`` and ``"a"`` → ``"memory_edges-10"``."""
    return f"{table}-{int(bucket, 16):02d}"


def parse_partition(name: str) -> tuple[str, str]:
    """The inverse of :func:`partition_name`: ``(table, bucket digit)``.

    Raises:
        ValueError: not a partition name of a graph table.
    """
    table, _, number = name.rpartition("-")
    if table not in TABLES or not number.isdigit() or not 0 <= int(number) < BUCKETS:
        raise ValueError(f"not a graph partition: {name!r}")
    return table, format(int(number), "x")


def memory_partitions(memory_ids: Iterable[uuid.UUID | str]) -> set[str]:
    """The partitions that hold rows derived from these memories (node, edges, entity
    edges)."""
    return {partition_name(table, bucket_of(memory_id))
            for memory_id in memory_ids
            for table in ("memory_nodes", "memory_edges", "entity_edges")}


def entity_partitions(entity_ids: Iterable[uuid.UUID | str]) -> set[str]:
    """The ``entities`` partitions of these entities."""
    return {partition_name("entities", bucket_of(entity_id)) for entity_id in entity_ids}


def all_partitions() -> set[str]:
    """Every partition name of a tenant."""
    return {partition_name(table, format(bucket, "x"))
            for table in TABLES for bucket in range(BUCKETS)}
