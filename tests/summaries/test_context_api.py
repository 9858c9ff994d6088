"""Context assembly over HTTP (``POST /api/v1/context``): JSON within the token budget with
every layer's score, Markdown by ``Accept`` or ``format``, reference counts, restricted keys,
and bad input answered with the JSON envelope (never a 500)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from memories.models import Memory
from summaries.context import MAX_BUDGET, MIN_BUDGET
from summaries.generation import summary_generate
from summaries.scopes import scope_for
from summaries.tokens import TOKENIZER_NAME, count_tokens
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers
from tests.conftest import TenantFixture
from tests.helpers import assert_error, body, new_key

pytestmark = pytest.mark.django_db

C = "/api/v1/context"
FACTS = ["Maria moved to Lisbon last spring.", "The Falcon project ships in May.",
         "Maria adopted a cat named Pixel.", "We fixed the memory leak in Falcon.",
         "The Falcon launch party is in Lisbon.", "Jon reviews every Falcon release."]
CONTEXT_KEYS = {"query", "budget", "tokenCount", "tokenizer", "summaries", "memories",
                "layerScores", "included", "warnings"}


@pytest.fixture
def project(tenant_a: TenantFixture) -> list[Memory]:
    """Project p1's memories (twice over, reworded), user u1's, and p1's summaries."""
    added = [tenant_a.add(f"{text} (note {n})", layer="project", identifiers={"projectId": "p1"})
             for n in range(2) for text in FACTS]
    added += [tenant_a.add("Ana prefers green tea.", identifiers={"userId": "u1"}),
              tenant_a.add("Ana lives in Lisbon too.", identifiers={"userId": "u1"})]
    with tenant_scope(tenant_a.ctx):
        summary_generate(tenant_a.ctx, scope=scope_for(
            Layer.PROJECT, LayerIdentifiers(projectId="p1")), trigger="manual")
    return added


def post(client: Any, data: Any, url: str = C, **extra: Any) -> Any:
    return client.post(url, data, format="json", **extra)


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    return body(response)


# --- JSON -----------------------------------------------------------------------------------

def test_it_assembles_a_context_within_the_budget(tenant_a: TenantFixture,
                                                  project: list[Memory]) -> None:
    data = ok(post(tenant_a.client, {"identifiers": {"projectId": "p1", "userId": "u1"},
                                     "query": "Where does Maria live?", "budget": 300}))
    assert set(data) == CONTEXT_KEYS
    assert data["budget"] == 300 and 0 < data["tokenCount"] <= 300
    assert data["tokenizer"] == TOKENIZER_NAME and data["query"] == "Where does Maria live?"
    ids = {str(m.pk) for m in project}
    assert data["memories"] and {m["id"] for m in data["memories"]} <= ids
    assert data["included"]["memoryIds"] == [m["id"] for m in data["memories"]]
    assert data["included"]["summaryIds"] == [s["id"] for s in data["summaries"]]
    scores = {s["layer"]: s for s in data["layerScores"]}
    assert "project" in scores and set(scores["project"]) == {
        "layer", "scope", "score", "includedDepth", "reason"}
    assert scores["project"]["scope"] == "projectId=p1"
    for summary in data["summaries"]:
        assert summary["layer"] == "project" and summary["stale"] is False
        assert summary["depth"] == scores["project"]["includedDepth"]


def test_it_never_exceeds_small_or_large_budgets(tenant_a: TenantFixture,
                                                 project: list[Memory]) -> None:
    for budget in (MIN_BUDGET, 80, 150, 600, MAX_BUDGET):
        for query in ("Falcon", None):
            data = ok(post(tenant_a.client, {"identifiers": {"projectId": "p1"},
                                             "query": query, "budget": budget}))
            assert data["tokenCount"] <= budget, (budget, query, data["tokenCount"])
    everything = ok(post(tenant_a.client, {"identifiers": {"projectId": "p1"},
                                           "budget": MAX_BUDGET, "summaryShare": 0}))
    assert everything["summaries"] == [] and len(everything["memories"]) == 12


def test_without_a_query_layers_go_by_precedence(tenant_a: TenantFixture,
                                                 project: list[Memory]) -> None:
    data = ok(post(tenant_a.client, {"identifiers": {"projectId": "p1", "userId": "u1"}}))
    assert data["query"] is None and data["summaries"]
    assert all(s["score"] is None for s in data["layerScores"])
    quoted = {i for s in data["summaries"] for i in s["sourceIds"]}
    assert not quoted & set(data["included"]["memoryIds"])  # said by a summary already
    no_summaries = ok(post(tenant_a.client, {"identifiers": {"projectId": "p1", "userId": "u1"},
                                             "summaryShare": 0}))
    assert no_summaries["summaries"] == []
    assert [(s["layer"], s["includedDepth"], s["reason"]) for s in no_summaries[
        "layerScores"]] == [("project", None, "over budget")]
    layers = [m["layer"] for m in no_summaries["memories"]]
    assert layers == sorted(layers, key=["user", "project"].index) and len(set(layers)) == 2


def test_one_depth_for_every_summary(tenant_a: TenantFixture, project: list[Memory]) -> None:
    data = ok(post(tenant_a.client, {"identifiers": {"projectId": "p1"},
                                     "depth": "sentence", "budget": 4000}))
    assert [s["depth"] for s in data["summaries"]] == ["sentence"]


def test_included_memories_have_their_reference_counts_bumped(
        tenant_a: TenantFixture, project: list[Memory]) -> None:
    data = ok(post(tenant_a.client, {"identifiers": {"projectId": "p1"}, "query": "Falcon",
                                     "budget": 400}))
    included = set(data["included"]["memoryIds"])
    assert included
    with tenant_scope(tenant_a.ctx):
        counts = dict(Memory.objects.values_list("id", "reference_count"))
    assert {str(pk) for pk, n in counts.items() if n == 1} == included
    assert all(n in (0, 1) for n in counts.values())


def test_it_holds_none_of_another_tenants_memories(tenant_a: TenantFixture,
                                                   tenant_b: TenantFixture,
                                                   project: list[Memory]) -> None:
    secret = tenant_b.add("Globex hides the Falcon prototype in Lisbon.", layer="project",
                          identifiers={"projectId": "p1"})
    with tenant_scope(tenant_b.ctx):
        summary_generate(tenant_b.ctx, scope=scope_for(
            Layer.PROJECT, LayerIdentifiers(projectId="p1")), trigger="manual")
    response = post(tenant_a.client, {"identifiers": {"projectId": "p1"},
                                      "query": "Falcon prototype Lisbon", "budget": 4000})
    assert "Globex" not in response.content.decode()
    assert str(secret.pk) not in ok(response)["included"]["memoryIds"]


# --- Markdown -------------------------------------------------------------------------------

def _markdown(response: Any, budget: int) -> str:
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    text = response.content.decode()
    assert int(response["X-Token-Budget"]) == budget
    assert int(response["X-Token-Count"]) == count_tokens(text) <= budget
    assert "Accept" in response["Vary"]
    return text


def test_it_answers_markdown_when_accept_asks_for_it(tenant_a: TenantFixture,
                                                     project: list[Memory]) -> None:
    request = {"identifiers": {"projectId": "p1"}, "query": "Falcon", "budget": 400}
    as_json = ok(post(tenant_a.client, request))
    text = _markdown(post(tenant_a.client, request, HTTP_ACCEPT="text/markdown"), 400)
    assert text.startswith("## What we know\n### Project p1 (")
    assert "## Relevant memories" in text
    for memory in as_json["memories"]:
        assert f"- {memory['content']}" in text
    assert int(count_tokens(text)) == as_json["tokenCount"]
    weighted = post(tenant_a.client, request,
                    HTTP_ACCEPT="application/json;q=0.5, text/markdown")
    assert _markdown(weighted, 400) == text
    assert ok(post(tenant_a.client, request, HTTP_ACCEPT="text/markdown;q=0.1, */*"))


def test_it_answers_markdown_for_format_in_body_or_query(tenant_a: TenantFixture,
                                                         project: list[Memory]) -> None:
    request = {"identifiers": {"projectId": "p1"}, "budget": 200}
    in_body = _markdown(post(tenant_a.client, {**request, "format": "markdown"}), 200)
    in_query = _markdown(post(tenant_a.client, request, url=f"{C}?format=markdown"), 200)
    assert in_body == in_query and in_body.startswith("## ")
    assert ok(post(tenant_a.client, {**request, "format": "json"},
                   HTTP_ACCEPT="text/markdown"))["budget"] == 200
    assert ok(post(tenant_a.client, request, url=f"{C}?format=json"))["budget"] == 200


def test_an_empty_context_is_empty_markdown(tenant_a: TenantFixture) -> None:
    response = post(tenant_a.client, {"identifiers": {"projectId": "nothing-here"},
                                      "format": "markdown"})
    assert _markdown(response, 2000) == ""


def test_errors_stay_json_when_markdown_is_asked_for(tenant_a: TenantFixture) -> None:
    error = assert_error(post(tenant_a.client, {"budget": 0}, HTTP_ACCEPT="text/markdown"),
                         400, "INVALID_INPUT")
    assert error["operation"] == "context.assemble"
    assert_error(post(tenant_a.client, {"budget": 0, "format": "markdown"}), 400)
    assert_error(post(tenant_a.client, {"budget": "x"}, url=f"{C}?format=markdown"), 400)
    assert_error(post(tenant_a.client, {}, url=f"{C}?format=xml"), 400, "INVALID_INPUT")
    assert_error(post(tenant_a.client, {"format": "json"}, url=f"{C}?format=markdown"), 400)


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [0, MIN_BUDGET - 1, MAX_BUDGET + 1, 10**9, -5])
def test_it_refuses_a_budget_out_of_range(tenant_a: TenantFixture, budget: int) -> None:
    error = assert_error(post(tenant_a.client, {"identifiers": {"projectId": "p1"},
                                                "budget": budget}), 400, "INVALID_INPUT")
    assert error["details"] == {"field": "budget", "min": MIN_BUDGET, "max": MAX_BUDGET}


@pytest.mark.parametrize(("data", "field"), [
    ({"budget": "ten"}, "budget"),
    ({"budget": "2000"}, "budget"),
    ({"budget": 2000.5}, "budget"),
    ({"budget": True}, "budget"),
    ({"budget": None}, "budget"),
    ({"identifiers": ["projectId"]}, "identifiers"),
    ({"identifiers": "p1"}, "identifiers"),
    ({"identifiers": []}, "identifiers"),
    ({"identifiers": None}, "identifiers"),
    ({"identifiers": {"planetId": "x"}}, "identifiers"),
    ({"identifiers": {"projectId": 5}}, "identifiers"),
    ({"query": 5}, "query"),
    ({"query": ["Falcon"]}, "query"),
    ({"summaryShare": "half"}, "summaryShare"),
    ({"summaryShare": False}, "summaryShare"),
    ({"depth": 3}, "depth"),
    ({"format": "xml"}, "format"),
])
def test_it_refuses_fields_of_the_wrong_type(tenant_a: TenantFixture, data: dict[str, Any],
                                             field: str) -> None:
    error = assert_error(post(tenant_a.client, data), 400, "INVALID_INPUT")
    assert field in error["details"]["fields"]


@pytest.mark.parametrize(("data", "code", "field"), [
    ({"summaryShare": 1.5}, "INVALID_INPUT", "summaryShare"),
    ({"summaryShare": -0.1}, "INVALID_INPUT", "summaryShare"),
    ({"depth": "huge"}, "INVALID_INPUT", "depth"),
    ({"depth": ""}, "INVALID_INPUT", "depth"),
    ({"query": ""}, "INVALID_INPUT", None),
    ({"query": "   "}, "INVALID_INPUT", None),
])
def test_it_refuses_values_out_of_range(tenant_a: TenantFixture, data: dict[str, Any],
                                        code: str, field: str | None) -> None:
    error = assert_error(post(tenant_a.client, data), 400, code)
    if field:
        assert error["details"]["field"] == field


def test_it_refuses_a_query_too_long(tenant_a: TenantFixture, settings: Any) -> None:
    limit = settings.MEMORY_MAX_QUERY_LENGTH
    error = assert_error(post(tenant_a.client, {"query": "q" * (limit + 1)}), 400,
                         "QUERY_TOO_LONG")
    assert error["details"]["max_length"] == limit
    assert ok(post(tenant_a.client, {"query": "q" * limit}))["query"] == "q" * limit


def test_it_refuses_other_requests_with_the_envelope(tenant_a: TenantFixture,
                                                    anon: Any) -> None:
    c = tenant_a.client
    assert_error(post(c, {}, url=f"{C}?userId=u1"), 400, "INVALID_INPUT")
    assert_error(c.post(C, "{not json", content_type="application/json"), 400)
    assert_error(c.post(C, "budget=5", content_type="text/plain"), 415)
    assert_error(post(c, [1, 2]), 400)
    assert_error(post(c, {"identifiers": {"companyId": "someone-else"}}), 400)
    assert_error(c.get(C), 405, "METHOD_NOT_ALLOWED")
    assert_error(post(anon, {}), 401, "MISSING_TENANT_CONTEXT")


def test_a_restricted_key_gets_only_its_own_memories(tenant_a: TenantFixture,
                                                     project: list[Memory]) -> None:
    tenant_a.add("Bo prefers black coffee.", identifiers={"userId": "u2"})
    _, restricted = new_key(tenant_a, allowed_layers=["user"],
                            pinned_identifiers={"userId": "u1"})
    data = ok(post(restricted, {"identifiers": {"projectId": "p1"}, "query": "prefers",
                                "budget": 1000}))
    assert {m["layer"] for m in data["memories"]} == {"user"}
    assert "Ana prefers green tea." in {m["content"] for m in data["memories"]}
    assert "coffee" not in json.dumps(data) and data["summaries"] == []
    assert_error(post(restricted, {"identifiers": {"userId": "u2"}}), 403, "UNAUTHORIZED")


# --- whatever a client sends ----------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=12), st.sampled_from(["markdown", "json", "sentence", ""])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["projectId", "userId", "x"]),
                                            inner, max_size=3)),
    max_leaves=6)


@examples(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.dictionaries(st.sampled_from(["identifiers", "query", "budget", "depth",
                                             "summaryShare", "format"]), json_values,
                            max_size=4))
def test_any_body_is_answered_or_refused_with_an_envelope(tenant_a: TenantFixture,
                                                          settings: Any,
                                                          data: dict[str, Any]) -> None:
    settings.RATE_LIMIT_REQUESTS = 0  # many calls with one key
    response = post(tenant_a.client, data)
    assert response.status_code in (200, 400), response.content[:300]
    if response.status_code == 400:
        assert_error(response, 400)
