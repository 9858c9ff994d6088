"""Hybrid search's fusion: the keyword and semantic lists of a layer, widened by the
neighbours of the best keyword matches, ordered by a learned reranker.

Equal-weight reciprocal rank fusion (seed 002) lets a weak semantic list dilute a good
keyword list: on LoCoMo, MiniLM's list alone finds 40% of what BM25 finds at rank 1, and
RRF of the two (threshold 0) was below BM25 alone at every k. Here both lists are read
``POOL_DEPTH`` deep (the semantic one still only down to the call's threshold), the memories
written just before and after each of the ``EXPAND_FROM`` best keyword matches join them
when they record that match in their ``context`` (a conversation's answer follows the
question that matches the query's words), and every candidate is scored by
``memories.retrieval.rerank`` from its own BM25 and cosine, its neighbours', and a few cues
of its text. ``rrf`` is still computed and returned (seed 002
"RRF scores reflecting their combined ranks"); ``score`` and the order are the reranker's.

Figures for every part, and what was tried and dropped: ``docs/performance.md``,
"Retrieval quality".
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from django.db.models import QuerySet

from memories.models import Memory
from memories.retrieval.hits import SearchHit, order_within_layer, similarity_of
from memories.retrieval.keyword import bm25_of
from memories.retrieval.neighbours import (
    Adjacent,
    adjacent_ids,
    declared,
    rows_with_distance,
)
from memories.retrieval.rerank import (
    FEATURES,
    current_reranker,
    is_question,
    length_feature,
    log_features,
    names_in,
)
from memories.retrieval.when import falls_in, memory_time, query_windows
from tenants.layers import Layer

RRF_K = 60
#: Depth of each list that the reranker sees (at least the call's ``limit``). On LoCoMo
#: (two folds), 20, 30 and 50 were within a point of each other at R@10.
POOL_DEPTH = 30
#: The best keyword matches whose neighbours join the candidates.
EXPAND_FROM = 10


def rrf(semantic_rank: int | None, keyword_rank: int | None, limit: int,
        graph_rank: int | None = None, *, graph: bool = False) -> float:
    """Seed 002's ``1/(k + semantic_rank) + 1/(k + keyword_rank)``, a missing rank counting
    ``limit + 1``; ``graph``: the search expanded by the knowledge graph, whose list adds a
    third term, ``1/(k + graph_rank)``."""
    missing = limit + 1
    fused = 1.0 / (RRF_K + (semantic_rank or missing)) + 1.0 / (RRF_K + (keyword_rank or missing))
    return fused + (1.0 / (RRF_K + (graph_rank or missing)) if graph else 0.0)


def _neighbour(adjacent: Adjacent | None, side: str, memory: Memory,
               rows: dict[Any, Memory]) -> Memory | None:
    pk = getattr(adjacent, side) if adjacent else None
    found = rows.get(pk) if pk is not None else None
    return found if found is not None and declared(memory, found) else None


def reranked(layer: Layer, query: str, base: QuerySet[Memory], keyword_base: QuerySet[Memory],
             vector: np.ndarray, limit: int, semantic: list[Memory], keyword: list[Memory],
             graph: list[Memory] | None = None, *, partition_lexeme: str | None = None
             ) -> list[SearchHit]:
    """One layer's hybrid candidates, best first.

    ``base``: the layer's memories as the search narrowed them (scope, metadata filter);
    ``keyword_base``: the same narrowed to the keyword partition ``partition_lexeme``, whose
    postings give the BM25 statistics (``keyword.bm25``);
    ``semantic`` / ``keyword``: the two lists (memories annotated with ``distance``, and
    ``keyword_score`` for the keyword list), ``POOL_DEPTH`` deep; ``graph``: the memories the
    knowledge graph links to the query (``graphHops``; annotated with ``distance``), which
    join the candidates and keep their ``graph_rank``; ``limit``: the call's, for ``rrf``.
    Costs up to four short queries beside the lists: neighbour ids (twice) and their rows
    with distances, only for candidates that record a context, and BM25 of the memories the
    keyword list did not score.
    """
    hits: dict[Any, SearchHit] = {}
    for rank, memory in enumerate(semantic, start=1):
        hits[memory.pk] = SearchHit(memory, layer, similarity=similarity_of(memory),
                                    semantic_rank=rank)
    for rank, memory in enumerate(keyword, start=1):
        hit = hits.setdefault(memory.pk, SearchHit(memory, layer, similarity=similarity_of(memory)))
        hit.keyword_score = float(cast(Any, memory).keyword_score)
        hit.keyword_rank = rank
    for rank, memory in enumerate(graph or [], start=1):
        hit = hits.setdefault(memory.pk, SearchHit(memory, layer, similarity=similarity_of(memory)))
        hit.graph_rank = rank
    if not hits:
        return []
    # Only a memory that records a context can have neighbours (``declared``): memories
    # written without one (most facts an agent stores) cost no neighbour queries at all.
    adjacent = adjacent_ids(base, [pk for pk, hit in hits.items() if hit.memory.context])
    expansion = list(dict.fromkeys(
        pk for memory in keyword[:EXPAND_FROM] if (near := adjacent.get(memory.pk))
        for pk in (near.previous, near.next) if pk is not None and pk not in hits))
    adjacent.update(adjacent_ids(base, expansion))
    rows = {pk: hit.memory for pk, hit in hits.items()}
    wanted = {pk for near in adjacent.values() for pk in (near.previous, near.next)}
    rows.update(rows_with_distance(base, [pk for pk in {*wanted, *expansion}
                                          if pk is not None and pk not in rows], vector))
    for pk in expansion:  # admitted when it records a best keyword match as its context
        if pk in rows and any(declared(rows[pk], memory) for memory in keyword[:EXPAND_FROM]):
            hits[pk] = SearchHit(rows[pk], layer, similarity=similarity_of(rows[pk]))
    scores = {pk: hit.keyword_score for pk, hit in hits.items() if hit.keyword_score}
    if keyword:
        unscored = [pk for pk in rows if pk not in scores]
        if len(keyword) < POOL_DEPTH:  # the list held every match: the rest hold no term
            unscored = []
        scores.update(bm25_of(keyword_base, query, unscored, partition_lexeme=partition_lexeme))
    ordered = list(hits.values())
    features = _features(query, ordered, adjacent, rows, scores)
    log_features([hit.memory for hit in ordered], features)
    probabilities = current_reranker().probabilities(features)
    for hit, probability in zip(ordered, probabilities, strict=True):
        hit.rrf = rrf(hit.semantic_rank, hit.keyword_rank, limit, hit.graph_rank,
                      graph=graph is not None)
        hit.score = float(probability)
    return sorted(ordered, key=order_within_layer)


def _features(query: str, hits: list[SearchHit], adjacent: dict[Any, Adjacent],
              rows: dict[Any, Memory], scores: dict[Any, float]) -> np.ndarray:
    """The ``(len(hits), len(FEATURES))`` matrix of ``memories.retrieval.rerank``."""
    best = max(scores.values(), default=0.0) or 1.0
    speakers = [str((hit.memory.metadata or {}).get("speaker") or "") for hit in hits]
    named = names_in(query, speakers)
    windows = query_windows(query)
    matrix = np.zeros((len(hits), len(FEATURES)))
    for i, hit in enumerate(hits):
        memory = hit.memory
        before = _neighbour(adjacent.get(memory.pk), "previous", memory, rows)
        after = _neighbour(adjacent.get(memory.pk), "next", memory, rows)
        own = speakers[i].lower()
        bm25 = scores.get(memory.pk, 0.0) / best
        matrix[i] = (
            bm25,
            hit.similarity or 0.0,
            scores.get(before.pk, 0.0) / best if before else 0.0,
            scores.get(after.pk, 0.0) / best if after else 0.0,
            similarity_of(before) if before else 0.0,
            similarity_of(after) if after else 0.0,
            float(bool(own) and own in named),
            float(bool(named) and own not in named),
            float(is_question(memory.content)),
            float(before is not None and is_question(before.content)),
            length_feature(memory.content),
            float(bm25 == 0.0),
            float(falls_in(windows, memory_time(memory))),
        )
    return matrix
