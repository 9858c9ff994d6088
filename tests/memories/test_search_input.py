"""Bad search input: clear errors in the one envelope, or empty results, never a 500."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.helpers import assert_error
from tests.retrieval_helpers import USER, ids, search, searched

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("change", "code"), [
    ({"query": ""}, "INVALID_INPUT"),
    ({"query": "   "}, "INVALID_INPUT"),
    ({"query": None}, "INVALID_INPUT"),
    ({"limit": 0}, "INVALID_INPUT"),
    ({"limit": 10**9}, "INVALID_INPUT"),
    ({"mode": "fuzzy"}, "INVALID_INPUT"),
    ({"threshold": -0.1}, "INVALID_INPUT"),
    ({"threshold": 1.5}, "INVALID_INPUT"),
    ({"threshold": True}, "INVALID_INPUT"),  # DRF's FloatField would read it as 1.0
    ({"threshold": "0.5"}, "INVALID_INPUT"),
    ({"filter": {"tags": "x"}}, "INVALID_INPUT"),
    ({"filter": {"colour": "red"}}, "INVALID_INPUT"),
    ({"filter": {"custom": {"n": {"gte": 1, "between": 5}}}}, "INVALID_INPUT"),
    ({"filter": {"custom": {"bad name!": 1}}}, "INVALID_INPUT"),
    ({"layers": []}, "INVALID_INPUT"),
    ({"identifiers": {"userId": ""}}, "INVALID_INPUT"),
    ({"identifiers": {"userId": "u1", "companyId": "globex"}}, "INVALID_INPUT"),
    ({"identifiers": {"planetId": "p"}}, "INVALID_INPUT"),
])
def test_it_refuses_bad_search_input(tenant_a, change, code) -> None:
    payload = {"query": "garden", "identifiers": USER, **change}
    response = tenant_a.client.post("/api/v1/memories/search", payload, format="json")
    assert_error(response, 400, code)


def test_it_refuses_an_over_long_query_with_its_limit(tenant_a) -> None:
    limit = settings.MEMORY_MAX_QUERY_LENGTH
    error = assert_error(search(tenant_a, "x" * (limit + 1)), 400, "QUERY_TOO_LONG")
    assert error["details"]["max_length"] == limit
    assert search(tenant_a, "x" * limit, mode="keyword").status_code == 200


@pytest.mark.parametrize("query", ["O'Brien's", "back\\slash", "C++ & Rust | Go", "1:2:3",
                                   "ünïcödé", "emoji 😀", "'; DROP TABLE x; --", "a" * 500])
def test_odd_keyword_queries_never_fail(tenant_a, query) -> None:
    tenant_a.add("Mr. O'Brien's back\\slash notes on C++ and Rust")
    for mode in ("keyword", "hybrid"):
        assert search(tenant_a, query, mode=mode).status_code == 200, (mode, query)


def test_a_keyword_with_an_apostrophe_matches(tenant_a) -> None:
    obrien = tenant_a.add("Mr. O'Brien fixed the boiler")
    tenant_a.add("The user enjoys reading novels")
    assert ids(searched(tenant_a, "O'Brien", mode="keyword")["results"]) == [str(obrien.pk)]


@pytest.mark.parametrize("query", ["the of and", "?!...", "   ;;; ", "*:&|!"])
def test_a_keyword_query_without_terms_finds_nothing(tenant_a, query) -> None:
    tenant_a.add("The user enjoys reading novels")
    data = searched(tenant_a, query, mode="keyword")
    assert data["results"] == [] and data["totalCount"] == 0
