"""Graph expansion of search: a third ranked list, fused with the semantic and keyword lists
by reciprocal rank fusion, of memories linked by structure to what the query names.

The memory store does not know the knowledge graph (it lives on a floor above); the graph
registers its expander here when it starts (``graph.apps``). An expander takes the caller's
context, the query, the hop limit and a candidate budget, and returns memory ids, best first.
Without a registered expander a search that asks for expansion runs without it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from tenants.context import TenantContext

logger = logging.getLogger(__name__)

#: Hops a search may ask the graph to expand (``graphHops``: 0 turns expansion off).
MAX_HOPS = 3
#: Candidates the expander may return per search.
CANDIDATES = 200

Expander = Callable[[TenantContext, str, int, int], list[uuid.UUID]]
_expander: list[Expander] = []


def register_expander(expander: Expander) -> None:
    """Install the graph's expander (one per process; a later call replaces it)."""
    _expander[:] = [expander]


def expanded_ids(ctx: TenantContext, query: str, hops: int) -> list[uuid.UUID]:
    """Memory ids linked to the query within ``hops``, best first; ``[]`` when no expander is
    registered or it fails (logged: search then answers from its other lists)."""
    if not hops or not _expander:
        return []
    try:
        return _expander[0](ctx, query, hops, CANDIDATES)
    except Exception as exc:
        logger.warning("graph expansion failed, searching without it: %s", exc)
        return []
