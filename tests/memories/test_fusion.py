"""Hybrid search's reranker (``memories.retrieval.fusion``, ``memories.retrieval.rerank``):
neighbouring turns, the shipped weights, the seed 002 RRF path and tenant isolation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.reranker_training import Examples, fit
from memories.models import Memory
from memories.retrieval.neighbours import Adjacent, adjacent_ids
from memories.retrieval.rerank import (
    FEATURES,
    load_reranker,
    logging_features,
    names_in,
    reranker_from_json,
)
from memories.retrieval.search import Fusion, Mode, SearchRequest, memory_search
from memory_project.errors import InvalidInput
from tenants.context import tenant_scope
from tenants.layers import LayerIdentifiers
from tests.retrieval_helpers import ids, searched

pytestmark = [pytest.mark.django_db, pytest.mark.real_embedder]

TURNS = (
    "Melanie: We camped by Crater Lake with the kids.",
    "Caroline: What did you see at night?",
    "Melanie: Shooting stars everywhere, it was breathtaking.",
    "Caroline: I bought new running shoes yesterday.",
)


def _conversation(tenant, with_context: bool = True) -> list:
    """The turns as memories, each with its neighbouring turns as context (as
    ``import_locomo`` stores them), or without context."""
    stored = []
    for i, text in enumerate(TURNS):
        near = TURNS[max(0, i - 1):i] + TURNS[i + 1:i + 2]
        stored.append(tenant.add(text, context="\n".join(near) if with_context else ""))
    return stored


def test_it_adds_the_turn_that_records_a_keyword_match_as_its_context(tenant_a) -> None:
    lake, question, answer, shoes = _conversation(tenant_a)
    data = searched(tenant_a, "Crater Lake", mode="hybrid", threshold=0.9)
    found = ids(data["results"])
    # "lake" is in the first turn and in the second one's context; the third records the
    # second as its context, so it joins although it holds no query term.
    assert set(found) == {str(lake.pk), str(question.pk), str(answer.pk)}
    assert found[0] == str(lake.pk)
    by_id = {r["memory"]["id"]: r for r in data["results"]}
    assert by_id[str(answer.pk)]["keywordRank"] is None
    assert by_id[str(answer.pk)]["semanticRank"] is None
    assert str(shoes.pk) not in found


def test_memories_without_context_never_join_as_neighbours(tenant_a) -> None:
    lake, *_ = _conversation(tenant_a, with_context=False)
    data = searched(tenant_a, "Crater Lake", mode="hybrid", threshold=0.9)
    assert ids(data["results"]) == [str(lake.pk)]


def test_a_neighbour_is_never_taken_from_another_tenant(tenant_a, tenant_b) -> None:
    first = tenant_a.add(TURNS[0], context=TURNS[1])
    intruder = tenant_b.add(TURNS[2], context=TURNS[0])  # written in between, by tenant B
    second = tenant_a.add(TURNS[1], context=TURNS[0])
    found = ids(searched(tenant_a, "Crater Lake", mode="hybrid", threshold=0.9)["results"])
    assert str(intruder.pk) not in found
    assert set(found) == {str(first.pk), str(second.pk)}


def test_hybrid_scores_are_the_rerankers_probabilities_in_order(tenant_a) -> None:
    _conversation(tenant_a)
    results = searched(tenant_a, "camping at the lake at night", mode="hybrid",
                       threshold=0.0)["results"]
    scores = [r["score"] for r in results]
    assert scores and all(0.0 < s < 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert all(r["rrf"] is not None for r in results)


def test_the_rrf_fusion_still_orders_by_seed_002s_formula(tenant_a) -> None:
    _conversation(tenant_a)
    request = SearchRequest(query="camping at the lake at night",
                            identifiers=LayerIdentifiers(userId="u1"), threshold=0.0,
                            mode=Mode.HYBRID, fusion=Fusion.RRF, limit=3)
    with tenant_scope(tenant_a.ctx):
        found = memory_search(tenant_a.ctx, request).results
        with pytest.raises(InvalidInput):
            memory_search(tenant_a.ctx, SearchRequest(
                query="lake", identifiers=LayerIdentifiers(userId="u1"), fusion="borda"))
    assert found and all(hit.score == hit.rrf for hit in found)
    assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)


def test_the_features_of_every_candidate_are_logged_for_training(tenant_a) -> None:
    _conversation(tenant_a)
    request = SearchRequest(query="Crater Lake", identifiers=LayerIdentifiers(userId="u1"),
                            threshold=0.9, mode=Mode.HYBRID)
    with tenant_scope(tenant_a.ctx), logging_features() as log:
        memory_search(tenant_a.ctx, request)
    (memories, matrix), = log
    assert matrix.shape == (3, len(FEATURES))
    column = {name: matrix[:, i] for i, name in enumerate(FEATURES)}
    answer = [m.content for m in memories].index(TURNS[2])
    assert column["keyword_miss"][answer] == 1.0 and column["prev_question"][answer] == 1.0
    assert column["prev_bm25"][answer] > 0 and column["bm25"].max() == 1.0


def test_the_shipped_weights_load_and_name_every_feature() -> None:
    reranker = load_reranker()
    assert len(reranker.weights) == len(FEATURES)
    assert all(math.isfinite(w) for w in reranker.weights)
    assert reranker.weights[FEATURES.index("bm25")] > 0  # more keyword evidence scores higher
    assert "LoCoMo" in reranker.source


def test_weights_for_other_features_are_refused() -> None:
    data = load_reranker().to_json()
    with pytest.raises(ValueError):
        reranker_from_json({**data, "features": list(reversed(FEATURES))})
    with pytest.raises(ValueError):
        reranker_from_json({**data, "weights": [float("nan")] * len(FEATURES)})
    assert reranker_from_json(data).weights == pytest.approx(load_reranker().weights)


def test_names_are_found_as_whole_words() -> None:
    assert names_in("What is Melanie's favourite book?", ["Melanie", "Mel", "Caroline"]) == {
        "melanie"}
    assert names_in("what did CAROLINE paint", ["Caroline", ""]) == {"caroline"}


def test_training_weighs_the_feature_that_separates_evidence() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, len(FEATURES)))
    y = (x[:, 0] + 0.1 * rng.normal(size=400) > 1.0).astype(float)
    reranker = fit(Examples(x, y, 40))
    assert reranker.weights[0] > 1.0
    assert max(abs(w) for w in reranker.weights[1:]) < reranker.weights[0] / 3
    with pytest.raises(ValueError):
        fit(Examples(x, np.zeros(400), 40))


def test_neighbours_keep_to_the_searched_memories(tenant_a, tenant_b) -> None:
    """``adjacent_ids`` answers within its queryset: a filtered-out memory is skipped, an id
    outside it gets no entry, and another tenant's memories are never neighbours."""
    first = tenant_a.add("first", metadata={"tags": ["kept"]})
    tenant_b.add("another tenant's, written in between")
    hidden = tenant_a.add("second")
    third = tenant_a.add("third", metadata={"tags": ["kept"]})
    with tenant_scope(tenant_a.ctx):
        base = Memory.objects.filter(layer="user", user_id="u1")
        assert adjacent_ids(base, [first.pk, hidden.pk, third.pk]) == {
            first.pk: Adjacent(None, hidden.pk), hidden.pk: Adjacent(first.pk, third.pk),
            third.pk: Adjacent(hidden.pk, None)}
        kept = base.filter(metadata__contains={"tags": ["kept"]})
        assert adjacent_ids(kept, [first.pk, hidden.pk, third.pk]) == {
            first.pk: Adjacent(None, third.pk), third.pk: Adjacent(first.pk, None)}
        assert adjacent_ids(base.none(), [first.pk]) == {}
