"""Cross-tenant cases of the governance and session routes, registered into
``tests.tenants.test_cross_tenant``'s table (imported at the end of that module)."""

from __future__ import annotations

import json
from typing import Any

from django.http import JsonResponse

from governance.models import ReviewItem, ReviewKind
from governance.services import policy_create
from llm.services import usage_record
from tenants.context import tenant_scope

P, R = "/api/v1/policies", "/api/v1/reviews"
#: Tokens of objects that exist nowhere (merged into the harness's missing tokens).
MISSING = {"policy": "01a1fb00-0000-7000-8000-000000000001",
           "review": "01a1fb00-0000-7000-8000-000000000002", "session": "sess-nobody",
           "policy_name": "policy-nobody"}


def populate(b: Any) -> dict[str, str]:
    """Give tenant B a policy, a pending review item, language-model usage and an open
    session."""
    with tenant_scope(b.ctx):
        policy = policy_create(b.ctx, data={"name": "policy-of-b",
                                            "denied_terms": ["falcon-secret"]})
        review = ReviewItem.objects.create(tenant_id=b.ctx.tenant_id,
                                           kind=ReviewKind.PROMOTION_BLOCKED,
                                           reason="sensitive", preview="preview of b")
        usage_record(b.ctx, purpose="graph", model="model-of-b", outcome="ok",
                     prompt_tokens=1234, completion_tokens=56)
    b.add("Globex session note", "session",
          identifiers={"userId": "u1", "sessionId": "sess-of-b"}, importance=0.9)
    return {"policy": str(policy.pk), "review": str(review.pk), "session": "sess-of-b",
            "policy_name": "policy-of-b"}


def stable(response: Any) -> JsonResponse:
    """The response without the ids and times a fresh object gets on every run."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("id", "created_at", "updated_at", "decided_at")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    data = json.loads(response.content.decode() or "null")
    return JsonResponse(strip(data), status=response.status_code, safe=False)


def register(case: Any, post: Any) -> None:
    """Add the governance cases to the cross-tenant table."""
    @case("policy-detail", "get")
    def get_policy(a: Any, t: dict[str, str]) -> Any:
        return a.client.get(f"{P}/{t['policy']}")

    @case("policy-detail", "patch")
    def patch_policy(a: Any, t: dict[str, str]) -> Any:
        return a.client.patch(f"{P}/{t['policy']}", {"enabled": False}, format="json")

    @case("policy-detail", "delete")
    def delete_policy(a: Any, t: dict[str, str]) -> Any:
        return a.client.delete(f"{P}/{t['policy']}")

    @case("policy-list", "get")
    def list_policies(a: Any, t: dict[str, str]) -> Any:
        return a.client.get(P)

    @case("policy-list", "post")
    def create_policy_with_anothers_name(a: Any, t: dict[str, str]) -> Any:
        response = post(a.client, P, {"name": t["policy_name"], "denied_terms": ["x"]})
        a.client.delete(f"{P}/{response.json().get('id')}")
        return stable(response)

    @case("policy-try-it", "post")
    def try_a_policy(a: Any, t: dict[str, str]) -> Any:
        return post(a.client, f"{P}/try", {"policy": {"denied_terms": ["falcon-secret"]},
                                           "text": "the falcon-secret plan"})

    @case("review-list", "get")
    def list_reviews(a: Any, t: dict[str, str]) -> Any:
        return a.client.get(R)

    @case("review-detail", "get")
    def get_review(a: Any, t: dict[str, str]) -> Any:
        return a.client.get(f"{R}/{t['review']}")

    @case("review-approve", "post")
    def approve_review(a: Any, t: dict[str, str]) -> Any:
        return post(a.client, f"{R}/{t['review']}/approve", {})

    @case("review-reject", "post")
    def reject_review(a: Any, t: dict[str, str]) -> Any:
        return post(a.client, f"{R}/{t['review']}/reject", {"reason": "no"})

    @case("audit-list", "get")
    def list_audit(a: Any, t: dict[str, str]) -> Any:
        return a.client.get("/api/v1/audit?action=policy_created")

    @case("llm-usage", "get")
    def usage_of_llm(a: Any, t: dict[str, str]) -> Any:
        return a.client.get("/api/v1/llm/usage")

    @case("session-close", "post")
    def close_anothers_session(a: Any, t: dict[str, str]) -> Any:
        return post(a.client, f"/api/v1/sessions/{t['session']}/close",
                    {"identifiers": {"userId": "u1"}})
