"""Schemathesis against the served OpenAPI document (``/api/schema/``), every default check.

Every operation gets ``FUZZ_EXAMPLES`` generated examples per generation phase (default 6;
``make fuzz`` raises it), called in-process through the WSGI application with tenant A's
admin API key. Any failed check (a 5xx, a response that breaks the schema, a status or
content type the schema does not declare, a rejected valid or accepted invalid input, ...)
fails the test; ``CROSS_FIELD_RULES`` lists the operations where a schema-valid request may
still get 400, and why. An invalid request may also be refused with 413: a generated body
over ``MAX_REQUEST_BODY_BYTES`` is refused before its schema is read (``REJECTED``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import RequestFactory
from drf_spectacular.views import SpectacularAPIView
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from memory_project.errors import InvalidInput
from memory_project.validation import (
    ADDRESSABLE_ID_PATTERN,
    IDENTIFIER_PATTERN,
    STORABLE_TEXT_PATTERN,
    unstorable_text,
)
from memory_project.wsgi import application
from tenants.services import check_addressable

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "6"))
CASES_RUN: dict[str, int] = {}
_IDENTIFIERS = ("which identifiers a layer needs, that companyId is the caller's own "
                "tenant and that named projects/teams/orgs exist")
#: Operations whose acceptance depends on rules across fields or on stored data, which the
#: OpenAPI document cannot express: a schema-valid request may get 400 there, so the
#: ``positive_data_acceptance`` check is left out for them (every other check still runs).
CROSS_FIELD_RULES = {
    "GET /api/v1/summaries": _IDENTIFIERS,
    "GET /api/v1/summaries/{layer}": _IDENTIFIERS,
    "POST /api/v1/summaries/regenerate": _IDENTIFIERS,
    "POST /api/v1/context": _IDENTIFIERS,
    "GET /api/v1/memories": _IDENTIFIERS,
    "POST /api/v1/memories": _IDENTIFIERS + "; metadata tags/source shapes",
    "POST /api/v1/memories/bulk": _IDENTIFIERS + "; metadata tags/source shapes",
    "PATCH /api/v1/memories/{id}": "at least one field; metadata tags/source shapes",
    "DELETE /api/v1/memories": "at least one identifier",
    "POST /api/v1/memories/search": _IDENTIFIERS + "; the layers the identifiers reach",
    "POST /api/v1/memories/recall": _IDENTIFIERS + "; the layers the identifiers reach",
    "POST /api/v1/sessions/{session_id}/close": "the caller's userId is required",
    "POST /api/v1/policies": "the policy engine validates the policy document",
    "PATCH /api/v1/policies/{id}": "the policy engine validates the policy document",
    "POST /api/v1/policies/try": "the policy engine validates the policy document",
    "POST /api/v1/teams": "the parent org must exist",
    "POST /api/v1/projects": "the parent team must exist",
    "PATCH /api/v1/settings": "each section validates its own keys and ranges",
    "POST /api/v1/conversations": _IDENTIFIERS,
    "GET /api/v1/graph/path": "exactly one pair: from and to, or fromName and toName; a "
                              "name of nothing but punctuation or a determiner is refused",
}


def served_schema() -> dict[str, Any]:
    """``GET /api/schema/?format=json`` from the view itself: collection runs before any
    database exists, and only the request-transaction middleware would need one
    (``test_it_fuzzes_the_schema_the_service_serves`` checks the two agree)."""
    response = SpectacularAPIView.as_view()(RequestFactory().get("/api/schema/",
                                                                 {"format": "json"}))
    response.render()
    return json.loads(response.content)


SERVED = served_schema()


@pytest.fixture()
def keep_test_connection() -> Any:
    """The WSGI handler closes "old" connections around every request, which would close
    the test's transaction; Django's own test client does the same as this."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(autouse=True)
def _bad_keys_not_throttled(settings: Any) -> None:
    """Schemathesis's authentication checks send invalid keys with every case; from one
    address, more than ``RATE_LIMIT_INVALID_KEY_REQUESTS`` (30) a minute get 429, which
    those checks do not expect. Throttling has tests of its own (tests/tenants)."""
    settings.RATE_LIMIT_INVALID_KEY_REQUESTS = 1_000_000


@pytest.fixture(scope="module")
def cases_report(request: pytest.FixtureRequest) -> Any:
    """Counts the generated cases per operation; prints the total once, at the end."""
    yield CASES_RUN
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\nschemathesis: {sum(CASES_RUN.values())} cases over {len(CASES_RUN)} "
              f"operations ({EXAMPLES} examples per operation and phase)")


#: Statuses that count as refusing an invalid request: schemathesis' own, and 413 for a body
#: over the size limit, which the service refuses before reading it.
REJECTED = [*SchemathesisConfig.from_dict({}).projects.default.checks
            .negative_data_rejection.expected_statuses, "413"]
schema = schemathesis.openapi.from_dict(SERVED, config=SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": REJECTED}}}))
schema.app = application
schema.location = "/api/schema/"


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_it_survives_generated_requests(case: Any, tenant_a: Any, cases_report: Any,
                                        keep_test_connection: Any) -> None:
    key = case.operation.label
    cases_report[key] = cases_report.get(key, 0) + 1
    excluded = [positive_data_acceptance] if key in CROSS_FIELD_RULES else []
    case.call_and_validate(headers={"Authorization": f"Bearer {tenant_a.key}"},
                           excluded_checks=excluded)


def test_it_fuzzes_the_schema_the_service_serves(client: Any) -> None:
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert json.loads(response.content) == SERVED
    assert len(SERVED["paths"]) >= 15


def _patterns(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        return own + [p for value in node.values() for p in _patterns(value)]
    if isinstance(node, list):
        return [p for value in node for p in _patterns(value)]
    return []


def test_every_pattern_is_one_the_schema_validators_read() -> None:
    """A pattern the Rust validator refuses is dropped without a word: schemathesis then
    generates "valid" data that breaks the rule (NUL in identifiers did, once)."""
    import jsonschema_rs

    patterns = set(_patterns(SERVED))
    assert {STORABLE_TEXT_PATTERN, IDENTIFIER_PATTERN, ADDRESSABLE_ID_PATTERN} <= patterns
    for pattern in patterns:
        jsonschema_rs.validator_for({"type": "string", "pattern": pattern})  # raises if refused
        re.compile(pattern)


def _disagreements(pattern: str, accepted: Callable[[str], bool]) -> list[str]:
    """Every character alone, padded by letters and by spaces, that ``pattern`` and the
    service's rule ``accepted`` judge differently."""
    import jsonschema_rs

    validator = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    return [text for code in [*range(0xD800), *range(0xE000, 0x10000), 0x1F600]
            for text in (chr(code), f"a{chr(code)}b", f" {chr(code)} ")
            if validator.is_valid(text) != accepted(text)]


def test_the_identifier_pattern_is_the_rule_the_service_applies() -> None:
    """The pattern accepts exactly what ``tenants.layers`` accepts (not blank by
    ``str.strip``, nothing ``unstorable_text``)."""
    disagreements = _disagreements(
        IDENTIFIER_PATTERN, lambda text: bool(text.strip()) and unstorable_text(text) is None)
    assert not disagreements, [hex(ord(c)) for text in disagreements[:10] for c in text]


def _addressable(text: str) -> bool:
    try:
        check_addressable(text, "orgId", operation="org.create")
    except InvalidInput:
        return False
    return unstorable_text(text) is None


def test_the_addressable_id_pattern_is_the_rule_the_service_applies() -> None:
    """The same for the ids that name an org, team or project in its URL: no "/" either (a
    generated ``orgId`` ending in "/" was accepted by the schema and refused with 400)."""
    disagreements = _disagreements(ADDRESSABLE_ID_PATTERN, _addressable)
    assert not disagreements, [hex(ord(c)) for text in disagreements[:10] for c in text]
    assert re.search(ADDRESSABLE_ID_PATTERN, "eng")
    assert not re.search(ADDRESSABLE_ID_PATTERN, "eng/")


def test_an_empty_cursor_is_the_first_page(tenant_a: Any) -> None:
    tenant_a.add("listed")
    first = tenant_a.client.get("/api/v1/memories", {"layer": "user", "userId": "u1",
                                                     "cursor": ""})
    assert first.status_code == 200
    assert [m["content"] for m in first.json()["memories"]] == ["listed"]
