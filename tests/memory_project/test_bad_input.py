"""No input a client can send gets a 500, a non-envelope answer, or changes stored data."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.helpers import assert_error, body, snapshot

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"
VALID = {"content": "A valid memory", "layer": "user", "identifiers": {"userId": "u1"}}


@pytest.fixture
def stored(tenant_a) -> Any:
    """Tenant A with memories and a hierarchy; yields it and checks nothing changed."""
    tenant_a.add("Stored fact one", metadata={"tags": ["keep"]})
    tenant_a.add("Stored fact two", "project", identifiers={"projectId": "p1"})
    assert tenant_a.client.post("/api/v1/orgs", {"orgId": "o1"}, format="json").status_code \
        == 201
    before = snapshot(tenant_a)
    yield tenant_a
    assert snapshot(tenant_a) == before


def send(tenant: Any, method: str, url: str, raw: str | bytes,
         content_type: str = "application/json") -> Any:
    return getattr(tenant.client, method)(url, data=raw, content_type=content_type)


def with_field(**fields: Any) -> str:
    return json.dumps({**VALID, **fields})


WRITE_ENDPOINTS = [("post", M), ("post", f"{M}/bulk"), ("post", f"{M}/bulk-delete"),
                   ("patch", f"{M}/{uuid.UUID(int=7)}"), ("post", "/api/v1/orgs"),
                   ("post", "/api/v1/teams"), ("post", "/api/v1/projects")]


@pytest.mark.parametrize(("method", "url"), WRITE_ENDPOINTS)
@pytest.mark.parametrize("raw", ['{"content": ', "{'a': 1}", "nope", '{"a": 1,}', "[1, 2]",
                                 '"just a string"', "null", "42", "{}"])
def test_it_answers_malformed_or_non_object_json_with_400(stored, method, url, raw) -> None:
    error = assert_error(send(stored, method, url, raw), 400, "INVALID_INPUT")
    assert error["retryable"] is False


@pytest.mark.parametrize(
    "raw",
    [
        with_field(identifiers="x"), with_field(identifiers=["userId"]),
        with_field(identifiers={"userId": 5}), with_field(identifiers={"nope": "x"}),
        with_field(identifiers={"userId": ""}), with_field(identifiers={"userId": "x" * 256}),
        with_field(metadata=[1]), with_field(metadata="x"), with_field(metadata=None),
        with_field(metadata={"tags": "a"}), with_field(metadata={"tags": [1]}),
        with_field(metadata={"source": {"type": "fax"}}), with_field(layer=5),
        with_field(layer=["user"]), with_field(content=None), with_field(content=""),
        with_field(content="   "), with_field(content={"text": "x"}),
        with_field(importance="high"), with_field(importance=2.0), with_field(importance=-0.1),
        with_field(importance="NaN"), with_field(importance="Infinity"),
        with_field(confidence=1.5), with_field(decayRate=-1), with_field(sensitive="maybe"),
        with_field(kind="opinion"), with_field(scope=""), with_field(scope="s" * 101),
        with_field(metadata={"blob": "x" * 70_000}),
        with_field()[:-1] + ', "importance": NaN}',
        with_field()[:-1] + ', "importance": Infinity}',
        with_field()[:-1] + ', "importance": 1e999}',
        with_field()[:-1] + ', "importance": ' + "9" * 400 + "}",
        with_field()[:-1] + ', "importance": ' + "9" * 5000 + "}",
    ],
)
def test_it_answers_wrong_types_and_ranges_with_400(stored, raw: str) -> None:
    assert_error(send(stored, "post", M, raw), 400)


@pytest.mark.parametrize("field", ["importance", "confidence", "decayRate"])
@pytest.mark.parametrize("value", [True, False, "0.5", None])
def test_a_score_must_be_a_json_number(tenant_a, field: str, value: object) -> None:
    """DRF's FloatField reads ``true`` as 1.0 and ``"0.5"`` as 0.5; the API takes numbers only,
    on add and on update, and stores nothing from a refused request."""
    memory = tenant_a.add("Already here")
    before = snapshot(tenant_a)
    added = tenant_a.client.post(M, {"content": "x", "layer": "user",
                                       "identifiers": {"userId": "u1"}, field: value},
                                 format="json")
    assert field in assert_error(added, 400, "INVALID_INPUT")["details"]["fields"]
    updated = tenant_a.client.patch(f"{M}/{memory.pk}", {field: value}, format="json")
    assert_error(updated, 400, "INVALID_INPUT")
    assert snapshot(tenant_a) == before


def test_it_refuses_a_number_as_content(tenant_a) -> None:
    response = send(tenant_a, "post", M, with_field(content=5))
    assert snapshot(tenant_a) == []
    assert_error(response, 400, "INVALID_INPUT")


def test_it_refuses_numbers_as_hierarchy_ids(stored) -> None:
    assert_error(send(stored, "post", "/api/v1/orgs", '{"orgId": 5}'), 400, "INVALID_INPUT")
    assert_error(send(stored, "post", "/api/v1/teams", '{"teamId": "t", "orgId": 1}'), 400)


@pytest.mark.parametrize(("url", "template"), [
    ("/api/v1/orgs", '{"orgId": "%s"}'),
    ("/api/v1/teams", '{"teamId": "%s", "orgId": "o1"}'),
    ("/api/v1/projects", '{"projectId": "%s"}'),
])
def test_it_refuses_a_slash_in_a_hierarchy_id(stored, url: str, template: str) -> None:
    """The node's URL names it, so "eng/" could never be fetched or deleted: 400, nothing
    created (the OpenAPI document says so with ``ADDRESSABLE_ID_PATTERN``)."""
    before = body(stored.client.get(url))
    assert_error(send(stored, "post", url, template % "eng/"), 400, "INVALID_INPUT")
    assert body(stored.client.get(url)) == before


# \u0000 and a lone surrogate, as JSON spells them: neither can be stored by PostgreSQL.
@pytest.mark.parametrize("bad", ["\\u0000", "\\ud800", "\\udfff"])
@pytest.mark.parametrize(
    ("method", "url", "template"),
    [
        ("post", M, '{"content": "a%sb", "layer": "user", "identifiers": {"userId": "u1"}}'),
        ("post", M, '{"content": "x", "layer": "user", "identifiers": {"userId": "u%s"}}'),
        ("post", M, '{"content": "x", "layer": "user%s", "identifiers": {"userId": "u1"}}'),
        ("post", M, '{"content": "x", "layer": "user", "identifiers": {"userId": "u1"}, '
                    '"metadata": {"k": "v%s"}}'),
        ("post", M, '{"content": "x", "layer": "user", "identifiers": {"userId": "u1"}, '
                    '"metadata": {"k%s": 1}}'),
        ("post", M, '{"content": "x", "layer": "user", "identifiers": {"userId": "u1"}, '
                    '"metadata": {"tags": ["a%s"]}}'),
        ("post", M, '{"content": "x", "layer": "user", "identifiers": {"userId": "u1"}, '
                    '"metadata": {"deep": [{"deeper": ["%s"]}]}}'),
        ("post", M, '{"content": "x", "layer": "user", "identifiers": {"userId": "u1"}, '
                    '"scope": "s%s"}'),
        ("post", f"{M}/bulk", '{"memories": [{"content": "x%s", "layer": "user", '
                              '"identifiers": {"userId": "u1"}}]}'),
        ("post", f"{M}/bulk-delete", '{"ids": ["%s"]}'),
        ("patch", f"{M}/{{id}}", '{"content": "x%s"}'),
        ("patch", f"{M}/{{id}}", '{"metadata": {"k": "%s"}}'),
        ("post", "/api/v1/orgs", '{"orgId": "o%s"}'),
        ("post", "/api/v1/teams", '{"teamId": "t%s", "orgId": "o1"}'),
        ("post", "/api/v1/projects", '{"projectId": "p", "teamId": "t%s"}'),
    ],
)
def test_it_refuses_nul_and_lone_surrogates_everywhere(stored, bad, method, url,
                                                       template) -> None:
    memory_id = snapshot(stored)[0]["id"]
    assert_error(send(stored, method, url.format(id=memory_id), template % bad), 400,
                 "INVALID_INPUT")


@pytest.mark.parametrize("depth", [200, 5_000, 100_000])
def test_it_refuses_deeply_nested_bodies(stored, depth: int) -> None:
    nested = '{"a": ' * depth + "1" + "}" * depth
    response = send(stored, "post", M, with_field()[:-1] + f', "metadata": {nested}}}')
    if depth == 200:  # deep but sane: stored as sent
        assert response.status_code == 201, response.content
        stored.client.delete(f"{M}/{body(response)['memory']['id']}?hard=true")
    else:
        assert_error(response, 400, "INVALID_INPUT")
    assert_error(send(stored, "post", M, "[" * depth + "]" * depth), 400, "INVALID_INPUT")


def test_it_answers_413_over_the_body_limit(stored, settings) -> None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    raw = with_field(metadata={"pad": "x" * limit})
    error = assert_error(send(stored, "post", M, raw), 413, "PAYLOAD_TOO_LARGE")
    assert error["details"]["max_bytes"] == limit
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 200
    assert_error(send(stored, "post", f"{M}/bulk", json.dumps({"memories": [VALID] * 5})),
                 413, "PAYLOAD_TOO_LARGE")
    assert_error(send(stored, "patch", f"{M}/{uuid.uuid4()}", json.dumps({"content": "y" * 300})),
                 413, "PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/xml"])
def test_it_answers_415_for_other_media_types(stored, content_type: str) -> None:
    for method, url in (("post", M), ("post", f"{M}/bulk"), ("post", "/api/v1/orgs")):
        assert_error(send(stored, method, url, "content=x&layer=user", content_type), 415)


@pytest.mark.parametrize(
    "query",
    [
        "limit=0", "limit=101", f"limit={10**9}", "limit=abc", "limit=-5", "limit=" + "9" * 5000,
        "cursor=%%%", "cursor=abc", "cursor=" + "A" * 1000,
        "custom.score__between=1", "custom.score__=1", "custom.score__gte=true",
        "custom.a%20b=1", "custom.=1", "custom.a.b.c.d.e.f=1", "custom.x=a%00b",
        "tags=%00", "sourceType=fax", "hasKnowledgePointer=yes", "userId=", "agentId=x%00",
    ],
)
def test_it_answers_bad_list_parameters_with_400(stored, query: str) -> None:
    response = stored.client.get(f"{M}?layer=user&userId=u1&{query}")
    assert_error(response, 400, "INVALID_INPUT")


@pytest.mark.parametrize(
    "url",
    ["/api/v1/reviews?status=", "/api/v1/reviews?status=open", "/api/v1/reviews?kind=x%00",
     "/api/v1/reviews?kind=", "/api/v1/audit?action=", "/api/v1/audit?action=a%00b",
     "/api/v1/audit?action=" + "a" * 65],
)
def test_it_answers_bad_review_and_audit_filters_with_400(stored, url: str) -> None:
    assert_error(stored.client.get(url), 400, "INVALID_INPUT")


def test_it_filters_reviews_and_audit_by_valid_values(stored) -> None:
    assert stored.client.get("/api/v1/reviews?status=pending&kind=policy_hit").status_code \
        == 200
    actions = {e["action"] for e in body(stored.client.get("/api/v1/audit"))["results"]}
    assert actions, "the stored fixture writes audit entries"
    action = sorted(actions)[0]
    filtered = body(stored.client.get("/api/v1/audit", {"action": action}))["results"]
    assert filtered and {e["action"] for e in filtered} == {action}


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "9" * 400])
@pytest.mark.parametrize("op", ["", "__gte", "__lt", "__contains"])
def test_it_takes_odd_numbers_in_filters_without_failing(stored, value: str, op: str) -> None:
    response = stored.client.get(f"{M}?layer=user&userId=u1&custom.score{op}={value}")
    assert response.status_code == 200, response.content
    assert body(response)["memories"] == []


@pytest.mark.parametrize(
    ("method", "url"),
    [("generic:FOO", M), ("put", f"{M}/{{id}}"), ("put", M), ("get", f"{M}/bulk"),
     ("put", f"{M}/bulk-delete"), ("patch", "/api/v1/orgs/o1"), ("put", "/api/v1/orgs"),
     ("generic:PROPFIND", "/api/v1/projects")],
)
def test_it_answers_405_for_methods_a_route_does_not_serve(stored, method, url) -> None:
    url = url.format(id=snapshot(stored)[0]["id"])
    if method.startswith("generic:"):
        response = stored.client.generic(method.split(":")[1], url)
    else:
        response = getattr(stored.client, method)(url, {}, format="json")
    assert_error(response, 405, "METHOD_NOT_ALLOWED")


@pytest.mark.parametrize("path", ["%00", "a%00b", "%ED%A0%80", "x" * 3000, "..", "%2e%2e"])
def test_it_answers_404_for_odd_hierarchy_ids(stored, path: str) -> None:
    for plural in ("orgs", "teams", "projects"):
        for method in ("get", "delete"):
            response = getattr(stored.client, method)(f"/api/v1/{plural}/{path}")
            assert_error(response, 404, "NOT_FOUND")


@pytest.mark.parametrize("path", ["%00", "%ED%A0%80", "x" * 3000, "0" * 32, "-1"])
def test_it_answers_odd_memory_ids_like_missing_ones(stored, path: str) -> None:
    assert_error(stored.client.get(f"{M}/{path}"), 404, "MEMORY_NOT_FOUND")
    assert_error(send(stored, "patch", f"{M}/{path}", '{"content": "x"}'), 404,
                 "MEMORY_NOT_FOUND")
    assert body(stored.client.delete(f"{M}/{path}")) == {"success": True}


# --- property: random bodies ------------------------------------------------------------

FIELDS = ["content", "layer", "identifiers", "metadata", "kind", "scope", "importance",
          "confidence", "decayRate", "sensitive", "private", "context"]
any_text = st.text(st.characters(exclude_categories=()), max_size=20)
scalars = (st.none() | st.booleans() | st.integers() | any_text
           | st.floats(allow_nan=False, allow_infinity=False))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(any_text, inner, max_size=4), max_leaves=12)
plausible = st.fixed_dictionaries(
    {}, optional={
        "content": st.text(min_size=1, max_size=40) | json_values,
        "layer": st.sampled_from(["agent", "user", "session", "project", "team", "org",
                                  "company"]) | json_values,
        "identifiers": st.dictionaries(
            st.sampled_from(["agentId", "userId", "sessionId", "projectId", "teamId",
                             "orgId", "companyId"]) | any_text,
            st.text(min_size=1, max_size=10) | json_values, max_size=4) | json_values,
        "metadata": st.dictionaries(any_text, json_values, max_size=4) | json_values,
        **{name: json_values for name in FIELDS[4:]},
    })


@hypothesis_settings(max_examples=50, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=plausible | json_values | st.dictionaries(st.sampled_from(FIELDS), json_values))
def test_it_never_fails_on_random_bodies(tenant_a, payload: Any) -> None:
    response = send(tenant_a, "post", M, json.dumps(payload))  # \ud800 stays escaped
    assert response.status_code < 500, response.content
    if response.status_code == 201:
        assert body(response)["memory"]["content"] == payload["content"]
    else:
        assert_error(response, response.status_code)
