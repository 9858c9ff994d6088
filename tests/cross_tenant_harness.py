"""The cross-tenant harness shared by ``test_cross_tenant`` (hand-written cases) and
``test_cross_tenant_matrix`` (every route × every method, built from the URL configuration).

Tenant A makes the requests; tenant B owns the objects whose ids and identifiers A uses
(``populate_b`` returns them as tokens). ``MISSING_TOKENS`` name objects that exist nowhere.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from django.urls import URLPattern, URLResolver, get_resolver
from uuid6 import uuid7

from tenants import services as tenant_services
from tenants.context import tenant_scope
from tests import cross_tenant_governance as governance_cases

Tokens = dict[str, str]
SECRET = "Globex launches project Falcon in May"
#: Where the API is served: seed 001's under /api/v1/, seed 003's agent memories under
#: /api/agents/.
API_PREFIXES = ("api/v1/", "api/agents/")


def missing_tokens() -> Tokens:
    """Tokens of objects that exist in no tenant."""
    return {"memory": str(uuid7()), "org": "org-nobody", "team": "team-nobody",
            "project": "proj-nobody", "company": "company-nobody", "agent": "agent-nobody",
            "agent_memory": str(uuid7()), **governance_cases.MISSING}


def streamed(response: Any) -> Any:
    """A streaming response read to the end, as a plain response the harness can compare."""
    if not getattr(response, "streaming", False):
        return response
    plain = HttpResponse(b"".join(response.streaming_content), status=response.status_code,
                         content_type=response["Content-Type"])
    return plain


def populate_a(a: Any) -> None:
    with tenant_scope(a.ctx):
        tenant_services.org_create(a.ctx, external_id="org-of-a")
        tenant_services.team_create(a.ctx, external_id="team-of-a", org_id="org-of-a")
    a.add("Acme's own note", identifiers={"userId": "u2"})


def populate_b(b: Any) -> Tokens:
    with tenant_scope(b.ctx):
        tenant_services.org_create(b.ctx, external_id="org-of-b")
        tenant_services.team_create(b.ctx, external_id="team-of-b", org_id="org-of-b")
        tenant_services.project_create(b.ctx, external_id="proj-of-b", team_id="team-of-b")
    memory = b.add(SECRET, identifiers={"userId": "u1"})
    b.add(SECRET + " (team)", "team", identifiers={"projectId": "proj-of-b"})
    b.add(SECRET + " (org)", "org", identifiers={"orgId": "org-of-b"})
    b.add(SECRET + " (company)", "company", identifiers={})
    agent_memory = b.add(SECRET + " (agent)", "agent", identifiers={
        "agentId": "agent-of-b", "userId": "u1", "projectId": "proj-of-b"})
    with tenant_scope(b.ctx):
        tenant_services.tenant_settings_update(b.ctx, patch={"search": {"defaultThreshold": 0.1}})
    return {"memory": str(memory.pk), "org": "org-of-b", "team": "team-of-b",
            "project": "proj-of-b", "company": b.tenant.slug, "agent": "agent-of-b",
            "agent_memory": str(agent_memory.pk), **governance_cases.populate(b)}


def normalised(response: Any, replace: Tokens) -> Any:
    text = response.content.decode()
    for foreign, missing in replace.items():
        text = text.replace(foreign, missing)
    data = json.loads(text) if text else None

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("createdAt", "updatedAt", "lastConfirmedAt")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(data)


def _api_url_patterns() -> list[tuple[str, URLPattern]]:
    """``(full route, pattern)`` of every URL pattern of the API (:data:`API_PREFIXES`)."""
    found: list[tuple[str, URLPattern]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith(API_PREFIXES):
                found.append((route, pattern))

    walk(get_resolver().url_patterns, "")
    return found


def api_routes() -> set[tuple[str, str]]:
    """Every (route name, HTTP method) served under /api/v1/."""
    routes: set[tuple[str, str]] = set()
    for route, pattern in _api_url_patterns():
        view_class = getattr(pattern.callback, "view_class", None)
        actions = getattr(pattern.callback, "actions", None) or [
            m for m in ("get", "post", "put", "patch", "delete") if hasattr(view_class, m)
        ] or ["any"]
        # DRF serves HEAD with the GET action: covered by the GET cases
        routes.update((pattern.name or route, method) for method in actions if method != "head")
    return routes


def api_patterns() -> dict[str, list[str]]:
    """Every route name under /api/v1/ → the names of its path parameters."""
    return {pattern.name or route: sorted(pattern.pattern.regex.groupindex)
            for route, pattern in _api_url_patterns()}
