"""The tenant API contract every endpoint module declares.

A module that serves API operations subclasses :class:`TenantApiContract` and names them in
``operations`` (the names of ``tenants.permissions.PERMISSIONS``). The contract then checks,
for each of them:

- every persona (admin, writer, reviewer, reader, a restricted key) is refused exactly when
  the permission table says so, with 403 ``UNAUTHORIZED`` naming the operation, and nothing
  answers 5xx;
- every error answer is the one envelope;
- another tenant's objects answer exactly like missing ones: the same status and body once
  the other tenant's ids are mapped to the missing ones.

``tests/tenants/test_permissions.py`` checks that every operation of the table is declared by
exactly one contract. The generated route × method matrix (``test_cross_tenant_matrix``) and
the hand-written cases (``test_cross_tenant``) stay as they are.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tenants.permissions import PERMISSIONS, ROLE_GRANTS, Role
from tests.cross_tenant_harness import missing_tokens, normalised, populate_b, streamed
from tests.helpers import ENVELOPE_KEYS, body, new_key

Tokens = dict[str, str]

#: How to call each operation: (method, url template, JSON body). ``{memory}``, ``{policy}``,
#: ``{review}``, ``{org}``, ``{team}``, ``{project}`` and ``{session}`` name objects: missing
#: ones (:func:`tests.cross_tenant_harness.missing_tokens`) or another tenant's
#: (:func:`tests.cross_tenant_harness.populate_b`). An allowed call gets past the permission
#: check and then answers 404/400/200 — anything but the refusal.
CALLS: dict[str, tuple[str, str, Any]] = {
    "memory.add": ("post", "/api/v1/memories", {}),
    "memory.bulk_add": ("post", "/api/v1/memories/bulk", {}),
    "memory.get": ("get", "/api/v1/memories/{memory}", None),
    "memory.batch_get": ("post", "/api/v1/memories/batch-get", {"ids": ["{memory}"]}),
    "memory.update": ("patch", "/api/v1/memories/{memory}", {}),
    "memory.delete": ("delete", "/api/v1/memories/{memory}", None),
    "memory.delete_hard": ("delete", "/api/v1/memories/{memory}?hard=true", None),
    "memory.bulk_delete": ("post", "/api/v1/memories/bulk-delete", {"ids": ["{memory}"]}),
    "memory.bulk_delete_hard": ("post", "/api/v1/memories/bulk-delete",
                                {"ids": ["{memory}"], "hard": True}),
    "memory.list": ("get", "/api/v1/memories?layer=user&userId=u1", None),
    "memory.search": ("post", "/api/v1/memories/search", {}),
    "memory.recall": ("post", "/api/v1/memories/recall", {}),
    "memory.restore": ("post", "/api/v1/memories/{memory}/restore", {}),
    "memory.history": ("get", "/api/v1/memories/{memory}/history", None),
    "memory.feedback": ("post", "/api/v1/memories/feedback", {}),
    "memory.erase": ("delete", "/api/v1/memories?userId=nobody", None),
    "memory.export": ("get", "/api/v1/export", None),
    "session.close": ("post", "/api/v1/sessions/{session}/close",
                      {"identifiers": {"userId": "u1"}}),
    "capabilities.get": ("get", "/api/v1/capabilities", None),
    "settings.get": ("get", "/api/v1/settings", None),
    "settings.update": ("patch", "/api/v1/settings", {}),
    "policy.list": ("get", "/api/v1/policies", None),
    "policy.get": ("get", "/api/v1/policies/{policy}", None),
    "policy.create": ("post", "/api/v1/policies", {}),
    "policy.update": ("patch", "/api/v1/policies/{policy}", {}),
    "policy.delete": ("delete", "/api/v1/policies/{policy}", None),
    "policy.try": ("post", "/api/v1/policies/try", {}),
    "review.list": ("get", "/api/v1/reviews", None),
    "review.get": ("get", "/api/v1/reviews/{review}", None),
    "review.approve": ("post", "/api/v1/reviews/{review}/approve", {}),
    "review.reject": ("post", "/api/v1/reviews/{review}/reject", {}),
    "audit.list": ("get", "/api/v1/audit", None),
    "llm.usage": ("get", "/api/v1/llm/usage", None),
    "agent_memory.list": ("get", "/api/agents/{agent}/memories?projectId={project}", None),
    "agent_memory.add": ("post", "/api/agents/{agent}/memories", {"projectId": "{project}"}),
    "agent_memory.delete": ("delete", "/api/agents/{agent}/memories/{agent_memory}", None),
    "agent_memory.clear": ("delete", "/api/agents/{agent}/memories?projectId={project}", None),
    "agent_memory.extract": ("post", "/api/agents/{agent}/extract", {"projectId": "{project}"}),
    "conversation.ingest": ("post", "/api/v1/conversations",
                            {"layer": "project", "identifiers": {"projectId": "{project}"}}),
    # Graph nodes are entities and memories: ``{memory}`` names a memory node (and no entity).
    "graph.entity_search": ("get", "/api/v1/graph/entities?q=Globex", None),
    "graph.entity_get": ("get", "/api/v1/graph/entities/{memory}", None),
    "graph.entity_memories": ("get", "/api/v1/graph/entities/{memory}/memories", None),
    "graph.memory_entities": ("get", "/api/v1/graph/memories/{memory}/entities", None),
    "graph.neighbours": ("get", "/api/v1/graph/nodes/{memory}/neighbours", None),
    "graph.path": ("get", "/api/v1/graph/path?from={memory}&to={memory}", None),
    "graph.restore": ("post", "/api/v1/graph/restore", {}),
    "summary.list": ("get", "/api/v1/summaries?projectId={project}&userId=u1", None),
    "summary.get": ("get", "/api/v1/summaries/team?teamId={team}", None),
    "summary.regenerate": ("post", "/api/v1/summaries/regenerate", {}),
    "context.assemble": ("post", "/api/v1/context",
                         {"identifiers": {"projectId": "{project}", "userId": "u1"}}),
    **{f"{level}.{op}": call for level, path in (("org", "orgs"), ("team", "teams"),
                                                  ("project", "projects"))
       for op, call in {
           "list": ("get", f"/api/v1/{path}", None),
           "get": ("get", f"/api/v1/{path}/{{{level}}}", None),
           "create": ("post", f"/api/v1/{path}", {}),
           "delete": ("delete", f"/api/v1/{path}/{{{level}}}", None),
       }.items()},
}

#: The personas every operation is called as: ``new_key`` options.
PERSONAS: dict[str, dict[str, Any]] = {
    "admin": {"roles": ["admin"]},
    "writer": {"roles": ["writer"]},
    "reviewer": {"roles": ["reviewer"]},
    "reader": {"roles": ["reader"]},
    "restricted": {"roles": ["admin"], "allowed_layers": ["user", "session"],
                   "pinned_identifiers": {"userId": "u1"}},
}


def expected(persona: str, operation: str) -> bool:
    """What the table says ``persona`` may do (written out, not computed by the code under
    test: the restricted persona holds the admin role)."""
    rule = PERMISSIONS[operation][2]
    role = Role("admin" if persona == "restricted" else persona)
    return rule.access in ROLE_GRANTS[role] and (persona != "restricted" or rule.restricted)


def refused(response: Any, operation: str) -> bool:
    """The permission check's own refusal: 403 ``UNAUTHORIZED`` naming the operation."""
    if response.status_code != 403:
        return False
    error = body(response)["error"]
    return error["code"] == "UNAUTHORIZED" and error["details"].get("operation") == operation


def _fill(value: Any, tokens: Tokens) -> Any:
    if isinstance(value, str):
        return value.format(**tokens)
    if isinstance(value, list):
        return [_fill(v, tokens) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, tokens) for k, v in value.items()}
    return value


def call(client: Any, operation: str, tokens: Tokens) -> Any:
    """Send ``operation`` (:data:`CALLS`) with ``tokens`` filled in; the response, read to
    its end when streamed."""
    method, url, payload = CALLS[operation]
    send = getattr(client, method)
    url = url.format(**tokens)
    response = (send(url, _fill(payload, tokens), format="json") if payload is not None
                else send(url))
    return streamed(response)


def is_envelope(response: Any) -> bool:
    """``response`` is the one error envelope."""
    if not response["Content-Type"].startswith("application/json"):
        return False
    data = body(response)
    return set(data) == {"error"} and set(data["error"]) == ENVELOPE_KEYS


class TenantApiContract:
    """Declare ``operations`` in a subclass named ``Test...`` to run the contract on them."""

    operations: ClassVar[tuple[str, ...]] = ()

    @pytest.mark.parametrize("persona", sorted(PERSONAS))
    def test_each_persona_gets_what_the_permission_table_says(self, tenant_a, persona: str
                                                              ) -> None:
        _, client = new_key(tenant_a, **PERSONAS[persona])
        tokens = missing_tokens()
        wrong = []
        for operation in self.operations:
            response = call(client, operation, tokens)
            assert response.status_code < 500, (operation, response.content[:300])
            if refused(response, operation) != (not expected(persona, operation)):
                wrong.append((operation, response.status_code, response.content[:200]))
        assert not wrong, wrong

    def test_every_error_is_the_envelope(self, tenant_a) -> None:
        tokens = missing_tokens()
        for operation in self.operations:
            response = call(tenant_a.client, operation, tokens)
            if response.status_code >= 400:
                assert is_envelope(response), (operation, response.content[:300])

    def test_another_tenants_objects_answer_like_missing_ones(self, tenant_a, tenant_b
                                                              ) -> None:
        foreign = populate_b(tenant_b)
        missing = missing_tokens()
        replace = {foreign[k]: missing[k] for k in foreign if k in missing}
        for operation in self.operations:
            as_missing = call(tenant_a.client, operation, missing)
            as_foreign = call(tenant_a.client, operation, foreign)
            assert as_foreign.status_code == as_missing.status_code, operation
            assert normalised(as_foreign, replace) == normalised(as_missing, {}), operation


def declared_operations() -> dict[str, list[str]]:
    """``{operation: [contract classes declaring it]}`` over every test module."""
    root = Path(__file__).resolve().parent
    for info in pkgutil.walk_packages([str(root)], prefix="tests."):
        if info.name.rsplit(".", 1)[-1].startswith("test_"):
            importlib.import_module(info.name)
    found: dict[str, list[str]] = {}

    def walk(cls: type) -> None:
        for sub in cls.__subclasses__():
            for operation in sub.__dict__.get("operations", ()):
                found.setdefault(operation, []).append(f"{sub.__module__}.{sub.__name__}")
            walk(sub)

    walk(TenantApiContract)
    return found
