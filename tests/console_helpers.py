"""Helpers shared by the console tests (Django test client and browser): console users and
review items made the way the service makes them."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model

from console.services import console_member_set
from governance.models import Policy, ReviewItem
from governance.services import policy_create
from tenants.context import tenant_scope
from tenants.models import AuditEntry

PASSWORD = "console-test-pw-81"
MISSING = uuid.UUID("01a1fb8f-0000-7000-8000-000000000000")


#: Password hashing at production strength costs about a second per user on these machines.
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def console_user(tenant: Any, username: str, role: str) -> Any:
    """A Django user who is ``role`` (``admin`` | ``reviewer``) of ``tenant``."""
    user = get_user_model().objects.create_user(username, "", PASSWORD)
    with tenant_scope(tenant.ctx):
        console_member_set(tenant.ctx, user=user, role=role)
    return user


def platform_admin(username: str = "root") -> Any:
    """A superuser: the platform admin."""
    return get_user_model().objects.create_superuser(username, "", PASSWORD)


def policy(tenant: Any, name: str = "no codenames", **fields: Any) -> Policy:
    """A saved policy of ``tenant`` (default: denies the term ``bluebird``)."""
    with tenant_scope(tenant.ctx):
        return policy_create(tenant.ctx, data={"name": name,
                                               "denied_terms": ["bluebird"], **fields})


def policy_hit(tenant: Any, content: str = "Project bluebird ships in May") -> ReviewItem:
    """A policy hit waiting in ``tenant``'s queue: a write through the API that a policy
    refused (the policy is created when the tenant has none)."""
    with tenant_scope(tenant.ctx):
        has_policy = Policy.objects.exists()
    if not has_policy:
        policy(tenant)
    response = tenant.client.post("/api/v1/memories", {
        "content": content, "layer": "user", "identifiers": {"userId": "u1"}}, format="json")
    assert response.status_code == 422, response.content
    with tenant_scope(tenant.ctx):
        return ReviewItem.objects.order_by("-created_at").first()


def blocked_promotion(tenant: Any, content: str, session_id: str = "s1") -> ReviewItem:
    """A blocked promotion: a sensitive session memory, its session closed through the API."""
    memory = tenant.add(content, layer="session", identifiers={
        "userId": "u1", "sessionId": session_id}, importance=0.9, sensitive=True)
    response = tenant.client.post(f"/api/v1/sessions/{session_id}/close",
                                  {"identifiers": {"userId": "u1"}}, format="json")
    assert response.status_code == 200, response.content
    with tenant_scope(tenant.ctx):
        return ReviewItem.objects.get(memory_id=memory.pk)


def audit_actions(tenant: Any) -> list[tuple[str, str]]:
    """``[(action, actor)]`` of ``tenant``'s audit log, oldest first."""
    with tenant_scope(tenant.ctx):
        return list(AuditEntry.objects.order_by("created_at", "id")
                    .values_list("action", "actor"))
