"""Search (seed 001 "Search Memory" + seed 002 hybrid search): semantic, keyword, hybrid.

Per layer the caller can reach:

- semantic: the nearest ``limit`` by pgvector's index (HNSW and cosine by default; see
  ``memories.retrieval.semantic``), cosine similarity ≥ ``threshold`` (default 0.7, seed
  001); with another vector backend configured, its nearest neighbours
  (``memories.tiers.l3``).
- keyword: Okapi BM25 over the generated ``search_vector`` (see ``memories.retrieval.keyword``).
- hybrid (default): both lists, read ``POOL_DEPTH`` deep, widened by the neighbours of the
  best keyword matches and ordered by a learned reranker (``memories.retrieval.fusion``);
  each result still carries seed 002's RRF, ``Σ 1/(k + rank)``, ``k = 60``, a missing rank
  counting ``limit + 1``. ``fusion="rrf"`` orders by that RRF instead. The threshold applies
  to the semantic list only: a keyword match is lexical evidence of its own.
- graph expansion (``graph_hops`` 1..3, hybrid only): a third list — the memories the
  knowledge graph links to the entities the query names, within that many hops
  (``memories.retrieval.expansion``), ordered by cosine similarity to the query and read
  ``POOL_DEPTH`` deep — joins the reranker's candidates (with ``fusion="rrf"``, a third
  term of the RRF).

Layers are then merged by precedence (agent first), then score, near-duplicates dropped
(``memories.retrieval.merge``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from typing import Any, cast

import numpy as np
from django.conf import settings
from django.db.models import Q, QuerySet
from pgvector.django import CosineDistance

from governance.services import filter_results
from memories.embedding.embedders import embed_query
from memories.models import UNSERVED_COLUMNS, Kind, Memory
from memories.restrictions import allowed_layers_of, check_layer
from memories.retrieval.concurrency import run_concurrently
from memories.retrieval.expansion import MAX_HOPS, expanded_ids
from memories.retrieval.filters import MetadataFilter
from memories.retrieval.fusion import POOL_DEPTH, reranked, rrf
from memories.retrieval.hits import SearchHit, order_within_layer, similarity_of
from memories.retrieval.keyword import bm25_rows
from memories.retrieval.merge import merge_by_precedence
from memories.retrieval.partition import (
    layer_queryset,
    partition_is,
    partition_lexeme,
    populated_layers,
    resolve_identifiers,
)
from memories.selectors.activity import activity_record_after_response
from memories.telemetry import results_observed
from memories.tiers.l3 import pushdown, semantic_candidates
from memory_project.errors import InvalidInput, QueryTooLong
from memory_project.resilience import mark_degraded
from tenants import config_cache
from tenants.context import TenantContext
from tenants.layers import (
    Layer,
    LayerIdentifiers,
    accessible_layers,
    parse_layer,
    require_identifiers,
)
from tenants.tenant_settings import section
from vectors.base import Filter

MAX_LIMIT = 100


class Mode(StrEnum):
    """Search mode; hybrid is the default (seed 002)."""

    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class Fusion(StrEnum):
    """How hybrid orders its candidates: the reranker (default, ``memories.retrieval.fusion``)
    or seed 002's plain RRF (for comparison)."""

    RERANK = "rerank"
    RRF = "rrf"


@dataclass(frozen=True)
class SearchRequest:
    """Seed 001 ``SearchMemoryInput`` plus ``mode`` and ``scope`` (seed 002).

    ``limit`` (1..100, default 10) bounds each layer's lists and the merged results;
    ``threshold`` is a cosine similarity in [0, 1], ``None`` for the tenant's default
    (else 0.7).
    """

    query: str
    identifiers: LayerIdentifiers
    layers: tuple[str, ...] | None = None
    limit: int = 10
    threshold: float | None = None
    metadata_filter: MetadataFilter = field(default_factory=MetadataFilter)
    mode: str = Mode.HYBRID
    scope: str | None = None
    graph_hops: int = 0
    fusion: str = Fusion.RERANK

    @property
    def reranks(self) -> bool:
        """Whether hybrid's reranker orders this search."""
        return self.mode == Mode.HYBRID and self.fusion == Fusion.RERANK

    @property
    def depth(self) -> int:
        """How deep each ranked list is read: ``limit``, or at least ``POOL_DEPTH`` for the
        reranker."""
        return max(self.limit, POOL_DEPTH) if self.reranks else self.limit

    def validated_query(self) -> str:
        """Check the request; returns its query, stripped as ``validate_query`` does.

        Raises:
            InvalidInput: a limit outside 1..100, an unknown mode, or a threshold outside
                [0, 1]. QueryTooLong: the query is over the limit.
        """
        query = validate_query(self.query)
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be within 1..{MAX_LIMIT}.", operation="memory.search")
        if self.mode not in Mode.__members__.values():
            raise InvalidInput(
                f"Unknown mode {self.mode!r}.", operation="memory.search",
                details={"allowed": [m.value for m in Mode]},
            )
        if self.fusion not in Fusion.__members__.values():
            raise InvalidInput(f"Unknown fusion {self.fusion!r}.", operation="memory.search")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise InvalidInput("threshold must be within [0, 1].", operation="memory.search")
        if (isinstance(self.graph_hops, bool) or not isinstance(self.graph_hops, int)
                or not 0 <= self.graph_hops <= MAX_HOPS):
            raise InvalidInput(f"graphHops must be within 0..{MAX_HOPS}.",
                               operation="memory.search",
                               details={"field": "graphHops", "min": 0, "max": MAX_HOPS})
        if self.graph_hops and self.mode != Mode.HYBRID:
            raise InvalidInput("graphHops needs the hybrid mode.", operation="memory.search",
                               details={"field": "graphHops"})
        return query


@dataclass(frozen=True)
class SearchResult:
    """Seed 001 ``SearchMemoryOutput``: results in precedence-then-score order."""

    results: list[SearchHit]
    total_count: int
    searched_layers: list[Layer]
    #: Where the time went, in milliseconds: ``embedding``, ``ranking`` (the per-layer SQL),
    #: ``merge``; sent as the ``Server-Timing`` header of the search endpoint.
    timings_ms: dict[str, float] = field(default_factory=dict)


def validate_query(query: Any) -> str:
    """The query, checked.

    Raises:
        InvalidInput: not a string, blank, or contains NUL.
        QueryTooLong: over ``MEMORY_MAX_QUERY_LENGTH`` characters (``details.max_length``).
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string.", operation="memory.search")
    if "\x00" in query:
        raise InvalidInput("query must not contain NUL characters.", operation="memory.search")
    limit = settings.MEMORY_MAX_QUERY_LENGTH
    if len(query) > limit:
        raise QueryTooLong(
            f"query has {len(query)} characters; the limit is {limit}.",
            operation="memory.search",
            details={"max_length": limit, "length": len(query)},
        )
    return query


def default_threshold(ctx: TenantContext) -> float:
    """The tenant's default similarity threshold (``settings.search.defaultThreshold``),
    else ``MEMORY_DEFAULT_THRESHOLD`` (0.7, seed 001)."""
    return float(section(ctx, "search").threshold)


def scope_filter(scope: str | None) -> Q:
    """Seed 002 scope rule: facts and rules in ``('global', scope)``, episodes in ``scope``."""
    if not scope:
        return Q()
    return Q(kind__in=[Kind.FACT, Kind.RULE], scope__in=["global", scope]) | Q(
        kind=Kind.EPISODE, scope=scope
    )


def _keyword(base: QuerySet[Memory], query: str, limit: int, vector: np.ndarray | None,
             partition_lexeme: str) -> list[Memory]:
    return bm25_rows(base, query, limit, vector, partition_lexeme=partition_lexeme)


def _fuse(layer: Layer, mode: str, limit: int, vector: np.ndarray | None,
          semantic: list[Memory], keyword: list[Memory],
          graph: list[Memory] | None = None) -> list[SearchHit]:
    """One layer's candidates from its lists, scored for ``mode`` (RRF for hybrid; the graph
    list, when given, is a third term of the fusion)."""
    by_id: dict[Any, SearchHit] = {}
    for rank, memory in enumerate(semantic, start=1):
        distance = float(cast(Any, memory).distance)  # annotated by the semantic list
        by_id[memory.pk] = SearchHit(memory, layer, similarity=1.0 - distance,
                                     semantic_rank=rank)
    for rank, memory in enumerate(keyword, start=1):
        cand = by_id.setdefault(memory.pk, SearchHit(memory, layer))
        cand.keyword_score = float(cast(Any, memory).keyword_score)
        cand.keyword_rank = rank
    for rank, memory in enumerate(graph or [], start=1):
        cand = by_id.setdefault(memory.pk, SearchHit(memory, layer))
        cand.graph_rank = rank
    for cand in by_id.values():
        if vector is not None and cand.similarity is None:
            cand.similarity = similarity_of(cand.memory)
        if mode == Mode.HYBRID:
            cand.rrf = rrf(cand.semantic_rank, cand.keyword_rank, limit, cand.graph_rank,
                           graph=graph is not None)
            cand.score = cand.rrf
        elif mode == Mode.SEMANTIC:
            cand.score = cand.similarity or 0.0
        else:
            cand.score = cand.keyword_score or 0.0
    return sorted(by_id.values(), key=order_within_layer)


def _list_jobs(base: QuerySet[Memory], request: SearchRequest, vector: np.ndarray | None,
               threshold: float, partition_lexeme: str, layer_filter: Filter | None = None,
               ) -> tuple[Callable[[], list[Memory]] | None, Callable[[], list[Memory]] | None]:
    """A layer's semantic and keyword lists, as two independent jobs; ``None`` where the
    mode has no such list (no job is started for it). ``partition_lexeme``: the layer scope's
    lexeme (``partition.partition_lexeme``): the keyword list narrows ``base`` by it (one GIN scan
    per term) and reads its postings, which give its BM25 statistics (``keyword.bm25``).
    ``layer_filter``: what a vector backend other than pgvector is asked to filter on
    (``memories.tiers.l3.pushdown``)."""
    mode, limit = request.mode, request.depth
    semantic: Callable[[], list[Memory]] | None = None
    keyword: Callable[[], list[Memory]] | None = None
    if mode in (Mode.SEMANTIC, Mode.HYBRID) and vector is not None:
        semantic = partial(semantic_candidates, base, vector, limit, threshold,
                           layer_filter=layer_filter)
    if mode in (Mode.KEYWORD, Mode.HYBRID):
        keyword = partial(_keyword, base.filter(partition_is(partition_lexeme)), request.query,
                          limit, vector, partition_lexeme)
    return semantic, keyword


def _layer_candidates(
    base: QuerySet[Memory], layer: Layer, request: SearchRequest,
    vector: np.ndarray | None, threshold: float, partition_lexeme: str,
) -> list[SearchHit]:
    """One layer's candidates, its two lists ranked one after the other (``partition_lexeme`` as
    in :func:`_list_jobs`)."""
    lists = [job() if job else []
             for job in _list_jobs(base, request, vector, threshold, partition_lexeme)]
    return _fuse(layer, request.mode, request.limit, vector, *lists)


def graph_list(base: QuerySet[Memory], linked: list[Any], vector: np.ndarray,
               limit: int) -> list[Memory]:
    """The graph's list for one layer: the linked memories of ``base``, most similar to the
    query first (cosine), at most ``limit``."""
    if not linked:
        return []
    return list(base.defer(*UNSERVED_COLUMNS).filter(pk__in=linked)
                .annotate(distance=CosineDistance("embedding", vector))
                .order_by("distance", "pk")[:limit])


def memory_search(ctx: TenantContext, request: SearchRequest, *, concurrent: bool = False
                  ) -> SearchResult:
    """Search the layers the identifiers grant (or ``request.layers``) in ``ctx``'s tenant.

    ``concurrent``: run the per-layer queries at the same time, each in its own transaction
    (``memories.retrieval.concurrency``); only for callers with no uncommitted writes to see.

    Returns:
        The first ``limit`` results once merged by precedence then score (seed 001
        ``mergeSearchResults``: "return top N"; seed 002: "at most 5 results" for
        ``limit=5``); ``total_count`` counts the results before that cut.

    The tenant's configuration is read once for the whole search
    (``tenants.config_cache.pinned``).

    Raises:
        As :func:`search_candidates`.
    """
    with config_cache.pinned():
        found = search_candidates(ctx, request, concurrent=concurrent)
    activity_record_after_response(ctx, "search")
    found = replace(found, results=found.results[: request.limit])
    results_observed(layers=found.searched_layers, result_layers=[
        c.layer for c in found.results], search=True)
    return found


def search_candidates(ctx: TenantContext, request: SearchRequest, *, concurrent: bool = False
                      ) -> SearchResult:
    """Up to ``limit`` results per layer, merged by precedence then score (recall's pool).
    ``concurrent`` as in :func:`memory_search`.

    Raises:
        InvalidInput: bad limit, threshold or mode. QueryTooLong: query over the limit.
        InvalidLayer / MissingIdentifier: an unknown layer, or one the identifiers cannot
        reach. EmbeddingFailed: the query could not be embedded.
    """
    query = request.validated_query()
    threshold = request.threshold if request.threshold is not None else default_threshold(ctx)
    identifiers = resolve_identifiers(ctx, request.identifiers)
    if request.layers:
        layers = list(dict.fromkeys(parse_layer(x) for x in request.layers))
        for layer in layers:
            check_layer(ctx, layer)
    else:
        layers = allowed_layers_of(ctx, accessible_layers(identifiers))
    bases = [(layer, layer_queryset(layer, identifiers)) for layer in layers]
    populated = (populated_layers(ctx.tenant_id, layers, identifiers) if len(layers) > 1
                 else set(layers))
    started = time.perf_counter()
    vector = embed_query(ctx.tenant_id, query) if request.mode != Mode.KEYWORD else None
    embedded = time.perf_counter()
    planned: list[Callable[[], list[Memory]] | None] = []
    narrowed: dict[Layer, tuple[QuerySet[Memory], str]] = {}
    for layer, base in bases:
        if layer not in populated:  # an empty layer: no job for its lists
            planned.extend((None, None))
            continue
        scoped = request.metadata_filter.apply(base.filter(scope_filter(request.scope)))
        narrowed[layer] = (scoped, partition_lexeme(ctx.tenant_id, layer, identifiers))
        planned.extend(_list_jobs(scoped, request, vector, threshold, narrowed[layer][1],
                                  pushdown(layer, require_identifiers(layer, identifiers))))
    done = iter(run_concurrently([job for job in planned if job], concurrent=concurrent))
    lists = [next(done) if job else [] for job in planned]
    if any(getattr(found, "degraded", False) for found in lists):
        mark_degraded("vector_backend")  # L3 down: exact scans in PostgreSQL stood in
    linked = expanded_ids(ctx, query, request.graph_hops) if vector is not None else []
    candidates: list[SearchHit] = []
    total = 0
    for index, (layer, _) in enumerate(bases):
        # The graph's list keeps to the search's scope and metadata filter, as the others do;
        # an empty layer (not narrowed) has nothing to link.
        graph = (graph_list(narrowed[layer][0], linked, vector, request.depth)
                 if request.graph_hops and vector is not None and layer in narrowed else None)
        if request.reranks and vector is not None and layer in narrowed:
            scoped, lexeme = narrowed[layer]
            found = reranked(layer, query, scoped, scoped.filter(partition_is(lexeme)), vector,
                             request.limit, lists[2 * index], lists[2 * index + 1], graph,
                             partition_lexeme=lexeme)
        else:
            found = _fuse(layer, request.mode, request.limit, vector,
                          lists[2 * index], lists[2 * index + 1], graph)
        total += len(found)
        candidates.extend(found[: request.limit])
    ranked = time.perf_counter()
    results = merge_by_precedence(candidates)
    allowed = {m.pk for m in filter_results(ctx, [c.memory for c in results],
                                            operation="memory.search")}
    results = [c for c in results if c.memory.pk in allowed]
    timings = {
        "embedding": (embedded - started) * 1000,
        "ranking": (ranked - embedded) * 1000,
        "merge": (time.perf_counter() - ranked) * 1000,
    }
    return SearchResult(results=results, total_count=total, searched_layers=layers,
                        timings_ms=timings)
