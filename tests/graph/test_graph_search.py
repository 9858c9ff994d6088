"""Search with graph expansion (``graphHops``): the memories linked to the entities a query
names join the fusion as a third list."""

from __future__ import annotations

from typing import Any

import pytest

from tests.graph.graph_helpers import graph_env, remember

pytestmark = pytest.mark.django_db
__all__ = ["graph_env"]


def _search(tenant: Any, **body: Any) -> Any:
    return tenant.client.post("/api/v1/memories/search", {
        "identifiers": {"userId": "u1"}, "layers": ["user"], "threshold": 0, **body},
        format="json")


def test_graph_expansion_brings_in_memories_linked_to_the_named_entity(
        tenant_a: Any, graph_env: Any) -> None:
    linked, *_ = remember(tenant_a, "Quentin Blackwood repaired the old lighthouse.",
                          "The weather was mild all week.", "Bread prices went up again.",
                          "Quentin Blackwood adopted a grey cat.")
    plain = _search(tenant_a, query="What did Quentin Blackwood fix?", limit=10)
    expanded = _search(tenant_a, query="What did Quentin Blackwood fix?", limit=10,
                       graphHops=1)
    assert plain.status_code == expanded.status_code == 200
    ranks = {r["memory"]["id"]: r["graphRank"] for r in expanded.json()["results"]}
    assert ranks[str(linked.pk)] is not None
    assert "graphRank" not in plain.json()["results"][0]
    unlinked = [r for r in expanded.json()["results"] if "Bread" in r["memory"]["content"]]
    assert all(r["graphRank"] is None for r in unlinked)


@pytest.mark.parametrize("body", [{"graphHops": 4}, {"graphHops": -1}, {"graphHops": "two"},
                                  {"graphHops": 1, "mode": "keyword"}])
def test_bad_graph_hops_are_refused(tenant_a: Any, graph_env: Any, body: dict[str, Any]
                                    ) -> None:
    response = _search(tenant_a, query="anything", **body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_INPUT"


def test_expansion_without_a_graph_answers_like_plain_search(tenant_a: Any,
                                                             graph_env: Any) -> None:
    tenant_a.add("Quentin Blackwood repaired the old lighthouse.")  # never extracted
    plain = _search(tenant_a, query="lighthouse")
    expanded = _search(tenant_a, query="lighthouse", graphHops=2)
    assert [r["memory"]["id"] for r in plain.json()["results"]] == [
        r["memory"]["id"] for r in expanded.json()["results"]]


def test_expansion_is_ranked_by_the_reranker_like_plain_search(tenant_a: Any,
                                                               graph_env: Any) -> None:
    """The graph's list joins the reranker's candidates: a memory both searches return
    scores the same in each (the reranker's probability, not a fused rank)."""
    remember(tenant_a, "Quentin Blackwood repaired the old lighthouse.",
             "Quentin Blackwood adopted a grey cat.", "The lighthouse keeper retired.",
             "Bread prices went up again.")
    query = "What did Quentin Blackwood repair?"
    plain = _search(tenant_a, query=query, threshold=0.7).json()["results"]
    expanded = _search(tenant_a, query=query, threshold=0.7, graphHops=1).json()["results"]
    scores = {r["memory"]["id"]: r["score"] for r in plain}
    shared = [r for r in expanded if r["memory"]["id"] in scores]
    assert shared and all(r["score"] == pytest.approx(scores[r["memory"]["id"]])
                          for r in shared)
    cat = next(r for r in expanded if "cat" in r["memory"]["content"])
    assert cat["graphRank"] is not None and 0.0 < cat["score"] < 1.0


def test_expansion_keeps_to_the_filter_and_the_scope(tenant_a: Any, graph_env: Any) -> None:
    """The graph links memories across tags and scopes; the memories it adds to a search are
    held to the search's metadata filter and scope like the others."""
    remember(tenant_a, "Quentin Blackwood repaired the old lighthouse.",
             metadata={"tags": ["work"]}, scope="harbour")
    remember(tenant_a, "Quentin Blackwood adopted a grey cat.", metadata={"tags": ["home"]},
             scope="den")
    remember(tenant_a, "Quentin Blackwood painted the boat shed.",
             metadata={"tags": ["work"]}, scope="yard")
    query = "Quentin Blackwood"
    for fusion in ("rerank", "rrf"):
        tagged = _search(tenant_a, query=query, graphHops=1, fusion=fusion,
                         filter={"tags": ["work"]}).json()["results"]
        assert {r["memory"]["content"] for r in tagged} == {
            "Quentin Blackwood repaired the old lighthouse.",
            "Quentin Blackwood painted the boat shed."}
        scoped = _search(tenant_a, query=query, graphHops=1, fusion=fusion,
                         scope="harbour").json()["results"]
        assert [r["memory"]["content"] for r in scoped] == [
            "Quentin Blackwood repaired the old lighthouse."]


@pytest.mark.parametrize("fusion", ["rerank", "rrf"])
def test_the_graph_list_is_a_term_of_the_rrf_under_either_fusion(
        tenant_a: Any, graph_env: Any, fusion: str) -> None:
    """``rrf`` adds ``1/(60 + graphRank)`` (a missing rank counting limit + 1), whichever
    fusion orders the results."""
    remember(tenant_a, "Quentin Blackwood repaired the old lighthouse.",
             "Quentin Blackwood adopted a grey cat.", "Bread prices went up again.")
    results = _search(tenant_a, query="What did Quentin Blackwood repair?", limit=10,
                      graphHops=1, fusion=fusion).json()["results"]
    assert any(r["graphRank"] is not None for r in results)
    missing = 10 + 1
    for r in results:
        ranks = (r["semanticRank"], r["keywordRank"], r["graphRank"])
        assert r["rrf"] == pytest.approx(sum(1.0 / (60 + (rank or missing)) for rank in ranks))
