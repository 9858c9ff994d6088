"""The permission table (``tenants.permissions``) is complete, rendered in the README, and
enforced on every route for every persona: admin, writer, reviewer, reader, restricted key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tenants.permissions import PERMISSIONS, markdown_table
from tests.contract import (
    CALLS,
    PERSONAS,
    call,
    declared_operations,
    expected,
    refused,
)
from tests.cross_tenant_harness import API_PREFIXES, missing_tokens
from tests.helpers import body, new_key

README = Path(__file__).resolve().parents[2] / "README.md"
MISSING_TOKENS = missing_tokens()


def _api_routes() -> list[tuple[Any, dict[str, str]]]:
    """(view class, {method: action}) of every route under /api/v1/."""
    found: list[tuple[Any, dict[str, str]]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and (prefix + str(pattern.pattern)).startswith(
                    API_PREFIXES):
                callback = pattern.callback
                cls = callback.cls
                actions = getattr(callback, "actions", None) or {
                    m: m for m in ("get", "post", "patch", "put", "delete") if hasattr(cls, m)}
                found.append((cls, actions))

    walk(get_resolver().url_patterns, "")
    return found


def test_it_names_every_api_route_in_the_table() -> None:
    named: set[str] = set()
    for cls, actions in _api_routes():
        names = getattr(cls, "operation_name", {})
        for action in actions.values():
            assert action in names, f"{cls.__name__}.{action} has no operation name"
            named.add(names[action])
    escalated = {"memory.delete_hard", "memory.bulk_delete_hard"}  # chosen by operation_for
    assert named | escalated == set(PERMISSIONS)
    assert set(CALLS) == set(PERMISSIONS)


def test_it_renders_the_table_in_the_readme() -> None:
    assert markdown_table() in README.read_text()


def test_every_operation_is_declared_by_exactly_one_endpoint_contract() -> None:
    declared = declared_operations()
    assert set(declared) == set(PERMISSIONS), set(PERMISSIONS) ^ set(declared)
    assert all(len(where) == 1 for where in declared.values()), {
        op: where for op, where in declared.items() if len(where) > 1}


@pytest.mark.parametrize("persona", sorted(PERSONAS))
def test_it_enforces_the_whole_matrix(tenant_a, persona: str) -> None:
    _, client = new_key(tenant_a, **PERSONAS[persona])
    wrong = []
    for operation in CALLS:
        response = call(client, operation, MISSING_TOKENS)
        assert response.status_code != 500, (operation, response.content[:300])
        if refused(response, operation) == expected(persona, operation):
            wrong.append((operation, response.status_code, response.content[:200]))
    assert not wrong, wrong


def test_a_reader_key_changes_nothing(tenant_a) -> None:
    memory = tenant_a.add("Alice likes tea.", identifiers={"userId": "u1"})
    _, reader = new_key(tenant_a, roles=["reader"])
    url = f"/api/v1/memories/{memory.pk}"
    for response in (
        reader.post("/api/v1/memories", {"content": "x", "layer": "user",
                                         "identifiers": {"userId": "u1"}}, format="json"),
        reader.patch(url, {"content": "changed"}, format="json"),
        reader.delete(url + "?hard=true"),
        reader.delete(url),
        reader.post("/api/v1/memories/bulk-delete", {"ids": [str(memory.pk)], "hard": True},
                    format="json"),
        reader.post("/api/v1/memories/feedback", {"memoryIds": [str(memory.pk)],
                                                  "reward": -1}, format="json"),
        reader.post("/api/v1/orgs", {"orgId": "o1"}, format="json"),
    ):
        assert response.status_code == 403, response.content
    got = reader.get(url)
    assert got.status_code == 200 and body(got)["memory"]["content"] == "Alice likes tea."
    assert body(got)["memory"]["state"] == "active"


def test_a_writer_key_writes_but_cannot_erase(tenant_a) -> None:
    _, writer = new_key(tenant_a, roles=["writer"])
    created = writer.post("/api/v1/memories", {"content": "Bob likes coffee.", "layer": "user",
                                               "identifiers": {"userId": "u1"}}, format="json")
    assert created.status_code == 201
    url = f"/api/v1/memories/{body(created)['memory']['id']}"
    assert writer.delete(url + "?hard=true").status_code == 403
    assert writer.delete(url).status_code == 200
    assert writer.post(url + "/restore").status_code == 200


def test_a_restricted_key_cannot_close_another_users_session(tenant_a) -> None:
    tenant_a.add("Session note of u2.", layer="session",
                 identifiers={"userId": "u2", "sessionId": "s2"}, importance=0.9)
    _, restricted = new_key(tenant_a, pinned_identifiers={"userId": "u1"})
    response = restricted.post("/api/v1/sessions/s2/close",
                               {"identifiers": {"userId": "u2"}}, format="json")
    assert response.status_code == 403
    assert "promoted" not in response.content.decode()
    # Leaving the userId out fills in the pinned u1, whose session s2 does not exist.
    assert restricted.post("/api/v1/sessions/s2/close", {}, format="json").status_code == 404


def test_it_refuses_a_key_with_an_unknown_role(tenant_a) -> None:
    from memory_project.errors import InvalidInput
    from tenants import services
    from tenants.context import tenant_scope

    with tenant_scope(tenant_a.ctx), pytest.raises(InvalidInput):
        services.api_key_create(tenant_a.ctx, name="x", roles=["superuser"])
