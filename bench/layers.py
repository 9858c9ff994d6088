"""Is searching layers concurrently faster? Sequential vs a thread pool, measured.

Each "layer" here is the same large scope searched again, so that every layer costs as much
as a real, full one; the concurrent variant gives each layer its own thread, connection and
transaction (the tenant GUC is per transaction), as a parallel implementation must.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from django.db import connection

from memories.embedding.embedders import embed_query
from memories.retrieval.partition import layer_queryset, partition_lexeme, resolve_identifiers
from memories.retrieval.search import Mode, SearchRequest, _layer_candidates
from tenants.context import TenantContext
from tenants.entry import tenant_job
from tenants.layers import Layer, LayerIdentifiers


def _one_layer(ctx: TenantContext, request: SearchRequest, vector: np.ndarray) -> int:
    with tenant_job(ctx):
        ids = resolve_identifiers(ctx, request.identifiers)
        base = layer_queryset(Layer.PROJECT, ids)
        lexeme = partition_lexeme(ctx.tenant_id, Layer.PROJECT, ids)
        return len(_layer_candidates(base, Layer.PROJECT, request, vector, 0.0, lexeme))


def _close() -> None:
    connection.close()  # the calling thread's own connection


def compare(ctx: TenantContext, project: str, queries: list[str], layers: int = 3
            ) -> dict[str, list[float]]:
    """Milliseconds per search of ``layers`` equal layers, sequential and concurrent."""
    timings: dict[str, list[float]] = {"sequential": [], "concurrent": []}
    with ThreadPoolExecutor(max_workers=layers) as pool:
        for query in queries:
            request = SearchRequest(query=query, identifiers=LayerIdentifiers(projectId=project),
                                    mode=Mode.HYBRID)
            with tenant_job(ctx):
                vector = embed_query(ctx.tenant_id, query)
            started = time.perf_counter()
            for _ in range(layers):
                _one_layer(ctx, request, vector)
            timings["sequential"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            futures = [pool.submit(_one_layer, ctx, request, vector) for _ in range(layers)]
            [future.result() for future in futures]
            timings["concurrent"].append((time.perf_counter() - started) * 1000)
        for future in [pool.submit(_close) for _ in range(layers)]:
            future.result()
    return timings
