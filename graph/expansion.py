"""The graph's expander for search (``memories.retrieval.expansion``): the memories linked to
the entities a query names.

1. The query's entities: its word n-grams (up to four words) that are a canonical entity name
   of the tenant (``graph.services.query_entities``).
2. From each, a breadth-first walk of ``hops`` hops (``graph.traversal.find_related``): a
   memory at hop 1 mentions the entity; at hop 2 it mentions an entity related to it (an
   entity edge); at hop 3 it mentions an entity co-mentioned with it.
3. Each memory scores ``Σ idf(e) / hop`` over the query entities ``e`` that reach it, with
   ``idf(e) = ln((N + 1) / (df(e) + 1))`` (``N`` the tenant's memory nodes, ``df`` the memories
   that mention ``e``: Sparck Jones, 1972), so an entity named in every memory (a speaker)
   weighs little, and one named by more than a quarter of them is not expanded at all; the
   best ``limit`` are returned. Search then orders them by cosine
   similarity to the query and fuses that list with its other two.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict

from graph import selectors, store
from graph.ops import MEMORY
from graph.services import query_entities
from graph.tenant_sql import tenant_execute
from graph.traversal import find_related
from tenants.context import TenantContext

#: Nodes one walk may visit per query entity.
WALK_LIMIT = 5000
#: An entity mentioned by more than this share of the memories (and by more than
#: :data:`HUB_MIN` of them) says too little to expand from: in a two-person conversation, the
#: speakers.
HUB_SHARE = 0.25
HUB_MIN = 10


def expand(ctx: TenantContext, query: str, hops: int, limit: int) -> list[uuid.UUID]:
    """Memory ids linked to the entities ``query`` names within ``hops`` hops, best first
    (module doc); ``[]`` when the query names none."""
    names = query_entities(ctx, query)
    if not names:
        return []
    tenant = str(ctx.tenant_id)
    reader = store.reader(ctx.tenant_id)
    cursor = reader.cursor()
    total = int(tenant_execute(cursor, "SELECT count(*) FROM memory_nodes WHERE tenant_id = "
                               "$tenant_id AND deleted_at IS NULL", {"tenant_id": tenant})[0][0])
    scores: dict[uuid.UUID, float] = defaultdict(float)
    entities = selectors.entities_by_name(ctx, names)
    mentions = selectors.entity_memory_ids(ctx, [e.id for e in entities])
    for entity in entities:
        df = len(mentions.get(entity.id, []))
        if df > max(HUB_MIN, HUB_SHARE * total):
            continue
        idf = math.log((total + 1) / (df + 1))
        for hop in find_related(reader.adjacency(), tenant, start=entity.id, depth=hops,
                                limit=WALK_LIMIT, kind=MEMORY):
            scores[hop.node] += idf / hop.depth
    ranked = sorted(scores.items(), key=lambda item: (-item[1], str(item[0])))
    return [pk for pk, _ in ranked[:limit]]
