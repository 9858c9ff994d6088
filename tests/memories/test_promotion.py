"""Promotion of session memories at session end (seed 001 "Memory Promotion", "Promotion
Trigger", "PII Redaction", "Sensitivity Check", "Session Memory Cleanup"), and the review queue
that blocked promotions wait in."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from memories.models import Memory, State
from memories.services.lifecycle import sessions_cleanup
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body, new_key

pytestmark = pytest.mark.django_db

S1 = {"userId": "u1", "sessionId": "s1"}
SEED_PII = "Reach user@example.com or 123-456-7890 about the launch"
SEED_REDACTED = "Reach [REDACTED_EMAIL] or [REDACTED_PHONE] about the launch"


def close(tenant: Any, session_id: str = "s1", user_id: str | None = "u1",
          client: Any = None) -> Any:
    payload = {"identifiers": {"userId": user_id}} if user_id else {}
    return (client or tenant.client).post(f"/api/v1/sessions/{session_id}/close", payload,
                                          format="json")


def closed(tenant: Any, session_id: str = "s1") -> dict[str, Any]:
    response = close(tenant, session_id)
    assert response.status_code == 200, response.content
    return body(response)


def session_memory(tenant: Any, content: str, importance: float = 0.9, **kwargs: Any) -> Memory:
    identifiers = kwargs.pop("identifiers", S1)
    return tenant.add(content, layer="session", identifiers=identifiers,
                      importance=importance, **kwargs)


def get(tenant: Any, memory_id: Any) -> dict[str, Any]:
    response = tenant.client.get(f"/api/v1/memories/{memory_id}")
    assert response.status_code == 200, response.content
    return body(response)["memory"]


def reviews(tenant: Any, client: Any = None, **params: str) -> list[dict[str, Any]]:
    response = (client or tenant.client).get("/api/v1/reviews", params)
    assert response.status_code == 200, response.content
    return body(response)["results"]


def audit(tenant: Any, action: str) -> list[dict[str, Any]]:
    return body(tenant.client.get("/api/v1/audit", {"action": action}))["results"]


def set_cleanup(tenant: Any, **values: Any) -> None:
    with tenant_scope(tenant.ctx):
        tenant_services.tenant_settings_update(
            tenant.ctx, patch={"lifecycle": {"sessionCleanup": values}})


def key_client(tenant: Any, roles: list[str]) -> Any:
    return new_key(tenant, roles=roles)[1]


def blocks(reason: str) -> float:
    return REGISTRY.get_sample_value("memory_promotion_blocks_total", {"reason": reason}) or 0.0


def persistent(tenant: Any) -> list[Memory]:
    with tenant_scope(tenant.ctx):
        return list(Memory.objects.exclude(layer__in=["session", "agent"]).order_by("id"))


# --- promotion on close -----------------------------------------------------------------

def test_it_promotes_an_important_memory_to_the_project_layer(tenant_a) -> None:
    memory = session_memory(tenant_a, SEED_PII, identifiers={**S1, "projectId": "p1"},
                            task_id="release-42")
    data = closed(tenant_a)
    assert data["sessionId"] == "s1"
    assert data["alreadyClosed"] is False
    assert data["blocked"] == [] and data["belowThreshold"] == 0
    [copy_id] = data["promoted"]
    copy = get(tenant_a, copy_id)
    assert copy["layer"] == "project"
    assert copy["identifiers"]["projectId"] == "p1"
    assert copy["content"] == SEED_REDACTED
    assert copy["metadata"]["promotedFrom"]["id"] == str(memory.pk)
    assert copy["metadata"]["promotedFrom"]["sessionId"] == "s1"
    assert copy["taskId"] == "release-42"  # the copy keeps the task it was written for
    original = get(tenant_a, memory.pk)
    assert original["content"] == SEED_PII
    assert original["metadata"]["promotedTo"] == {"id": copy_id, "layer": "project"}
    [entry] = audit(tenant_a, "memory_promoted")
    assert entry["target_id"] == str(memory.pk)
    assert entry["details"]["redacted"] == ["EMAIL", "PHONE"]


def test_it_promotes_to_the_user_layer_without_a_project(tenant_a) -> None:
    memory = session_memory(tenant_a, "Prefers tea; phone 123-456-7890")
    [copy_id] = closed(tenant_a)["promoted"]
    copy = get(tenant_a, copy_id)
    assert copy["layer"] == "user"
    assert copy["identifiers"]["userId"] == "u1"
    assert copy["content"] == "Prefers tea; phone [REDACTED_PHONE]"
    assert copy["metadata"]["promotedFrom"]["id"] == str(memory.pk)


def test_it_promotes_at_the_threshold_but_not_below(tenant_a) -> None:
    session_memory(tenant_a, "At threshold", importance=0.8)
    session_memory(tenant_a, "Ordinary", importance=0.5)
    session_memory(tenant_a, "Nearly", importance=0.79)
    data = closed(tenant_a)
    assert len(data["promoted"]) == 1
    assert data["belowThreshold"] == 2
    assert [m.content for m in persistent(tenant_a)] == ["At threshold"]


def test_the_tenant_threshold_applies(tenant_a) -> None:
    set_cleanup(tenant_a, promotionThreshold=0.4)
    session_memory(tenant_a, "Ordinary", importance=0.5)
    session_memory(tenant_a, "Trivial", importance=0.3)
    data = closed(tenant_a)
    assert (len(data["promoted"]), data["belowThreshold"]) == (1, 1)
    assert [m.content for m in persistent(tenant_a)] == ["Ordinary"]


def test_a_higher_tenant_threshold_keeps_important_memories_back(tenant_a) -> None:
    set_cleanup(tenant_a, promotionThreshold=0.95)
    session_memory(tenant_a, "Important", importance=0.9)
    assert closed(tenant_a)["promoted"] == []
    assert persistent(tenant_a) == []


def test_promote_important_false_promotes_nothing(tenant_a) -> None:
    set_cleanup(tenant_a, promoteImportant=False)
    session_memory(tenant_a, "Very important", importance=1.0)
    data = closed(tenant_a)
    assert data["promoted"] == [] and data["belowThreshold"] == 1
    assert persistent(tenant_a) == []


# --- sensitivity and the review queue ---------------------------------------------------

@pytest.mark.parametrize(("flags", "reason"), [
    ({"sensitive": True}, "sensitive"),
    ({"private": True}, "private"),
    ({"metadata": {"sensitive": True}}, "sensitive"),
    ({"metadata": {"private": True}}, "private"),
])
def test_a_sensitive_or_private_memory_is_blocked(tenant_a, flags, reason) -> None:
    before = blocks(reason)
    memory = session_memory(tenant_a, SEED_PII, **flags)
    data = closed(tenant_a)
    assert data["promoted"] == []
    assert data["blocked"] == [str(memory.pk)]
    assert persistent(tenant_a) == []
    assert "promotedTo" not in get(tenant_a, memory.pk)["metadata"]
    [item] = reviews(tenant_a, kind="promotion_blocked")
    assert item["status"] == "pending"
    assert item["memory_id"] == str(memory.pk)
    assert item["reason"] == reason
    assert item["preview"] == SEED_REDACTED
    [entry] = audit(tenant_a, "promotion_blocked")
    assert entry["target_id"] == str(memory.pk)
    assert entry["details"]["reason"] == reason
    assert SEED_PII not in str(entry)
    assert blocks(reason) == before + 1


def test_approving_a_blocked_promotion_promotes_it_redacted(tenant_a) -> None:
    memory = session_memory(tenant_a, SEED_PII, sensitive=True)
    closed(tenant_a)
    [item] = reviews(tenant_a)
    response = tenant_a.client.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json")
    assert response.status_code == 200, response.content
    decided = body(response)
    assert decided["status"] == "approved"
    assert decided["decided_by"].startswith("api_key:")
    assert decided["decided_at"]
    copy = get(tenant_a, decided["result_memory_id"])
    assert copy["content"] == SEED_REDACTED
    assert copy["layer"] == "user"
    assert copy["metadata"]["promotedFrom"]["id"] == str(memory.pk)
    assert get(tenant_a, memory.pk)["metadata"]["promotedTo"]["id"] == copy["id"]
    [entry] = audit(tenant_a, "review_decision")
    assert entry["target_id"] == item["id"]
    assert entry["details"]["decision"] == "approved"
    assert entry["details"]["resultMemoryId"] == copy["id"]
    again = tenant_a.client.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json")
    assert_error(again, 409, "REVIEW_ALREADY_DECIDED")
    rejected = tenant_a.client.post(f"/api/v1/reviews/{item['id']}/reject",
                                    {"reason": "changed my mind"}, format="json")
    assert_error(rejected, 409, "REVIEW_ALREADY_DECIDED")
    assert len(persistent(tenant_a)) == 1
    assert len(audit(tenant_a, "review_decision")) == 1


def test_rejecting_needs_a_reason_and_records_it(tenant_a) -> None:
    session_memory(tenant_a, SEED_PII, private=True)
    closed(tenant_a)
    [item] = reviews(tenant_a)
    url = f"/api/v1/reviews/{item['id']}/reject"
    assert_error(tenant_a.client.post(url, {}, format="json"), 400, "INVALID_INPUT")
    assert_error(tenant_a.client.post(url, {"reason": "  "}, format="json"), 400,
                 "INVALID_INPUT")
    assert reviews(tenant_a)[0]["status"] == "pending"
    response = tenant_a.client.post(url, {"reason": "Health data stays in the session"},
                                    format="json")
    assert response.status_code == 200, response.content
    decided = body(response)
    assert decided["status"] == "rejected"
    assert decided["decision_reason"] == "Health data stays in the session"
    assert decided["decided_at"] and decided["result_memory_id"] is None
    assert persistent(tenant_a) == []
    [entry] = audit(tenant_a, "review_decision")
    assert entry["details"]["reason"] == "Health data stays in the session"


def test_a_copy_that_breaks_a_policy_is_blocked_not_the_whole_close(tenant_a) -> None:
    falcon = session_memory(tenant_a, "Launch Falcon on Friday")
    tea = session_memory(tenant_a, "Prefers tea")
    policy = tenant_a.client.post("/api/v1/policies", {"name": "no codenames",
                                                       "denied_terms": ["falcon"]},
                                  format="json")
    assert policy.status_code == 201
    before = blocks("policy")
    data = closed(tenant_a)
    assert data["blocked"] == [str(falcon.pk)]
    assert [m.content for m in persistent(tenant_a)] == ["Prefers tea"]
    assert "promotedTo" in get(tenant_a, tea.pk)["metadata"]
    [item] = reviews(tenant_a)
    assert (item["kind"], item["reason"]) == ("promotion_blocked", "policy")
    assert item["details"]["violations"][0]["policy"] == "no codenames"
    assert audit(tenant_a, "policy_violation") == []
    assert blocks("policy") == before + 1
    approved = tenant_a.client.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json")
    assert approved.status_code == 200, approved.content
    assert get(tenant_a, body(approved)["result_memory_id"])["content"] == (
        "Launch Falcon on Friday")


# --- closing twice, unknown sessions, input ---------------------------------------------

def test_closing_twice_returns_the_first_result_and_promotes_nothing_new(tenant_a) -> None:
    session_memory(tenant_a, "Important")
    session_memory(tenant_a, "Secret", sensitive=True)
    first = closed(tenant_a)
    second = closed(tenant_a)
    assert second["alreadyClosed"] is True
    assert {k: v for k, v in second.items() if k != "alreadyClosed"} == {
        k: v for k, v in first.items() if k != "alreadyClosed"}
    assert len(persistent(tenant_a)) == 1
    assert len(reviews(tenant_a)) == 1
    assert len(audit(tenant_a, "session_closed")) == 1


def test_an_unknown_and_a_foreign_session_answer_the_same_404(tenant_a, tenant_b) -> None:
    session_memory(tenant_b, "Globex secret", identifiers={"userId": "u1", "sessionId": "sb"})
    unknown = close(tenant_a, "nope")
    foreign = close(tenant_a, "sb")
    assert_error(unknown, 404, "NOT_FOUND")
    assert_error(foreign, 404, "NOT_FOUND")
    assert body(unknown) == body(foreign)
    assert persistent(tenant_b) == [] and persistent(tenant_a) == []
    assert closed(tenant_b, "sb")["alreadyClosed"] is False


def test_another_users_session_is_not_found(tenant_a) -> None:
    session_memory(tenant_a, "Important")
    assert_error(close(tenant_a, user_id="u2"), 404, "NOT_FOUND")
    assert persistent(tenant_a) == []


def test_closing_needs_a_user_id(tenant_a) -> None:
    session_memory(tenant_a, "Important")
    assert_error(close(tenant_a, user_id=None), 400, "INVALID_INPUT")
    response = tenant_a.client.post("/api/v1/sessions/s1/close", {"identifiers": {}},
                                    format="json")
    assert_error(response, 400, "INVALID_INPUT")
    assert persistent(tenant_a) == []


# --- the idle-session job ---------------------------------------------------------------

def age(tenant: Any, session_id: str, days: float) -> None:
    with tenant_scope(tenant.ctx):
        Memory.objects.filter(session_id=session_id).update(
            updated_at=timezone.now() - timedelta(days=days))


def cleanup(tenant: Any) -> dict[str, int]:
    with tenant_scope(tenant.ctx):
        return sessions_cleanup(tenant.ctx)


def test_cleanup_closes_idle_sessions_only_and_is_idempotent(tenant_a) -> None:
    session_memory(tenant_a, "Old and important")
    session_memory(tenant_a, "Old and private", private=True)
    session_memory(tenant_a, "Fresh and important",
                   identifiers={"userId": "u1", "sessionId": "s2"})
    age(tenant_a, "s1", 8)
    assert cleanup(tenant_a) == {"closed": 1, "promoted": 1, "blocked": 1, "deleted": 0}
    assert [m.content for m in persistent(tenant_a)] == ["Old and important"]
    assert closed(tenant_a, "s1")["alreadyClosed"] is True
    age(tenant_a, "s1", 8)
    assert cleanup(tenant_a) == {"closed": 0, "promoted": 0, "blocked": 0, "deleted": 0}
    assert len(persistent(tenant_a)) == 1
    assert len(reviews(tenant_a)) == 1
    assert closed(tenant_a, "s2")["alreadyClosed"] is False


def test_cleanup_honours_retention_period_and_auto_delete(tenant_a) -> None:
    set_cleanup(tenant_a, retentionPeriod="12h", autoDelete=True)
    session_memory(tenant_a, "Important")
    session_memory(tenant_a, "Ordinary", importance=0.2)
    age(tenant_a, "s1", 0.25)
    assert cleanup(tenant_a)["closed"] == 0
    age(tenant_a, "s1", 1)
    assert cleanup(tenant_a) == {"closed": 1, "promoted": 1, "blocked": 0, "deleted": 2}
    with tenant_scope(tenant_a.ctx):
        assert not Memory.objects.filter(layer="session", state=State.ACTIVE).exists()
    assert [m.content for m in persistent(tenant_a)] == ["Important"]
    assert cleanup(tenant_a) == {"closed": 0, "promoted": 0, "blocked": 0, "deleted": 0}


# --- roles ------------------------------------------------------------------------------

def test_a_reader_key_cannot_see_or_decide_reviews(tenant_a) -> None:
    session_memory(tenant_a, SEED_PII, sensitive=True)
    closed(tenant_a)
    [item] = reviews(tenant_a)
    reader = key_client(tenant_a, ["reader"])
    assert_error(reader.get("/api/v1/reviews"), 403, "UNAUTHORIZED")
    assert_error(reader.get(f"/api/v1/reviews/{item['id']}"), 403, "UNAUTHORIZED")
    assert_error(reader.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json"),
                 403, "UNAUTHORIZED")
    assert reviews(tenant_a)[0]["status"] == "pending"
    assert persistent(tenant_a) == []


def test_a_reviewer_key_can_list_and_decide_but_not_write_policies(tenant_a) -> None:
    session_memory(tenant_a, SEED_PII, sensitive=True)
    closed(tenant_a)
    reviewer = key_client(tenant_a, ["reviewer"])
    [item] = reviews(tenant_a, client=reviewer)
    assert body(reviewer.get(f"/api/v1/reviews/{item['id']}"))["preview"] == SEED_REDACTED
    response = reviewer.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json")
    assert response.status_code == 200, response.content
    assert len(persistent(tenant_a)) == 1
    assert_error(reviewer.post("/api/v1/policies", {"name": "x"}, format="json"), 403,
                 "UNAUTHORIZED")
    assert_error(reviewer.get("/api/v1/audit"), 403, "UNAUTHORIZED")


def test_reviews_are_per_tenant(tenant_a, tenant_b) -> None:
    session_memory(tenant_a, SEED_PII, sensitive=True)
    closed(tenant_a)
    [item] = reviews(tenant_a)
    assert reviews(tenant_b) == []
    missing = tenant_b.client.post("/api/v1/reviews/01a1fb8f-0000-7000-8000-000000000000/approve",
                                   {}, format="json")
    foreign = tenant_b.client.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json")
    assert_error(foreign, 404, "NOT_FOUND")
    assert body(foreign) == body(missing)
    assert reviews(tenant_a)[0]["status"] == "pending"


def test_it_scrubs_the_review_preview_when_the_memory_is_erased(tenant_a) -> None:
    from governance.models import ReviewItem

    memory = tenant_a.add("Call me at 123-456-7890", "session",
                          identifiers={"userId": "u1", "sessionId": "s-erase"},
                          importance=0.9, sensitive=True)
    closed = tenant_a.client.post("/api/v1/sessions/s-erase/close",
                                  {"identifiers": {"userId": "u1"}}, format="json")
    assert closed.json()["blocked"] == [str(memory.pk)]
    with tenant_scope(tenant_a.ctx):
        assert ReviewItem.objects.get(memory_id=memory.pk).preview == "Call me at [REDACTED_PHONE]"
    assert tenant_a.client.delete(f"/api/v1/memories/{memory.pk}?hard=true").status_code == 200
    with tenant_scope(tenant_a.ctx):
        item = ReviewItem.objects.get(memory_id=memory.pk)
    assert (item.preview, item.details) == ("", {"erased": True})


class TestSessionCloseApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = ('session.close',)
