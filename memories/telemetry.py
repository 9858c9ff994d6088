"""What the memory operations report about their results: span attributes and the
``memory_search_results{layer}`` histogram (see ``memory_project.observability``), and the
``memory_storage_size{layer}`` gauge a scrape reads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.cache import cache
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memories.models import Memory, State
from memory_project.metrics import SEARCH_RESULTS
from memory_project.tracing import annotate
from tenants.context import TenantContext
from tenants.layers import Layer
from tenants.models import Tenant


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


#: Cache key (per tenant) of the ``storage_size`` job's counts: ``{layer: count}``.
STORAGE_SIZE_KEY = "metrics:storage_size:{tenant_id}"
#: Seconds a tenant's counts stay valid; the job runs well within it.
STORAGE_SIZE_TTL = 3600


class StorageSizeCollector(Collector):
    """``memory_storage_size{layer}`` from the counts the ``storage_size`` job cached.

    A scrape reads the active tenants' ids (a small table) and one cache ``get_many``;
    it never counts memories itself.
    """

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "memory_storage_size", "Memories stored (not deleted), by layer", labels=["layer"])
        totals = dict.fromkeys((layer.value for layer in Layer), 0)
        try:
            ids = Tenant.objects.filter(is_active=True).values_list("id", flat=True)
            keys = [STORAGE_SIZE_KEY.format(tenant_id=i) for i in ids]
            for counts in cache.get_many(keys).values():
                for layer, count in counts.items():
                    totals[layer] = totals.get(layer, 0) + int(count)
        except Exception:  # a scrape reports what it can; the database or cache may be down
            return
        for layer, count in totals.items():
            family.add_metric([layer], count)
        yield family
