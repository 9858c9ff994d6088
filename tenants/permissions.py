"""Who may call what: the one permission table of the API (README "Roles and permissions").

Every API operation (the ``operation`` of the error envelope, e.g. ``memory.add``) needs one
:class:`Access` level; a key's roles grant levels (:data:`ROLE_GRANTS`); a restricted key (one
layer, one user: ``TenantContext.is_restricted``) may call only operations marked
``restricted=True``, and those narrow their rows to the key's restriction themselves
(``memories.restrictions``). :class:`OperationPermission`, the API's only DRF permission
class, enforces the table before any view code runs; an operation missing from the table is refused
(fail-closed), and a test walks every route so none can be missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from memory_project.errors import Unauthorized
from tenants.context import TenantContext


class Role(StrEnum):
    """Roles an API key (or a console membership) can hold."""

    ADMIN = "admin"
    WRITER = "writer"
    REVIEWER = "reviewer"
    READER = "reader"


class Access(StrEnum):
    """What an operation does, from the least to the most trusted."""

    READ = "read"        # get, list, search, recall, history
    WRITE = "write"      # add, update, soft delete, restore, feedback, close a session
    REVIEW = "review"    # the review queue and the policies reviewers judge by
    MANAGE = "manage"    # irreversible erasure, export, settings, policies, hierarchy, audit


#: The access levels each role grants; a key with several roles has their union.
ROLE_GRANTS: dict[Role, frozenset[Access]] = {
    Role.ADMIN: frozenset(Access),
    Role.WRITER: frozenset({Access.READ, Access.WRITE}),
    Role.REVIEWER: frozenset({Access.READ, Access.REVIEW}),
    Role.READER: frozenset({Access.READ}),
}


@dataclass(frozen=True)
class Rule:
    """What one operation needs: an access level, and whether a restricted key may call it."""

    access: Access
    restricted: bool


_R, _W, _V, _M = Access.READ, Access.WRITE, Access.REVIEW, Access.MANAGE

#: operation → (method, path, access, may a restricted key call it). The method and path are
#: for the README's table only; enforcement goes by operation name.
PERMISSIONS: dict[str, tuple[str, str, Rule]] = {
    "memory.add": ("POST", "/memories", Rule(_W, True)),
    "memory.bulk_add": ("POST", "/memories/bulk", Rule(_W, True)),
    "memory.get": ("GET", "/memories/{id}", Rule(_R, True)),
    "memory.batch_get": ("POST", "/memories/batch-get", Rule(_R, True)),
    "memory.update": ("PATCH", "/memories/{id}", Rule(_W, True)),
    "memory.delete": ("DELETE", "/memories/{id}", Rule(_W, True)),
    "memory.delete_hard": ("DELETE", "/memories/{id}?hard=true", Rule(_M, False)),
    "memory.bulk_delete": ("POST", "/memories/bulk-delete", Rule(_W, True)),
    "memory.bulk_delete_hard": ("POST", "/memories/bulk-delete {\"hard\": true}",
                                Rule(_M, False)),
    "memory.list": ("GET", "/memories", Rule(_R, True)),
    "memory.search": ("POST", "/memories/search", Rule(_R, True)),
    "memory.recall": ("POST", "/memories/recall", Rule(_R, True)),
    "memory.restore": ("POST", "/memories/{id}/restore", Rule(_W, True)),
    "memory.history": ("GET", "/memories/{id}/history", Rule(_R, True)),
    "memory.feedback": ("POST", "/memories/feedback", Rule(_W, True)),
    "memory.erase": ("DELETE", "/memories?userId=…", Rule(_M, False)),
    "memory.export": ("GET", "/export", Rule(_M, False)),
    "session.close": ("POST", "/sessions/{id}/close", Rule(_W, True)),
    "capabilities.get": ("GET", "/capabilities", Rule(_R, True)),
    "settings.get": ("GET", "/settings", Rule(_R, True)),
    "settings.update": ("PATCH", "/settings", Rule(_M, False)),
    "policy.list": ("GET", "/policies", Rule(_V, False)),
    "policy.get": ("GET", "/policies/{id}", Rule(_V, False)),
    "policy.create": ("POST", "/policies", Rule(_M, False)),
    "policy.update": ("PATCH", "/policies/{id}", Rule(_M, False)),
    "policy.delete": ("DELETE", "/policies/{id}", Rule(_M, False)),
    "policy.try": ("POST", "/policies/try", Rule(_M, False)),
    "review.list": ("GET", "/reviews", Rule(_V, False)),
    "review.get": ("GET", "/reviews/{id}", Rule(_V, False)),
    "review.approve": ("POST", "/reviews/{id}/approve", Rule(_V, False)),
    "review.reject": ("POST", "/reviews/{id}/reject", Rule(_V, False)),
    "audit.list": ("GET", "/audit", Rule(_M, False)),
    "llm.usage": ("GET", "/llm/usage", Rule(_M, False)),
    "agent_memory.list": ("GET", "/api/agents/{name}/memories?projectId=…", Rule(_R, True)),
    "agent_memory.add": ("POST", "/api/agents/{name}/memories", Rule(_W, True)),
    "agent_memory.delete": ("DELETE", "/api/agents/{name}/memories/{id}", Rule(_W, True)),
    "agent_memory.clear": ("DELETE", "/api/agents/{name}/memories?projectId=…",
                           Rule(_W, True)),
    "agent_memory.extract": ("POST", "/api/agents/{name}/extract", Rule(_W, True)),
    "conversation.ingest": ("POST", "/conversations", Rule(_W, True)),
    # Entities, their aliases and relations come from every memory of the tenant, not only
    # from those a restricted key may read: the graph is closed to restricted keys.
    "graph.entity_search": ("GET", "/graph/entities?q=…", Rule(_R, False)),
    "graph.entity_get": ("GET", "/graph/entities/{id}", Rule(_R, False)),
    "graph.entity_memories": ("GET", "/graph/entities/{id}/memories", Rule(_R, False)),
    "graph.memory_entities": ("GET", "/graph/memories/{id}/entities", Rule(_R, False)),
    "graph.neighbours": ("GET", "/graph/nodes/{id}/neighbours", Rule(_R, False)),
    "graph.path": ("GET", "/graph/path?from=…&to=…", Rule(_R, False)),
    "graph.restore": ("POST", "/graph/restore", Rule(_M, False)),
    "summary.list": ("GET", "/summaries?userId=…&projectId=…", Rule(_R, True)),
    "summary.get": ("GET", "/summaries/{layer}?depth=…", Rule(_R, True)),
    "summary.regenerate": ("POST", "/summaries/regenerate", Rule(_W, False)),
    "context.assemble": ("POST", "/context", Rule(_R, True)),
    "org.list": ("GET", "/orgs", Rule(_R, True)),
    "org.get": ("GET", "/orgs/{id}", Rule(_R, True)),
    "org.create": ("POST", "/orgs", Rule(_M, False)),
    "org.delete": ("DELETE", "/orgs/{id}", Rule(_M, False)),
    "team.list": ("GET", "/teams", Rule(_R, True)),
    "team.get": ("GET", "/teams/{id}", Rule(_R, True)),
    "team.create": ("POST", "/teams", Rule(_M, False)),
    "team.delete": ("DELETE", "/teams/{id}", Rule(_M, False)),
    "project.list": ("GET", "/projects", Rule(_R, True)),
    "project.get": ("GET", "/projects/{id}", Rule(_R, True)),
    "project.create": ("POST", "/projects", Rule(_M, False)),
    "project.delete": ("DELETE", "/projects/{id}", Rule(_M, False)),
}


def rule_for(operation: str) -> Rule | None:
    """The rule of ``operation``, or ``None`` when the table does not name it."""
    entry = PERMISSIONS.get(operation)
    return entry[2] if entry else None


def granted(ctx: TenantContext) -> frozenset[Access]:
    """Every access level ``ctx``'s roles grant (unknown role names grant nothing)."""
    levels: set[Access] = set()
    for name in ctx.roles:
        try:
            levels |= ROLE_GRANTS[Role(name)]
        except ValueError:
            continue
    return frozenset(levels)


def roles_for(access: Access) -> list[str]:
    """The roles that grant ``access``, most trusted first."""
    return [role.value for role, levels in ROLE_GRANTS.items() if access in levels]


def check(ctx: TenantContext, operation: str) -> None:
    """Refuse ``operation`` unless the table lets ``ctx`` call it.

    Raises:
        Unauthorized: 403 ``UNAUTHORIZED``; ``details`` name the operation and the roles that
            may call it, or say that a restricted key may not.
    """
    rule = rule_for(operation)
    if rule is None:
        raise Unauthorized("This operation is not open to API keys.",
                           details={"operation": operation})
    if rule.access not in granted(ctx):
        needed = roles_for(rule.access)
        raise Unauthorized(
            f"This needs an API key with the {' or '.join(needed)} role.",
            details={"operation": operation, "requiredRoles": needed})
    if ctx.is_restricted and not rule.restricted:
        raise Unauthorized("A restricted API key (limited to layers or identifiers) may not "
                           "call this operation.", details={"operation": operation})


def view_operation(view: Any, request: Request) -> str | None:
    """The operation a DRF view is about to run: the view's ``operation_for(request)`` when it
    has one (operations whose needs depend on the request, like a hard delete), else its
    ``operation_name`` entry for the action (viewsets) or the method (plain views).

    ``None`` when the view does not serve the request's method at all (it answers 405).
    """
    method = str(request.method or "").lower()
    if hasattr(view, "action_map"):
        action = view.action_map.get(method)
    else:
        method = "get" if method == "head" else method
        action = method if method in view.http_method_names and hasattr(view, method) else None
    if action is None:
        return None
    decide = getattr(view, "operation_for", None)
    if callable(decide):
        chosen = decide(request)
        if chosen:
            return str(chosen)
    names = getattr(view, "operation_name", None) or {}
    return str(names.get(action, f"{type(view).__name__}.{action}"))


class OperationPermission(BasePermission):
    """The API's permission class: looks the view's operation up in :data:`PERMISSIONS`.

    Unauthenticated requests are left to authentication (401/403 ``MISSING_TENANT_CONTEXT``
    comes from there); views that set ``permission_classes = []`` (health, schema) are open.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        ctx = request.auth
        if not isinstance(ctx, TenantContext):
            return False
        operation = view_operation(view, request)
        if operation is not None:
            check(ctx, operation)
        return True


def markdown_table() -> str:
    """The permission table as the README shows it (``tests`` hold the two equal)."""
    header = "| operation | method and path | admin | writer | reviewer | reader | restricted key |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    for operation, (method, path, rule) in PERMISSIONS.items():
        cells = ["yes" if rule.access in ROLE_GRANTS[role] else "–" for role in Role]
        restricted = "yes (own rows)" if rule.restricted else "–"
        lines.append(f"| `{operation}` | `{method} {path}` | {' | '.join(cells)} | {restricted} |")
    return "\n".join(lines)
