"""Search (seed 001 "Search Memory" + seed 002 hybrid search): semantic, keyword, hybrid.

Per layer the caller can reach:

- semantic: pgvector cosine distance ``<=>`` over the HNSW index, top ``limit``; cosine
  similarity = 1 − distance, kept when ≥ ``threshold`` (default 0.7, seed 001). When a
  filtered HNSW scan returns fewer than ``limit`` rows (the filter starved it; pgvector before
  0.8 has no iterative scans), the layer is searched again exactly (``distance + 0`` keeps the
  planner off the index), which is cheap because a starved scope is a small one.
- keyword: the generated ``search_vector`` (English stemming) against the query's words
  OR-ed (``websearch_to_tsquery``), ranked by ``ts_rank_cd`` normalised by document length.
- hybrid (default): Reciprocal Rank Fusion of the two lists, ``Σ 1/(k + rank)`` with
  ``k = 60``; a memory missing from a list takes rank ``limit + 1`` there (seed 002; Cormack,
  Clarke & Büttcher, SIGIR 2009). The threshold applies to the semantic list only: a keyword
  match is lexical evidence of its own.

Layers are then merged by precedence (agent first), then score; a result whose cosine
similarity to an already kept result of a higher-precedence layer is ≥ 0.95 is dropped
(seed 001 "Layer Precedence Merging").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F, FloatField, Q, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from pgvector.django import CosineDistance

from memories.embeddings import embed_query
from memories.filters import MetadataFilter
from memories.layers import PRECEDENCE, Layer, LayerIdentifiers, accessible_layers, parse_layer
from memories.models import Kind, Memory
from memories.scoping import layer_queryset, resolve_identifiers
from memory_project.errors import InvalidInput, QueryTooLong
from tenants.context import TenantContext
from tenants.models import Tenant

RRF_K = 60
DEDUP_SIMILARITY = 0.95
MAX_LIMIT = 100
_WORD_RE = re.compile(r"\w+", re.UNICODE)


class Mode(StrEnum):
    """Search mode; hybrid is the default (seed 002)."""

    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


@dataclass(frozen=True)
class SearchRequest:
    """Seed 001 ``SearchMemoryInput`` plus ``mode`` and ``scope`` (seed 002).

    ``limit`` is per layer (1..100, default 10); ``threshold`` is a cosine similarity in
    [0, 1], ``None`` for the tenant's default (else 0.7).
    """

    query: str
    identifiers: LayerIdentifiers
    layers: tuple[str, ...] | None = None
    limit: int = 10
    threshold: float | None = None
    metadata_filter: MetadataFilter = field(default_factory=MetadataFilter)
    mode: str = Mode.HYBRID
    scope: str | None = None


@dataclass
class Candidate:
    """One memory with the parts of its score."""

    memory: Memory
    layer: Layer
    similarity: float | None = None
    semantic_rank: int | None = None
    keyword_score: float | None = None
    keyword_rank: int | None = None
    rrf: float | None = None
    score: float = 0.0


@dataclass(frozen=True)
class SearchResult:
    """Seed 001 ``SearchMemoryOutput``: results in precedence-then-score order."""

    results: list[Candidate]
    total_count: int
    searched_layers: list[Layer]


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
    tenant_settings = Tenant.objects.filter(pk=ctx.tenant_id).values_list("settings", flat=True)
    value = ((tenant_settings.first() or {}).get("search") or {}).get("defaultThreshold")
    return float(value) if isinstance(value, (int, float)) else settings.MEMORY_DEFAULT_THRESHOLD


def scope_filter(scope: str | None) -> Q:
    """Seed 002 scope rule: facts and rules in ``('global', scope)``, episodes in ``scope``."""
    if not scope:
        return Q()
    return Q(kind__in=[Kind.FACT, Kind.RULE], scope__in=["global", scope]) | Q(
        kind=Kind.EPISODE, scope=scope
    )


def keyword_query(query: str) -> SearchQuery | None:
    """The query's words OR-ed for ``websearch_to_tsquery`` (English); ``None`` if no words."""
    words = _WORD_RE.findall(query)
    if not words:
        return None
    return SearchQuery(" or ".join(words), search_type="websearch", config="english")


def _semantic(base: QuerySet[Memory], vector: np.ndarray, limit: int) -> list[Memory]:
    distance = CosineDistance("embedding", vector)
    rows = list(base.annotate(distance=distance).order_by("distance", "id")[:limit])
    if len(rows) < limit:
        # The index scan may have been starved by the filters: scan the scope exactly.
        exact = ExpressionWrapper(distance + Value(0.0), output_field=FloatField())
        rows = list(base.annotate(distance=exact).order_by("distance", "id")[:limit])
    return rows


def _keyword(base: QuerySet[Memory], tsquery: SearchQuery, limit: int) -> list[Memory]:
    rank = SearchRank(F("search_vector"), tsquery, cover_density=True, normalization=Value(1))
    return list(
        base.filter(search_vector=tsquery)
        .annotate(keyword_score=rank)
        .order_by("-keyword_score", "-created_at", "id")[:limit]
    )


def _layer_candidates(
    base: QuerySet[Memory], layer: Layer, request: SearchRequest,
    vector: np.ndarray | None, threshold: float,
) -> list[Candidate]:
    by_id: dict[Any, Candidate] = {}
    mode = request.mode
    if mode in (Mode.SEMANTIC, Mode.HYBRID) and vector is not None:
        rank = 0
        for memory in _semantic(base, vector, request.limit):
            similarity = 1.0 - float(memory.distance)
            if similarity < threshold:
                continue
            rank += 1
            by_id[memory.pk] = Candidate(memory, layer, similarity=similarity, semantic_rank=rank)
    tsquery = keyword_query(request.query) if mode in (Mode.KEYWORD, Mode.HYBRID) else None
    if tsquery is not None:
        for rank, memory in enumerate(_keyword(base, tsquery, request.limit), start=1):
            cand = by_id.setdefault(memory.pk, Candidate(memory, layer))
            cand.keyword_score = float(memory.keyword_score)
            cand.keyword_rank = rank
    missing = request.limit + 1
    for cand in by_id.values():
        if vector is not None and cand.similarity is None:
            cand.similarity = float(np.dot(np.asarray(cand.memory.embedding), vector))
        if mode == Mode.HYBRID:
            cand.rrf = 1.0 / (RRF_K + (cand.semantic_rank or missing)) + 1.0 / (
                RRF_K + (cand.keyword_rank or missing)
            )
            cand.score = cand.rrf
        elif mode == Mode.SEMANTIC:
            cand.score = cand.similarity or 0.0
        else:
            cand.score = cand.keyword_score or 0.0
    return sorted(by_id.values(), key=_order_within_layer)


def _order_within_layer(cand: Candidate) -> tuple[float, float, str]:
    created = cand.memory.created_at.timestamp()
    return (-cand.score, -created, str(cand.memory.pk))


def merge_by_precedence(candidates: list[Candidate]) -> list[Candidate]:
    """Sort by layer precedence then score, and drop near-duplicates (cosine ≥ 0.95) of a
    result already kept from a higher-precedence layer (seed 001 ``mergeSearchResults``)."""
    ordered = sorted(candidates, key=lambda c: (PRECEDENCE[c.layer], *_order_within_layer(c)))
    kept: list[Candidate] = []
    kept_vectors: list[np.ndarray] = []
    kept_layers: list[Layer] = []
    for cand in ordered:
        vector = np.asarray(cand.memory.embedding, dtype=np.float32)
        if kept_vectors:
            sims = np.stack(kept_vectors) @ vector
            if any(
                s >= DEDUP_SIMILARITY and layer != cand.layer
                for s, layer in zip(sims, kept_layers, strict=True)
            ):
                continue
        kept.append(cand)
        kept_vectors.append(vector)
        kept_layers.append(cand.layer)
    return kept


def memory_search(ctx: TenantContext, request: SearchRequest) -> SearchResult:
    """Search the layers the identifiers grant (or ``request.layers``) in ``ctx``'s tenant.

    Returns:
        Up to ``limit`` results per layer, merged by precedence then score.

    Raises:
        InvalidInput: bad limit, threshold or mode. QueryTooLong: query over the limit.
        InvalidLayer / MissingIdentifier: an unknown layer, or one the identifiers cannot
        reach. EmbeddingFailed: the query could not be embedded.
    """
    query = validate_query(request.query)
    if isinstance(request.limit, bool) or not 1 <= request.limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be within 1..{MAX_LIMIT}.", operation="memory.search")
    if request.mode not in Mode.__members__.values():
        raise InvalidInput(
            f"Unknown mode {request.mode!r}.", operation="memory.search",
            details={"allowed": [m.value for m in Mode]},
        )
    threshold = request.threshold
    if threshold is None:
        threshold = default_threshold(ctx)
    if not 0.0 <= threshold <= 1.0:
        raise InvalidInput("threshold must be within [0, 1].", operation="memory.search")
    identifiers = resolve_identifiers(ctx, request.identifiers)
    if request.layers:
        layers = list(dict.fromkeys(parse_layer(x) for x in request.layers))
    else:
        layers = accessible_layers(identifiers)
    bases = [(layer, layer_queryset(layer, identifiers)) for layer in layers]
    vector = embed_query(ctx.tenant_id, query) if request.mode != Mode.KEYWORD else None
    _set_ef_search(request.limit)
    candidates: list[Candidate] = []
    total = 0
    for layer, base in bases:
        scoped = request.metadata_filter.apply(base.filter(scope_filter(request.scope)))
        found = _layer_candidates(scoped.defer("search_vector"), layer, request, vector, threshold)
        total += len(found)
        candidates.extend(found[: request.limit])
    return SearchResult(
        results=merge_by_precedence(candidates), total_count=total, searched_layers=layers
    )


def _set_ef_search(limit: int) -> None:
    """``SET LOCAL hnsw.ef_search``: the HNSW candidate list must be at least ``limit`` long."""
    ef_search = max(settings.MEMORY_HNSW_EF_SEARCH, 2 * limit)
    if connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
