"""What each console page does for a tenant admin: dashboard figures, search and recall with
score parts, memory actions, the policy editor's try-it box, review decisions, settings and
API keys. Every change is audited under the signed-in user."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from console.models import ConsoleMembership
from governance.models import Policy, ReviewItem, ReviewStatus
from memories.models import Memory, MemoryHistory, State
from tenants.context import tenant_scope
from tenants.models import ApiKey, Tenant
from tests.console_helpers import (
    audit_actions,
    blocked_promotion,
    policy_hit,
)

pytestmark = pytest.mark.django_db


def url(tenant: Any, path: str = "") -> str:
    return f"/console/t/{tenant.tenant.slug}/{path}"


def text(response: Any) -> str:
    return response.content.decode()


def test_the_dashboard_counts_memories_writes_searches_and_blocked_promotions(
        tenant_a: Any, tenant_b: Any, admin: Client) -> None:
    tenant_a.add("Alice prefers tea", layer="user")
    tenant_a.add("The office opens at nine", layer="company",
                 identifiers={"companyId": tenant_a.tenant.slug}, kind="rule")
    tenant_b.add("Globex only: never shown to Acme")
    blocked_promotion(tenant_a, "Alice's card is 4111 1111 1111 1111")
    admin.get(url(tenant_a, "memories/"), {"query": "tea", "mode": "keyword",
                                            "userId": "u1"})  # the console's: not counted
    assert tenant_a.client.post("/api/v1/memories/search", {
        "query": "tea", "identifiers": {"userId": "u1"}}, format="json").status_code == 200
    response = admin.get(url(tenant_a))
    assert response.status_code == 200
    board = response.context["board"]
    assert board.by_layer["user"] == 1 and board.by_layer["company"] == 1
    assert board.by_layer["session"] == 1
    assert board.by_kind["rule"] == 1
    assert board.total == 3
    assert board.blocked_promotions == 1
    assert sum(board.writes) >= 3
    assert sum(board.searches) == 1
    assert 'id="chart-layers"' in text(response)
    assert "console/vendor/chart.umd.min.js" in text(response)


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword", "recall"])
def test_the_explorer_searches_in_each_mode_and_shows_score_parts(tenant_a: Any, admin: Client,
                                                                  mode: str) -> None:
    tenant_a.add("Alice drinks green tea every morning")
    tenant_a.add("The deploy runs on Fridays")
    response = admin.get(url(tenant_a, "memories/"), {
        "query": "green tea", "mode": mode, "userId": "u1", "limit": "5", "threshold": "0.1"})
    assert response.status_code == 200
    results = response.context["results"]
    assert results, text(response)
    assert results[0]["memory"].content == "Alice drinks green tea every morning"
    names = {name for name, value, _ in results[0]["parts"] if value is not None}
    expected = {"recall": {"relevance", "importance", "recency", "confidence"},
                "keyword": {"keyword"}, "semantic": {"similarity"},
                "hybrid": {"similarity", "keyword", "rrf"}}[mode]
    assert expected <= names
    page = text(response)
    assert "How these scores are made" in page
    assert 'title="cosine similarity of the query' in page or mode == "keyword"


def test_the_explorer_shows_a_missing_identifier_as_an_error(tenant_a: Any,
                                                             admin: Client) -> None:
    response = admin.get(url(tenant_a, "memories/"), {"query": "tea", "mode": "hybrid",
                                                      "layers": ["agent"], "userId": "u1"})
    assert response.status_code == 200
    assert "agentId" in text(response)
    assert response.context["results"] is None


def test_memory_actions_edit_archive_delete_restore_are_audited(tenant_a: Any,
                                                                admin: Client) -> None:
    memory = tenant_a.add("Alice likes jazz", metadata={"origin": "chat", "old": 1})
    page = admin.get(url(tenant_a, f"memories/{memory.pk}/"))
    assert page.status_code == 200
    assert "Alice likes jazz" in text(page)
    base = url(tenant_a, f"memories/{memory.pk}")
    edited = admin.post(f"{base}/edit/", {
        "metadata": '{"origin": "console", "mood": "calm"}', "kind": "fact",
        "scope": "music", "importance": "0.8", "confidence": "0.9", "version": "1"})
    assert edited.status_code == 302
    with tenant_scope(tenant_a.ctx):
        row = Memory.objects.get(pk=memory.pk)
    assert row.metadata == {"origin": "console", "mood": "calm"}
    assert (row.scope, row.importance, row.version) == ("music", 0.8, 2)
    stale = admin.post(f"{base}/edit/", {"metadata": "{}", "kind": "fact", "scope": "x",
                                         "importance": "0.1", "confidence": "1",
                                         "version": "1"}, follow=True)
    assert "version" in text(stale).lower()
    assert admin.post(f"{base}/archive/").status_code == 302
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=memory.pk).state == State.ARCHIVED
    assert admin.post(f"{base}/restore/").status_code == 302
    assert admin.post(f"{base}/delete/").status_code == 302
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=memory.pk).state == State.DELETED
    assert "Restore" in text(admin.get(f"{base}/"))
    assert admin.post(f"{base}/restore/").status_code == 302
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=memory.pk).state == State.ACTIVE
        actions = list(MemoryHistory.objects.filter(memory_id=memory.pk)
                       .order_by("created_at", "id").values_list("action", flat=True))
    assert actions == ["add", "update", "archive", "restore", "delete", "restore"]
    mine = [a for a, actor in audit_actions(tenant_a) if actor == "user:alice"]
    assert mine[-5:] == ["memory_updated", "memory_archived", "memory_restored",
                         "memory_deleted", "memory_restored"]
    history = text(admin.get(f"{base}/"))
    assert history.count("user:alice") >= 5


def test_an_edit_that_breaks_a_policy_is_refused_and_queued(tenant_a: Any,
                                                            admin: Client) -> None:
    memory = tenant_a.add("Alice likes jazz")
    admin.post(url(tenant_a, "policies/new/"), {
        "name": "needs source", "enabled": "on", "pii_handling": "allow",
        "required_metadata": "source", "sample_layer": "user", "action": "save"})
    response = admin.post(url(tenant_a, f"memories/{memory.pk}/edit/"), {
        "metadata": '{"mood": "calm"}', "kind": "fact", "scope": "global",
        "importance": "0.5", "confidence": "1", "version": "1"}, follow=True)
    assert "needs source" in text(response)
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=memory.pk).metadata == {}
        assert ReviewItem.objects.filter(kind="policy_hit").count() == 1
    assert ("policy_violation", "user:alice") in audit_actions(tenant_a)


def test_try_it_runs_an_unsaved_policy_and_saving_validates(tenant_a: Any,
                                                            admin: Client) -> None:
    form = {"name": "house rules", "enabled": "on", "pii_handling": "redact",
            "denied_terms": "bluebird\nred fox", "sample_layer": "user",
            "sample_text": "Call 212-555-0199 about bluebird", "action": "try"}
    tried = admin.post(url(tenant_a, "policies/new/"), form)
    assert tried.status_code == 200
    decision = tried.context["decision"]
    assert not decision.allowed
    assert [v.rule for v in decision.violations] == ["denied_term"]
    assert "[REDACTED_PHONE]" in decision.content
    assert "Denied" in text(tried)
    with tenant_scope(tenant_a.ctx):
        assert not Policy.objects.exists()
    bad = admin.post(url(tenant_a, "policies/new/"), {**form, "action": "save",
                                                      "denied_patterns": "(unclosed"})
    assert bad.status_code == 400
    assert "Invalid pattern" in text(bad)
    saved = admin.post(url(tenant_a, "policies/new/"), {**form, "action": "save"})
    assert saved.status_code == 302
    with tenant_scope(tenant_a.ctx):
        created = Policy.objects.get()
    assert created.denied_terms == ["bluebird", "red fox"]
    edited = admin.post(url(tenant_a, f"policies/{created.pk}/"),
                        {**form, "action": "save", "denied_terms": "bluebird"})
    assert edited.status_code == 302
    with tenant_scope(tenant_a.ctx):
        assert Policy.objects.get().denied_terms == ["bluebird"]
    assert admin.post(url(tenant_a, f"policies/{created.pk}/delete/")).status_code == 302
    mine = [a for a, actor in audit_actions(tenant_a) if actor == "user:alice"]
    assert mine == ["policy_created", "policy_updated", "policy_deleted"]


def test_reviews_approve_reject_and_bulk_record_who_and_when(tenant_a: Any,
                                                             admin: Client) -> None:
    hit = policy_hit(tenant_a, "Project bluebird ships in May")
    blocked = blocked_promotion(tenant_a, "Alice's phone is 212-555-0199", session_id="s9")
    queue = admin.get(url(tenant_a, "reviews/"))
    assert "[REDACTED_PHONE]" in text(queue)
    decide = url(tenant_a, "reviews/decide/")
    refused = admin.post(decide, {"single": f"{hit.pk}:reject"}, follow=True)
    assert "needs a reason" in text(refused)
    admin.post(decide, {"single": f"{hit.pk}:reject", f"reason_{hit.pk}": "codename"})
    admin.post(decide, {"single": f"{blocked.pk}:approve"})
    with tenant_scope(tenant_a.ctx):
        hit.refresh_from_db()
        blocked.refresh_from_db()
    assert (hit.status, hit.decided_by, hit.decision_reason) == (
        ReviewStatus.REJECTED, "user:alice", "codename")
    assert blocked.status == ReviewStatus.APPROVED and blocked.decided_at is not None
    decided = admin.get(url(tenant_a, "reviews/"), {"status": "all"})
    assert text(decided).count("user:alice at") == 2
    again = admin.post(decide, {"items": [str(hit.pk)], "decision": "approve"}, follow=True)
    assert "already" in text(again).lower()
    more = [policy_hit(tenant_a, f"bluebird note {i}") for i in range(2)]
    admin.post(decide, {"items": [str(i.pk) for i in more], "decision": "reject",
                        "reason": "bulk"})
    with tenant_scope(tenant_a.ctx):
        assert set(ReviewItem.objects.filter(pk__in=[i.pk for i in more])
                   .values_list("status", flat=True)) == {ReviewStatus.REJECTED}
    decisions = [a for a, actor in audit_actions(tenant_a)
                 if actor == "user:alice" and a == "review_decision"]
    assert len(decisions) == 4


SETTINGS = {
    "default_threshold": "0.55", "recency_half_life_days": "14",
    "weights_scope": "health", "weight_relevance": "0.7", "weight_importance": "0.1",
    "weight_recency": "0.1", "weight_confidence": "0.1",
    "decay_enabled": "on", "decay_rate": "0.02", "decay_archive_threshold": "0.15",
    "deleted_retention_days": "10", "cleanup_retention": "12h", "cleanup_promote": "on",
    "cleanup_promotion_threshold": "0.75", "promotion_target": "project",
}


def test_settings_are_saved_validated_and_audited(tenant_a: Any, admin: Client) -> None:
    page = admin.get(url(tenant_a, "settings/"))
    assert page.status_code == 200
    assert page.context["form"].initial["default_threshold"] == 0.7
    assert admin.post(url(tenant_a, "settings/"), SETTINGS).status_code == 302
    stored = Tenant.objects.get(pk=tenant_a.tenant.pk).settings
    assert stored["search"]["defaultThreshold"] == 0.55
    assert stored["recall"]["scoreWeights"]["health"]["relevance"] == 0.7
    assert stored["recall"]["recencyHalfLifeDays"] == 14
    assert stored["lifecycle"]["decay"]["ratePerDay"] == 0.02
    assert stored["lifecycle"]["decay"]["exemptLayers"] == ["company"]
    assert stored["lifecycle"]["sessionCleanup"]["retentionPeriod"] == "12h"
    assert stored["lifecycle"]["promotionTargetLayer"] == "project"
    bad = admin.post(url(tenant_a, "settings/"), {**SETTINGS, "cleanup_retention": "soon"})
    assert bad.status_code == 400
    assert "retention period" in text(bad)
    half = admin.post(url(tenant_a, "settings/"), {**SETTINGS, "weight_recency": ""})
    assert half.status_code == 400
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).settings == stored
    assert ("settings_updated", "user:alice") in audit_actions(tenant_a)


def test_an_api_key_is_shown_once_and_can_be_revoked(tenant_a: Any, admin: Client) -> None:
    created = admin.post(url(tenant_a, "settings/keys/"), {"name": "ci", "roles": ["reader"]})
    assert created.status_code == 302
    shown = admin.get(created["Location"])
    raw = re.search(r'<pre id="new-key">(msk_[^<]+)</pre>', text(shown)).group(1)
    assert raw not in text(admin.get(url(tenant_a, "settings/")))
    with tenant_scope(tenant_a.ctx):
        key = ApiKey.objects.get(name="ci")
    assert key.roles == ["reader"] and raw.startswith(key.prefix)
    from rest_framework.test import APIClient
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/v1/settings").status_code == 200
    assert admin.post(url(tenant_a, f"settings/keys/{key.pk}/revoke/")).status_code == 302
    assert api.get("/api/v1/settings").status_code == 401
    actions = audit_actions(tenant_a)
    assert ("api_key_created", "user:alice") in actions
    assert ("api_key_revoked", "user:alice") in actions


def test_create_console_user_links_a_user_to_one_tenant(tenant_a: Any, tenant_b: Any) -> None:
    call_command("create_console_user", "rita", tenant=tenant_a.tenant.slug, role="reviewer",
                 password="pw-rita-123456")
    client = Client()
    assert client.login(username="rita", password="pw-rita-123456")
    assert client.get(url(tenant_a, "reviews/")).status_code == 200
    call_command("create_console_user", "rita", tenant=tenant_a.tenant.slug, role="admin")
    assert client.get(url(tenant_a)).status_code == 200
    from django.core.management.base import CommandError
    with pytest.raises(CommandError, match="another tenant"):
        call_command("create_console_user", "rita", tenant=tenant_b.tenant.slug)
    with tenant_scope(tenant_a.ctx):
        assert ConsoleMembership.objects.get().role == "admin"
    with tenant_scope(tenant_b.ctx):
        assert not ConsoleMembership.objects.exists()


def test_the_language_model_page_shows_the_periods_usage_against_the_budget(
        tenant_a: Any, tenant_b: Any, admin: Client) -> None:
    from llm.services import usage_record

    tenant_a.client.patch("/api/v1/settings", {"llm": {"budget": {"tokens": 5000}}},
                          format="json")
    with tenant_scope(tenant_a.ctx):
        usage_record(tenant_a.ctx, purpose="summarize", model="local", outcome="ok",
                     prompt_tokens=1200, completion_tokens=300)
    with tenant_scope(tenant_b.ctx):
        usage_record(tenant_b.ctx, purpose="graph", model="model-of-globex", outcome="ok",
                     prompt_tokens=7, completion_tokens=7)
    response = admin.get(url(tenant_a, "llm/"))
    assert response.status_code == 200
    page = text(response)
    assert re.search(r'id="llm-tokens">1500</span> tokens used of 5000', page)
    assert "<td>summarize</td><td>local</td><td>ok</td><td>1</td><td>1200</td>" in page
    assert "model-of-globex" not in page


def test_a_server_error_under_the_console_is_the_consoles_page() -> None:
    from django.test import RequestFactory

    from memory_project.errors import handler500
    response = handler500(RequestFactory().get("/console/t/acme/"))
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    assert b"Something went wrong" in response.content
    api = handler500(RequestFactory().get("/api/v1/memories"))
    assert api["Content-Type"].startswith("application/json")


def test_a_key_can_be_given_a_lifetime(tenant_a: Any, admin: Client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    assert admin.post(url(tenant_a, "settings/keys/"), {
        "name": "temp", "roles": ["reader"], "expires_in_days": "30"}).status_code == 302
    assert admin.post(url(tenant_a, "settings/keys/"), {
        "name": "odd", "expires_in_days": "9999"}).status_code == 302
    with tenant_scope(tenant_a.ctx):
        key = ApiKey.objects.get(name="temp")
        assert not ApiKey.objects.filter(name="odd").exists()
    assert key.expires_at is not None
    assert abs(key.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=5)
    page = admin.get(url(tenant_a, "settings/")).content.decode()
    assert key.expires_at.strftime("%Y-%m-%d") in page


def test_a_memorys_content_is_edited_re_embedded_and_kept_in_its_history(
        tenant_a: Any, admin: Client) -> None:
    """Console issue, memory browser: edit content (checked, re-embedded, audited)."""
    memory = tenant_a.add("Alice likes jazz")
    base = url(tenant_a, f"memories/{memory.pk}")
    fields = {"metadata": "{}", "kind": "fact", "scope": "global", "importance": "0.5",
              "confidence": "1", "version": "1"}
    with tenant_scope(tenant_a.ctx):
        before = Memory.objects.values_list("embedding", flat=True).get(pk=memory.pk)
    blank = admin.post(f"{base}/edit/", {**fields, "content": "   "})
    assert blank.status_code == 400 and "Content cannot be empty" in text(blank)
    edited = admin.post(f"{base}/edit/", {**fields, "content": "Alice likes bebop"})
    assert edited.status_code == 302
    with tenant_scope(tenant_a.ctx):
        row = Memory.objects.get(pk=memory.pk)
        history = list(MemoryHistory.objects.filter(memory_id=memory.pk, action="update")
                       .values_list("old_content", "new_content"))
    assert (row.content, row.version) == ("Alice likes bebop", 2)
    assert list(row.embedding) != list(before)
    assert history == [("Alice likes jazz", "Alice likes bebop")]
    assert audit_actions(tenant_a)[-1] == ("memory_updated", "user:alice")
    page = text(admin.get(f"{base}/"))
    assert "Alice likes bebop" in page and "Alice likes jazz" in page
