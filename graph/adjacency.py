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
    """One tenant's traversal index (module doc)."""

    ids: list[uuid.UUID]
    kinds: np.ndarray
    kind_names: tuple[str, ...]
    offsets: np.ndarray
    neighbours: np.ndarray
    relations: np.ndarray
    relation_names: tuple[str, ...]
    numbers: dict[uuid.UUID, int]

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


def build(cursor: Any, tenant: str) -> Adjacency:
    """The traversal index of the reader's tables (``node_index``, ``adjacency``)."""
    nodes = tenant_execute(cursor, "SELECT n.idx, n.id, n.kind FROM node_index n WHERE "
                           "n.tenant_id = $tenant_id ORDER BY n.idx", {"tenant_id": tenant})
    count = len(nodes)
    ids = [row[1] for row in nodes]
    kind_names = tuple(sorted({row[2] for row in nodes})) or ("entity",)
    kinds = np.array([kind_names.index(row[2]) for row in nodes], dtype=np.int8)
    edges = tenant_columns(cursor, "SELECT a.node, a.neighbour, a.relation FROM adjacency a "
                           "WHERE a.tenant_id = $tenant_id ORDER BY a.node, a.neighbour",
                           {"tenant_id": tenant})
    sources = np.asarray(edges["node"], dtype=np.int64) - 1
    relation_names, codes = np.unique(np.asarray(edges["relation"], dtype=object),
                                      return_inverse=True)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(sources, minlength=count), out=offsets[1:])
    return Adjacency(
        ids=ids, kinds=kinds, kind_names=kind_names, offsets=offsets,
        neighbours=np.asarray(edges["neighbour"], dtype=np.int64) - 1,
        relations=codes.astype(np.int32), relation_names=tuple(str(r) for r in relation_names),
        numbers={node: index for index, node in enumerate(ids)})
