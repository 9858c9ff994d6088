"""What the memory operations report about their results: span attributes and the
``memory_search_results{layer}`` histogram (see ``memory_project.observability``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import Count

from memories.models import Memory, State
from memory_project.metrics import SEARCH_RESULTS, STORAGE_SIZE_KEY, STORAGE_SIZE_TTL
from memory_project.tracing import annotate
from tenants.context import TenantContext


def results_observed(*, layers: Iterable[Any], result_layers: Iterable[Any],
                     search: bool = False) -> None:
    """Annotate the current operation with ``memory.layer_count`` (layers read or written)
    and ``memory.result_count``; for a search, also observe per searched layer how many
    results it contributed (0 included)."""
    layers = [str(getattr(layer, "value", layer)) for layer in layers]
    per_layer = Counter(str(getattr(layer, "value", layer)) for layer in result_layers)
    annotate(layer_count=len(set(layers)), result_count=sum(per_layer.values()))
    if search:
        for layer in dict.fromkeys(layers):
            SEARCH_RESULTS.labels(layer=layer).observe(per_layer.get(layer, 0))


def storage_size_refresh(ctx: TenantContext) -> dict[str, int]:
    """Count ``ctx``'s memories that are not deleted, by layer, and cache the counts for
    ``memory_storage_size`` (the ``storage_size`` job, every 5 minutes; one GROUP BY over
    the tenant's rows).

    Returns:
        ``{layer: count}`` for the layers that have memories.
    """
    counts = {
        row["layer"]: row["n"]
        for row in Memory.objects.exclude(state=State.DELETED).order_by()
        .values("layer").annotate(n=Count("id"))
    }
    cache.set(STORAGE_SIZE_KEY.format(tenant_id=ctx.tenant_id), counts,
              timeout=STORAGE_SIZE_TTL)
    return counts
