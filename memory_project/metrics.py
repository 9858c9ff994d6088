"""Prometheus metrics of the memory service and the protected ``/metrics`` endpoint.

Seed 001 "Memory Observability" names, dots written as underscores:

- ``memory_operations_total{operation}``: counter, every API operation (``memory.add``, ...).
- ``memory_operations_latency_seconds{operation}``: histogram, seconds.
- ``memory_operations_errors_total{code}``: counter, failed operations by error code.
- ``memory_search_results{layer}``: histogram, results per search and searched layer.
- ``memory_storage_size{layer}``: gauge, memories (not deleted) by layer, summed over
  tenants. Read from the cache at scrape time; the ``storage_size`` job refreshes it.
- ``memory_embedding_cache_total{level,result}``: counter, embedding cache lookups
  (``level`` ``local``/``redis``, ``result`` ``hit``/``miss``).
- ``memory_promotion_blocks_total{reason}`` and ``memory_policy_violations_total{rule}``
  (``governance.metrics``).

Several gunicorn workers: when ``PROMETHEUS_MULTIPROC_DIR`` is set (``run_stack`` sets it),
prometheus_client writes every process's samples there and ``/metrics`` sums them, so any
worker answers for all of them.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import Collector

from memory_project.errors import Unauthorized, envelope_response

OPERATIONS = Counter(
    "memory_operations_total", "Memory operations served, by operation", ["operation"])
LATENCY = Histogram(
    "memory_operations_latency_seconds", "Memory operation latency in seconds, by operation",
    ["operation"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
ERRORS = Counter(
    "memory_operations_errors_total", "Failed memory operations, by error code", ["code"])
SEARCH_RESULTS = Histogram(
    "memory_search_results", "Results per search, by searched layer", ["layer"],
    buckets=(0, 1, 2, 5, 10, 20, 50, 100),
)
EMBEDDING_CACHE = Counter(
    "memory_embedding_cache_total", "Embedding cache lookups, by cache level and result",
    ["level", "result"],
)

#: Collectors an app adds to every scrape (``register_scrape_collector``), e.g. the memories
#: app's ``memory_storage_size`` gauge.
_scrape_collectors: dict[str, Collector] = {}


def register_scrape_collector(name: str, collector: Collector) -> None:
    """Add ``collector`` under ``name`` to the registry every scrape reads (from
    ``AppConfig.ready()``; registering a name again replaces it)."""
    _scrape_collectors[name] = collector


def registry() -> CollectorRegistry:
    """The registry a scrape reads: every process's samples in multiprocess mode, this
    process's otherwise; the storage gauge is added to either."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        scrape = CollectorRegistry()
        multiprocess.MultiProcessCollector(scrape)
    else:
        scrape = CollectorRegistry(auto_describe=False)
        scrape.register(_Forward(REGISTRY))
    for collector in _scrape_collectors.values():
        scrape.register(collector)
    return scrape


class _Forward(Collector):
    """The default registry's metrics, inside another registry."""

    def __init__(self, source: CollectorRegistry) -> None:
        self.source = source

    def collect(self) -> Iterable[Any]:
        return self.source.collect()


def _networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.METRICS_ALLOWED_NETWORKS]


def metrics_allowed(request: HttpRequest) -> bool:
    """True when the caller sends ``Authorization: Bearer <METRICS_TOKEN>`` (when a token is
    configured) or comes from an address in ``METRICS_ALLOWED_NETWORKS``."""
    token = settings.METRICS_TOKEN
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, value = header.partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: Prometheus text format; 403 ``UNAUTHORIZED`` unless
    :func:`metrics_allowed`."""
    if not metrics_allowed(request):
        return envelope_response(Unauthorized("A metrics token or an allowed address is "
                                              "needed."), operation="metrics")
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
