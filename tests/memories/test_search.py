"""Search (seed 002 hybrid search; seed 001 search, layer access and precedence merging)
through POST /api/v1/memories/search, with the real all-MiniLM-L6-v2 embeddings."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from memories.embedding import embedders as embeddings
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body
from tests.retrieval_helpers import (
    RECALL_URL,
    USER,
    CountingEmbedder,
    MemoryUpdates,
    contents,
    cosine,
    ids,
    patch_settings,
    reload,
    rrf,
    scoped_memories,
    search,
    searched,
)

# What the bundled MiniLM model understands is part of what these tests check.
pytestmark = [pytest.mark.django_db, pytest.mark.real_embedder]

NAUSEA = "User experiences nausea after dairy"


# --- semantic -------------------------------------------------------------------------

def test_it_finds_a_conceptually_similar_fact_ranked_by_cosine_similarity(tenant_a) -> None:
    for text in (NAUSEA, "User prefers dark mode", "The project uses PostgreSQL 16"):
        tenant_a.add(text)
    data = searched(tenant_a, "feeling unwell", mode="semantic", threshold=0.0)
    results = data["results"]
    assert contents(results)[:2] == [NAUSEA, "User prefers dark mode"]
    for r in results:
        expected = cosine("feeling unwell", r["memory"]["content"])
        assert r["similarity"] == pytest.approx(expected, abs=1e-4)
        assert r["score"] == r["similarity"]
        assert r["keywordRank"] is None and r["rrf"] is None
    assert [r["semanticRank"] for r in results] == list(range(1, len(results) + 1))
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert data["searchedLayers"] == ["user", "company"]


def test_it_returns_at_most_limit_results_across_layers(tenant_a) -> None:
    for i in range(7):
        tenant_a.add(f"User note number {i} about the garden")
        tenant_a.add(f"Company note number {i} about the garden", layer="company",
                     identifiers={})
    data = searched(tenant_a, "garden notes", mode="semantic", threshold=0.0, limit=5)
    assert len(data["results"]) == 5
    assert data["totalCount"] == 10  # 5 per layer found before the final cut
    # precedence: the user layer fills the page before the company layer
    assert {r["layer"] for r in data["results"]} == {"user"}


def test_the_limit_cut_keeps_the_server_timing(tenant_a) -> None:
    tenant_a.add("User prefers dark mode")
    response = search(tenant_a, "dark mode", limit=1)
    assert response.status_code == 200
    timings = {name.strip(): float(dur) for name, dur in
               (part.split(";dur=") for part in response["Server-Timing"].split(","))}
    assert list(timings) == ["embedding", "ranking", "merge", "search"]
    # the whole search (what REST adds is the rest of the request) covers its parts
    assert timings["search"] >= timings["embedding"] + timings["ranking"] + timings["merge"]


# --- keyword --------------------------------------------------------------------------

def test_it_matches_exact_terms_in_keyword_mode(tenant_a) -> None:
    doctor = tenant_a.add("Dr. Smith is the family doctor")
    tenant_a.add("The user enjoys reading novels")
    results = searched(tenant_a, "Dr. Smith", mode="keyword")["results"]
    assert ids(results) == [str(doctor.pk)]
    assert results[0]["keywordRank"] == 1
    assert results[0]["keywordScore"] > 0
    assert results[0]["score"] == results[0]["keywordScore"]
    assert results[0]["semanticRank"] is None and results[0]["rrf"] is None


def test_it_stems_running_to_runs(tenant_a) -> None:
    runner = tenant_a.add("The user runs every morning before work")
    tenant_a.add("The user enjoys reading novels")
    results = searched(tenant_a, "running", mode="keyword")["results"]
    assert ids(results) == [str(runner.pk)]


def test_it_finds_a_memory_added_after_a_search_that_found_nothing(tenant_a) -> None:
    tenant_a.add("The user enjoys reading novels")
    assert searched(tenant_a, "quokka", mode="keyword")["results"] == []
    quokka = tenant_a.add("The user photographed a quokka in Perth")
    assert ids(searched(tenant_a, "quokka", mode="keyword")["results"]) == [str(quokka.pk)]


# --- hybrid ---------------------------------------------------------------------------

def test_it_fuses_semantic_and_keyword_ranks_with_rrf(tenant_a) -> None:
    both = tenant_a.add("User is lactose intolerant")
    semantic_only = tenant_a.add(NAUSEA)  # no shared term; cosine 0.55
    keyword_only = tenant_a.add("The lactose column in the quarterly spreadsheet is empty")  # 0.47
    tenant_a.add("The user enjoys reading novels")
    limit = 10
    data = searched(tenant_a, "lactose intolerant", mode="hybrid", threshold=0.5, limit=limit)
    by_id = {r["memory"]["id"]: r for r in data["results"]}
    assert set(by_id) == {str(both.pk), str(semantic_only.pk), str(keyword_only.pk)}
    ranks = {k: (r["semanticRank"], r["keywordRank"]) for k, r in by_id.items()}
    assert ranks == {str(both.pk): (1, 1), str(semantic_only.pk): (2, None),
                     str(keyword_only.pk): (None, 2)}
    assert by_id[str(both.pk)]["rrf"] == pytest.approx(2 / 61)
    assert by_id[str(semantic_only.pk)]["rrf"] == pytest.approx(1 / 62 + 1 / 71)
    for r in data["results"]:
        assert r["rrf"] == pytest.approx(rrf(r["semanticRank"], r["keywordRank"], limit))
        # the order is the reranker's (memories.retrieval.fusion; LoCoMo figures in
        # docs/performance.md, "Retrieval quality"); the RRF is still reported
        assert 0.0 < r["score"] < 1.0
        assert r["similarity"] is not None
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)
    assert ids(data["results"])[0] == str(both.pk)
    assert by_id[str(keyword_only.pk)]["similarity"] < 0.5  # below the semantic threshold


def test_fusion_rrf_orders_hybrid_by_seed_002s_rrf(tenant_a) -> None:
    tenant_a.add("User is lactose intolerant")
    tenant_a.add(NAUSEA)
    tenant_a.add("The lactose column in the quarterly spreadsheet is empty")
    data = searched(tenant_a, "lactose intolerant", mode="hybrid", threshold=0.5,
                    fusion="rrf")
    assert len(data["results"]) == 3
    for r in data["results"]:
        assert r["score"] == pytest.approx(r["rrf"])
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)


def test_an_unknown_fusion_is_invalid_input(tenant_a) -> None:
    response = search(tenant_a, "lactose", fusion="borda")
    assert response.status_code == 400
    assert body(response)["error"]["code"] == "INVALID_INPUT"


def test_it_uses_hybrid_when_no_mode_is_given(tenant_a) -> None:
    tenant_a.add("User is lactose intolerant")
    tenant_a.add(NAUSEA)
    default = searched(tenant_a, "lactose intolerant", threshold=0.5, limit=7)["results"]
    hybrid = searched(tenant_a, "lactose intolerant", threshold=0.5, limit=7,
                      mode="hybrid")["results"]
    assert [(r["memory"]["id"], r["rrf"]) for r in default] == [
        (r["memory"]["id"], r["rrf"]) for r in hybrid]
    assert all(r["rrf"] == pytest.approx(rrf(r["semanticRank"], r["keywordRank"], 7))
               for r in default)
    assert default[0]["semanticRank"] == 1 and default[0]["keywordRank"] == 1


# --- threshold ------------------------------------------------------------------------

LACTOSE = [
    ("Intolerant lactose reviewers argue about cheese", 0.797),
    ("Lactose intolerant label printed on the cereal box in the kitchen", 0.724),
    (NAUSEA, 0.552),
    ("User prefers dark mode", 0.1),
]


def test_it_keeps_only_semantic_results_at_or_above_the_threshold(tenant_a) -> None:
    for text, _ in LACTOSE:
        tenant_a.add(text)
    for threshold in (0.5, 0.75):
        results = searched(tenant_a, "lactose intolerant", mode="semantic",
                           threshold=threshold)["results"]
        assert results and all(r["similarity"] >= threshold for r in results)
        assert set(contents(results)) == {t for t, s in LACTOSE if s >= threshold}


def test_it_defaults_the_threshold_to_0_7_and_to_the_tenant_setting(tenant_a) -> None:
    for text, _ in LACTOSE:
        tenant_a.add(text)
    assert settings.MEMORY_DEFAULT_THRESHOLD == 0.7
    results = searched(tenant_a, "lactose intolerant", mode="semantic")["results"]
    assert set(contents(results)) == {LACTOSE[0][0], LACTOSE[1][0]}
    response = patch_settings(tenant_a, {"search": {"defaultThreshold": 0.5}})
    assert response.status_code == 200, response.content
    assert body(response)["search"] == {"defaultThreshold": 0.5}
    results = searched(tenant_a, "lactose intolerant", mode="semantic")["results"]
    assert set(contents(results)) == {t for t, _ in LACTOSE[:3]}
    # an explicit threshold still wins over the tenant default
    results = searched(tenant_a, "lactose intolerant", mode="semantic", threshold=0.78)
    assert contents(results["results"]) == [LACTOSE[0][0]]


# --- layers ---------------------------------------------------------------------------

def test_it_searches_only_the_requested_layers(tenant_a) -> None:
    tenant_a.add("Use tabs for indentation in user code")
    company = tenant_a.add("Use spaces for indentation", layer="company", identifiers={})
    data = searched(tenant_a, "indentation", mode="keyword", layers=["company"])
    assert data["searchedLayers"] == ["company"]
    assert ids(data["results"]) == [str(company.pk)]


def test_it_grants_user_project_and_company_but_not_agent_or_session(tenant_a) -> None:
    data = searched(tenant_a, "anything", identifiers={"userId": "u1", "projectId": "p1"})
    assert data["searchedLayers"] == ["user", "project", "company"]
    assert "agent" not in data["searchedLayers"] and "session" not in data["searchedLayers"]
    for identifiers, layers in (
        ({"agentId": "a1", "userId": "u1", "sessionId": "s1"},
         ["agent", "user", "session", "company"]),
        ({"agentId": "a1"}, ["company"]),
        ({"sessionId": "s1"}, ["company"]),
        ({}, ["company"]),
    ):
        assert searched(tenant_a, "anything", identifiers=identifiers)["searchedLayers"] == layers


def test_a_registered_project_brings_its_team_and_org(tenant_a) -> None:
    for url, payload in (("/api/v1/orgs", {"orgId": "o1"}),
                         ("/api/v1/teams", {"teamId": "t1", "orgId": "o1"}),
                         ("/api/v1/projects", {"projectId": "p1", "teamId": "t1"})):
        assert tenant_a.client.post(url, payload, format="json").status_code == 201
    team = tenant_a.add("The team standup is at nine", layer="team",
                        identifiers={"teamId": "t1"})
    org = tenant_a.add("The org standup policy is daily", layer="org", identifiers={"orgId": "o1"})
    data = searched(tenant_a, "standup", mode="keyword",
                    identifiers={"userId": "u1", "projectId": "p1"})
    assert data["searchedLayers"] == ["user", "project", "team", "org", "company"]
    assert ids(data["results"]) == [str(team.pk), str(org.pk)]


def test_it_puts_a_project_result_before_a_better_company_result(tenant_a) -> None:
    company = tenant_a.add("User prefers dark mode in every editor", layer="company",
                           identifiers={})
    project = tenant_a.add("Project wiki uses a dark colour theme", layer="project",
                           identifiers={"projectId": "p1"})
    results = searched(tenant_a, "dark mode preference", mode="semantic", threshold=0.0,
                       identifiers={"projectId": "p1"})["results"]
    assert ids(results) == [str(project.pk), str(company.pk)]
    assert [r["layer"] for r in results] == ["project", "company"]
    assert results[0]["score"] < results[1]["score"]


def test_it_drops_a_lower_precedence_near_duplicate(tenant_a) -> None:
    user = tenant_a.add("Use tabs for indentation")
    tenant_a.add("Use tabs for indentation", layer="company", identifiers={})
    other = tenant_a.add("Indentation reviews happen on Fridays", layer="company",
                         identifiers={})
    results = searched(tenant_a, "indentation", mode="semantic", threshold=0.0)["results"]
    assert ids(results) == [str(user.pk), str(other.pk)]


def test_it_drops_a_case_variant_but_keeps_a_paraphrase_below_0_95(tenant_a) -> None:
    project = tenant_a.add("Use tabs for indentation", layer="project",
                           identifiers={"projectId": "p1"})
    tenant_a.add("USE TABS FOR INDENTATION", layer="company", identifiers={})  # cosine 1.0
    paraphrase = tenant_a.add("Always use tabs for indentation", layer="company",
                              identifiers={})  # cosine 0.948
    spaces = tenant_a.add("Use spaces for indentation", layer="company", identifiers={})
    results = searched(tenant_a, "tabs or spaces for indentation", mode="semantic",
                       threshold=0.0, identifiers={"projectId": "p1"})["results"]
    assert ids(results)[0] == str(project.pk)
    assert set(ids(results)) == {str(project.pk), str(paraphrase.pk), str(spaces.pk)}
    assert [r["layer"] for r in results] == ["project", "company", "company"]


def test_it_refuses_a_layer_without_its_identifier(tenant_a) -> None:
    error = assert_error(search(tenant_a, "x", layers=["session"]), 400, "MISSING_IDENTIFIER")
    assert error["details"]["missing"] == ["sessionId"]
    assert error["retryable"] is False


def test_it_refuses_an_unknown_layer(tenant_a) -> None:
    error = assert_error(search(tenant_a, "x", layers=["galaxy"]), 400, "INVALID_LAYER")
    assert error["retryable"] is False


# --- scope and metadata filters -------------------------------------------------------

def test_it_filters_by_scope(tenant_a) -> None:
    made = scoped_memories(tenant_a)
    results = searched(tenant_a, "blood pressure", mode="keyword", scope="health")["results"]
    expected = {"fact-global", "fact-health", "rule-health", "episode-health"}
    assert set(ids(results)) == {str(made[k].pk) for k in expected}
    everything = searched(tenant_a, "blood pressure", mode="keyword")["results"]
    assert set(ids(everything)) == {str(m.pk) for m in made.values()}


def test_it_filters_by_tags_with_or_and_by_a_custom_range(tenant_a) -> None:
    a = tenant_a.add("Garden task one", metadata={"tags": ["a"], "priority": 1})
    b = tenant_a.add("Garden task two", metadata={"tags": ["b"], "priority": 3})
    c = tenant_a.add("Garden task three", metadata={"tags": ["c"], "priority": 5})
    found = searched(tenant_a, "garden task", mode="semantic", threshold=0.0,
                     filter={"tags": ["a", "b"]})["results"]
    assert set(ids(found)) == {str(a.pk), str(b.pk)}
    found = searched(tenant_a, "garden task", mode="semantic", threshold=0.0,
                     filter={"custom": {"priority": {"gte": 2, "lt": 5}}})["results"]
    assert ids(found) == [str(b.pk)]
    found = searched(tenant_a, "garden task", mode="keyword",
                     filter={"custom": {"priority": 5}})["results"]
    assert ids(found) == [str(c.pk)]


# --- reference bumping ----------------------------------------------------------------

def test_search_bumps_every_returned_memory_in_one_update(tenant_a) -> None:
    hits = [tenant_a.add(f"Bird sighting number {i}") for i in range(3)]
    miss = tenant_a.add("Quarterly tax filing")
    with MemoryUpdates() as updates:
        results = searched(tenant_a, "bird sighting", mode="keyword")["results"]
    assert set(ids(results)) == {str(m.pk) for m in hits}
    assert updates.count == 1
    for memory in hits:
        fresh = reload(tenant_a, memory)
        assert fresh.reference_count == 1 and fresh.last_referenced_at is not None
    assert reload(tenant_a, miss).reference_count == 0
    assert reload(tenant_a, miss).last_referenced_at is None


def test_recall_and_get_bump_in_one_update(tenant_a) -> None:
    hits = [tenant_a.add(f"Bird sighting number {i}") for i in range(3)]
    with MemoryUpdates() as updates:
        response = tenant_a.client.post(RECALL_URL, {"topic": "bird sighting",
                                                     "identifiers": USER}, format="json")
    assert response.status_code == 200
    assert len(body(response)["results"]) == 3
    assert updates.count == 1
    with MemoryUpdates() as updates:
        response = tenant_a.client.get(f"/api/v1/memories/{hits[0].pk}")
    assert response.status_code == 200
    assert updates.count == 1
    assert body(response)["memory"]["id"] == str(hits[0].pk)
    assert [reload(tenant_a, m).reference_count for m in hits] == [2, 1, 1]


# --- tenant isolation and query cache -------------------------------------------------

def test_each_tenant_finds_only_its_own_memory(tenant_a, tenant_b) -> None:
    mine = tenant_a.add("Shared secret recipe uses saffron")
    theirs = tenant_b.add("Shared secret recipe uses saffron")
    for tenant, own in ((tenant_a, mine), (tenant_b, theirs)):
        for mode in ("semantic", "keyword", "hybrid"):
            results = searched(tenant, "saffron recipe", mode=mode, threshold=0.0)["results"]
            assert ids(results) == [str(own.pk)], mode


@pytest.fixture
def counting_embedder() -> Any:
    counter = CountingEmbedder(embeddings.get_embedder())
    previous = embeddings.set_embedder(counter)
    try:
        yield counter
    finally:
        embeddings.set_embedder(previous)


def test_a_repeated_query_does_not_call_the_model(tenant_a, counting_embedder) -> None:
    tenant_a.add("The user lives in Lisbon")
    counting_embedder.calls.clear()
    first = searched(tenant_a, "Where does the USER live?", mode="semantic", threshold=0.3)
    assert counting_embedder.calls == [["where does the user live?"]]
    second = searched(tenant_a, "  where does\tthe user   LIVE? ", mode="semantic",
                      threshold=0.3)
    assert len(counting_embedder.calls) == 1
    assert contents(first["results"]) == contents(second["results"]) == [
        "The user lives in Lisbon"]
    assert first["results"][0]["similarity"] == pytest.approx(
        second["results"][0]["similarity"], abs=1e-6)


class TestSearchApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = ('memory.search',)
