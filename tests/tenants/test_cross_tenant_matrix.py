"""The cross-tenant matrix: every API route (/api/v1/, /api/agents/) × every HTTP method,
built from the URL configuration itself, so that a new route is in it without anyone adding it.

For each route, tenant B gets data (``populate_b``); then, for every method, tenant A sends
the same request twice: once naming objects that exist nowhere, once naming B's objects
(path parameters, body fields and query identifiers). The two answers must be the same
(status, JSON body once B's ids are mapped to the missing ones, and the headers that could
tell them apart), never a 5xx, without B's secret text, and B's rows must be unchanged.
A route with a path parameter the matrix has no token for fails
``test_it_has_a_token_for_every_path_parameter``. The hand-written, operation-specific cases
are in ``test_cross_tenant``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from tenants.models import Tenant
from tests.cross_tenant_harness import (
    SECRET,
    Tokens,
    api_patterns,
    missing_tokens,
    populate_a,
    populate_b,
    streamed,
)
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db

METHODS = ("get", "head", "options", "post", "put", "patch", "delete")
#: (route-name prefix, path parameter) → the token that fills it.
PATH_TOKENS = {
    ("memory", "pk"): "memory", ("policy", "pk"): "policy", ("review", "pk"): "review",
    ("org", "external_id"): "org", ("team", "external_id"): "team",
    ("project", "external_id"): "project", ("session", "session_id"): "session",
    ("agent", "agent_name"): "agent", ("agent", "pk"): "agent_memory",
    # Graph nodes are entities and memories; B's memory ids name its memory nodes.
    ("graph", "entity_id"): "memory", ("graph", "memory_id"): "memory",
    ("graph", "node_id"): "memory",
    # A layer name is no tenant's object; the matrix's query (layer=…) is refused first.
    ("summary", "layer"): "team",
}
#: Fields that differ between two otherwise equal answers (fresh ids and times).
VOLATILE = {"id", "createdAt", "updatedAt", "lastConfirmedAt", "created_at", "updated_at",
            "decided_at", "target_id", "nextCursor", "next", "previous"}
ROUTES = api_patterns()


def url_for(route: str, t: Tokens) -> str:
    prefix = route.split("-")[0]
    kwargs = {name: t[PATH_TOKENS[(prefix, name)]] for name in ROUTES[route]}
    query = {"layer": "team", "projectId": t["project"], "userId": "u1"}
    return f"{reverse(route, kwargs=kwargs)}?{urlencode(query)}"


def body_for(t: Tokens) -> dict[str, Any]:
    """One body that names B's objects in every field some route reads."""
    return {
        "ids": [t["memory"]], "memoryIds": [t["memory"]], "reward": 1, "hard": True,
        "content": "matrix probe", "layer": "team", "query": SECRET, "topic": SECRET,
        "identifiers": {"projectId": t["project"]}, "threshold": 0, "limit": 50,
        "orgId": t["org"], "teamId": t["team"], "projectId": t["project"],
        "name": t["policy_name"], "reason": "matrix", "text": "a matrix sample text",
        "policy": {"denied_terms": ["falcon-secret"]}, "search": {"defaultThreshold": 0.5},
    }


def send(a: Any, method: str, route: str, t: Tokens) -> Any:
    data = body_for(t) if method in ("post", "put", "patch", "delete") else None
    return streamed(getattr(a.client, method)(url_for(route, t), data, format="json"))


def comparable(response: Any, replace: Tokens) -> Any:
    text = response.content.decode()
    for foreign, missing in replace.items():
        text = text.replace(foreign, missing)
    try:
        data = json.loads(text) if text else None
    except ValueError:  # ndjson export: one object per line
        data = [json.loads(line) for line in text.splitlines()]

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(data)


def test_it_has_a_token_for_every_path_parameter() -> None:
    unknown = sorted((route, name) for route, names in ROUTES.items() for name in names
                     if (route.split("-")[0], name) not in PATH_TOKENS)
    assert not unknown, f"add a token for these path parameters: {unknown}"
    assert len(ROUTES) >= 20 and "memory-detail" in ROUTES and "session-close" in ROUTES


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_method_answers_foreign_like_missing(tenant_a, tenant_b, route) -> None:
    populate_a(tenant_a)
    tokens = populate_b(tenant_b)
    before_b = snapshot(tenant_b)
    settings_b = Tenant.objects.get(pk=tenant_b.tenant.pk).settings
    missing = missing_tokens()
    replace = {tokens[k]: missing[k] for k in tokens}
    statuses = {}
    for method in METHODS:
        answer_missing = send(tenant_a, method, route, missing)
        answer_foreign = send(tenant_a, method, route, tokens)
        where = f"{method.upper()} {route}"
        assert answer_foreign.status_code == answer_missing.status_code, (
            where, answer_foreign.content[:300], answer_missing.content[:300])
        assert answer_foreign.status_code < 500, (where, answer_foreign.content[:300])
        assert comparable(answer_foreign, replace) == comparable(answer_missing, {}), where
        for header in ("Allow", "Content-Type", "ETag", "WWW-Authenticate", "Retry-After"):
            assert answer_foreign.get(header) == answer_missing.get(header), (where, header)
        assert SECRET not in answer_foreign.content.decode(), where
        statuses[method] = answer_foreign.status_code
    assert snapshot(tenant_b) == before_b
    assert Tenant.objects.get(pk=tenant_b.tenant.pk).settings == settings_b
    # Not vacuous: each route serves at least one method, and refuses unknown ones alike.
    assert any(status != 405 for status in statuses.values()), statuses
