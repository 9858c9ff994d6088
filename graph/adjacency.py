"""A tenant's graph as compressed sparse rows, for traversals inside the process (seed 001
"In-process graph queries": "all processing SHALL occur within the process; latency SHALL be
sub-millisecond for local operations").

Built once per reader (``graph.store.ReaderGraph``) from its ``node_index`` and ``adjacency``
tables, read through the tenant query layer: node ``i``'s neighbours are
``neighbours[offsets[i]:offsets[i + 1]]`` (ascending), with the relation of each edge in
``relations`` (codes into ``relation_names``). Nodes are numbered in id order, so ordering
by number is ordering by id.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph.tenant_sql import tenant_columns, tenant_execute

#: Marks an adjacency row that walks an edge against its stored direction.
REVERSED = "~"


@dataclass(frozen=True)
class Adjacency:
    """One tenant's traversal index (module doc). Ids are kept as text and turned into
    UUIDs only for the nodes an answer names."""

    ids: list[str]
    kinds: np.ndarray
    kind_names: tuple[str, ...]
    offsets: np.ndarray
    neighbours: np.ndarray
    relations: np.ndarray
    relation_names: tuple[str, ...]
    numbers: dict[str, int]

    def __len__(self) -> int:
        return len(self.ids)

    def number(self, node: uuid.UUID) -> int | None:
        """The number of a node id, ``None`` for no live node."""
        return self.numbers.get(str(node))

    def node(self, number: int) -> uuid.UUID:
        """The id of a node number."""
        return uuid.UUID(self.ids[number])

    def kind(self, number: int) -> str:
        """``entity`` or ``memory``."""
        return self.kind_names[int(self.kinds[number])]

    def edges(self, number: int) -> tuple[np.ndarray, np.ndarray]:
        """Node ``number``'s neighbours and the relation codes of those edges."""
        start, end = self.offsets[number], self.offsets[number + 1]
        return self.neighbours[start:end], self.relations[start:end]

    def relation(self, code: int) -> tuple[str, bool]:
        """The relation of a code, and whether the edge is walked against its stored
        direction."""
        name = self.relation_names[int(code)]
        return name.removeprefix(REVERSED), name.startswith(REVERSED)


KIND_NAMES = ("entity", "memory")


def build(cursor: Any, tenant: str) -> Adjacency:
    """The traversal index of the reader's tables (``node_index``, ``adjacency``), read as
    columns (no Python object per row but the ids' text)."""
    nodes = tenant_columns(cursor, "SELECT CAST(n.id AS VARCHAR) AS id, CAST(n.kind = $memory "
                           "AS TINYINT) AS kind FROM node_index n WHERE n.tenant_id = "
                           "$tenant_id ORDER BY n.idx", {"tenant_id": tenant,
                                                         "memory": KIND_NAMES[1]})
    names = [row[0] for row in tenant_execute(
        cursor, "SELECT DISTINCT a.relation FROM adjacency a WHERE a.tenant_id = $tenant_id "
        "ORDER BY a.relation", {"tenant_id": tenant})]
    edges = tenant_columns(cursor, "SELECT a.node, a.neighbour, list_position($names, "
                           "a.relation) AS code FROM adjacency a WHERE a.tenant_id = "
                           "$tenant_id ORDER BY a.node, a.neighbour",
                           {"tenant_id": tenant, "names": names})
    ids = [str(value) for value in nodes["id"].tolist()]
    count = len(ids)
    sources = np.asarray(edges["node"], dtype=np.int64) - 1
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(sources, minlength=count), out=offsets[1:])
    return Adjacency(
        ids=ids, kinds=np.asarray(nodes["kind"], dtype=np.int8), kind_names=KIND_NAMES,
        offsets=offsets, neighbours=np.asarray(edges["neighbour"], dtype=np.int64) - 1,
        relations=np.asarray(edges["code"], dtype=np.int32) - 1, relation_names=tuple(names),
        numbers={node: index for index, node in enumerate(ids)})
