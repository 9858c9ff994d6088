"""Recall (seed 002 ``memory_recall``): hybrid candidates re-ranked by a composite score.

``score = w_relevance·relevance + w_importance·importance + w_recency·recency
+ w_confidence·effective_confidence`` with default weights 0.4 / 0.3 / 0.2 / 0.1 (seed 002),
configurable per scope in the tenant's settings (``recall.scoreWeights[scope]``, with
``"default"`` for calls without a scope).

- relevance: ``0.5·cosine similarity + 0.5·BM25 / best BM25 of the candidates``, in [0, 1].
  A composite needs a relevance on the same scale as the other signals, which RRF's rank-only
  scores are not; a convex combination of normalised scores is also the stronger fusion
  (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS
  2023). Candidates are the hybrid search's lists, 50 deep.
- importance: the memory's importance in [0, 1].
- recency: ``0.5 ** (days since last referenced, else created / half-life)``; half-life 30
  days unless the tenant sets ``recall.recencyHalfLifeDays``.
- effective confidence: ``confidence × exp(−decay_rate × days since last confirmed)``
  (seed 002); below ``min_confidence`` (default 0.2) a memory is left out.

Ties: ``created_at`` newest first, then ``id`` ascending (seed 002). ``limit`` is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from memories.retrieval.confidence import effective_confidence
from memories.retrieval.filters import MetadataFilter
from memories.retrieval.search import Mode, SearchHit, SearchRequest, search_candidates
from memories.selectors.activity import activity_record_after_response
from memories.telemetry import results_observed
from memory_project.errors import InvalidInput
from tenants import config_cache
from tenants.context import TenantContext
from tenants.layers import LayerIdentifiers
from tenants.tenant_settings import section

DEFAULT_WEIGHTS: dict[str, float] = {
    "relevance": 0.4, "importance": 0.3, "recency": 0.2, "confidence": 0.1,
}
DEFAULT_MIN_CONFIDENCE = 0.2
DEFAULT_HALF_LIFE_DAYS = 30.0
CANDIDATE_POOL = 50
#: Share of cosine similarity in relevance; the rest is BM25 divided by the pool's best.
RELEVANCE_SEMANTIC = 0.5
MAX_LIMIT = 100


@dataclass(frozen=True)
class RecallRequest:
    """What to recall: a topic, the caller's identifiers and optional narrowing."""

    topic: str
    identifiers: LayerIdentifiers
    layers: tuple[str, ...] | None = None
    scope: str | None = None
    limit: int = 10
    min_confidence: float | None = None
    metadata_filter: MetadataFilter = field(default_factory=MetadataFilter)


@dataclass
class Recalled:
    """A recalled memory with every part of its composite score."""

    candidate: SearchHit
    relevance: float
    importance: float
    recency: float
    effective_confidence: float
    score: float


def validate_weights(weights: object) -> dict[str, float]:
    """Check a ``score_weights`` mapping: the four names, finite non-negative numbers, not all 0.

    Raises:
        InvalidInput: anything else.
    """
    if not isinstance(weights, dict) or set(weights) != set(DEFAULT_WEIGHTS):
        raise InvalidInput(
            "score_weights needs exactly: relevance, importance, recency, confidence."
        )
    checked: dict[str, float] = {}
    for name, value in weights.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(f"score_weights.{name} must be a number.")
        if not math.isfinite(value) or value < 0:
            raise InvalidInput(f"score_weights.{name} must be a finite number >= 0.")
        checked[name] = float(value)
    if sum(checked.values()) <= 0:
        raise InvalidInput("score_weights must not all be 0.")
    return checked


def recall_settings(ctx: TenantContext, scope: str | None) -> tuple[dict[str, float], float]:
    """``(weights, half_life_days)`` for ``scope`` from the tenant's ``recall`` settings
    (``memories.settings_sections.RecallSettings``)."""
    recall = section(ctx, "recall")
    return recall.weights_for(scope), float(recall.recency_half_life_days)


def _days(since: datetime | None, now: datetime) -> float:
    return max(0.0, (now - since).total_seconds() / 86400.0) if since else 0.0


def memory_recall(ctx: TenantContext, request: RecallRequest, *, concurrent: bool = False
                  ) -> list[Recalled]:
    """Recall up to ``limit`` memories about ``topic``, best composite score first.
    ``concurrent`` as in :func:`memories.retrieval.search.memory_search`.

    Raises:
        InvalidInput: limit outside 1..100 or ``min_confidence`` outside [0, 1]; plus the
        errors of :func:`memories.retrieval.search.memory_search`.
    """
    if isinstance(request.limit, bool) or not 1 <= request.limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be within 1..{MAX_LIMIT}.", operation="memory.recall")
    min_confidence = request.min_confidence
    if min_confidence is None:
        min_confidence = DEFAULT_MIN_CONFIDENCE
    if not 0.0 <= min_confidence <= 1.0:
        raise InvalidInput("min_confidence must be within [0, 1].", operation="memory.recall")
    with config_cache.pinned():  # one configuration read for the whole recall
        weights, half_life = recall_settings(ctx, request.scope)
        found = search_candidates(ctx, SearchRequest(
            query=request.topic, identifiers=request.identifiers, layers=request.layers,
            limit=max(CANDIDATE_POOL, request.limit), threshold=0.0,
            metadata_filter=request.metadata_filter, mode=Mode.HYBRID, scope=request.scope,
        ), concurrent=concurrent)
    now = timezone.now()
    best_keyword = max((c.keyword_score or 0.0 for c in found.results), default=0.0) or 1.0
    recalled: list[Recalled] = []
    for cand in found.results:
        memory = cand.memory
        eff = effective_confidence(
            memory.confidence, memory.decay_rate,
            _days(memory.last_confirmed_at or memory.created_at, now),
        )
        if eff < min_confidence:
            continue
        relevance = RELEVANCE_SEMANTIC * max(0.0, cand.similarity or 0.0) + (
            1 - RELEVANCE_SEMANTIC) * (cand.keyword_score or 0.0) / best_keyword
        recency = 0.5 ** (_days(memory.last_referenced_at or memory.created_at, now) / half_life)
        score = (
            weights["relevance"] * relevance + weights["importance"] * memory.importance
            + weights["recency"] * recency + weights["confidence"] * eff
        )
        recalled.append(Recalled(cand, relevance, memory.importance, recency, eff, score))
    activity_record_after_response(ctx, "recall")
    recalled.sort(key=lambda r: (
        -r.score, -r.candidate.memory.created_at.timestamp(), str(r.candidate.memory.pk)
    ))
    recalled = recalled[: request.limit]
    results_observed(layers=found.searched_layers,
                     result_layers=[r.candidate.layer for r in recalled])
    return recalled
