"""One search result with the parts of its score (shared by search, fusion and recall)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from memories.models import Memory
from tenants.layers import Layer


@dataclass
class SearchHit:
    """One memory with the parts of its score.

    ``similarity``: cosine similarity to the query in [-1, 1]; ``semantic_rank`` /
    ``keyword_rank``: 1-based positions in the semantic and keyword lists (``None``: not in
    that list); ``keyword_score``: BM25; ``rrf``: the seed 002 reciprocal rank fusion of the two
    ranks (hybrid only); ``score``: what the layer is ordered by (cosine, BM25, or for hybrid
    the reranker's probability, ``memories.retrieval.rerank``).
    """

    memory: Memory
    layer: Layer
    similarity: float | None = None
    semantic_rank: int | None = None
    keyword_score: float | None = None
    keyword_rank: int | None = None
    graph_rank: int | None = None
    rrf: float | None = None
    score: float = 0.0


def order_within_layer(hit: SearchHit) -> tuple[float, float, str]:
    """Sort key of a layer's results: score descending, then newest first, then id."""
    return (-hit.score, -hit.memory.created_at.timestamp(), str(hit.memory.pk))


def similarity_of(memory: Memory) -> float:
    """Cosine similarity of a memory read with a ``distance`` annotation (pgvector's cosine
    distance to the query vector): ``1 − distance``."""
    return 1.0 - float(cast(Any, memory).distance)


def in_order(rows: dict[Any, Memory], ranked: list[tuple[Any, float]], attribute: str
             ) -> list[Memory]:
    """The memories of ``ranked`` (``[(id, value)]``) found in ``rows`` (by id), in
    ``ranked``'s order, each with ``attribute`` set to its value (an annotation of the row,
    not a field); an id without a row (it left the scope since it was ranked) is left out."""
    ordered = []
    for pk, value in ranked:
        memory = rows.get(pk)
        if memory is not None:
            setattr(memory, attribute, value)
            ordered.append(memory)
    return ordered
