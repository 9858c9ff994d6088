"""Seed 001 "Layer Summary Storage" … "Summary Staleness Validation": storage, configuration,
retrieval, context vectors, staleness and invalidation, observability, cost control and
batching, through the service layer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from jobs.models import QueuedJob
from llm.budgets import BudgetExceeded
from llm.services import usage_record
from memories.services.deletion import memories_erase, memory_delete
from memories.services.memory import memory_update
from memory_project.errors import InvalidInput
from summaries import services
from summaries.generation import summary_generate
from summaries.models import LayerSummary, Priority, SummaryScope
from summaries.scopes import scope_for, source_hash
from summaries.selectors import summaries_for, summary_get
from summaries.tokens import count_tokens
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers

P1 = LayerIdentifiers(projectId="p1")
TEXTS = ["Maria: I moved to Lisbon last spring.", "Jon: The Falcon project ships in May.",
         "Maria: I adopted a cat named Pixel.", "Jon: We fixed the memory leak in Falcon.",
         "Maria: My sister Ana visits in June.", "Jon: The Falcon demo went well on Friday."]


def add_project(tenant: Any, *texts: str, project: str = "p1") -> list[Any]:
    return [tenant.add(t, layer="project", identifiers={"projectId": project}) for t in texts]


def generate(tenant: Any, ids: LayerIdentifiers = P1, layer: Layer = Layer.PROJECT,
             trigger: str = "manual") -> list[LayerSummary]:
    with tenant_scope(tenant.ctx):
        return summary_generate(tenant.ctx, scope=scope_for(layer, ids), trigger=trigger)


def patch_settings(tenant: Any, section: dict[str, Any]) -> None:
    response = tenant.client.patch("/api/v1/settings", {"summaries": section}, format="json")
    assert response.status_code == 200, response.content


def metric(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def test_it_stores_three_depths_with_tokens_hash_time_model_and_context_vector(
        tenant_a: Any) -> None:
    memories = add_project(tenant_a, *TEXTS)
    stored = generate(tenant_a)
    assert [s.depth for s in stored] == ["sentence", "paragraph", "detailed"]
    with tenant_scope(tenant_a.ctx):
        digest = source_hash(scope_for(Layer.PROJECT, P1))
    ids = {str(m.pk) for m in memories}
    for summary in stored:
        assert summary.token_count == count_tokens(summary.content) > 0
        assert summary.source_hash == digest and len(digest) == 64
        assert summary.generated_at is not None and summary.model == "offline:extractive"
        assert summary.context_vector is not None and len(summary.context_vector) == 384
        assert {i for s in summary.sentences for i in s["sourceIds"]} <= ids
    assert stored[0].token_count <= 50 and stored[1].token_count <= 200


def test_it_writes_only_the_configured_depths_and_drops_the_others(tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS)
    generate(tenant_a)
    patch_settings(tenant_a, {"layers": {"project": {"depths": ["sentence"]}}})
    assert [s.depth for s in generate(tenant_a)] == ["sentence"]
    with tenant_scope(tenant_a.ctx):
        assert list(LayerSummary.objects.values_list("depth", flat=True)) == ["sentence"]


def test_it_returns_null_for_a_missing_summary_and_refuses_a_bad_depth(tenant_a: Any) -> None:
    with tenant_scope(tenant_a.ctx):
        assert summary_get(tenant_a.ctx, layer="project", identifiers=P1, depth="detailed") is None
        with pytest.raises(InvalidInput):
            summary_get(tenant_a.ctx, layer="project", identifiers=P1, depth="chapter")


def test_it_serves_every_accessible_layer_in_precedence_order(tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS[:3])
    tenant_a.add("Alice prefers tea.", layer="user", identifiers={"userId": "alice"})
    generate(tenant_a)
    generate(tenant_a, LayerIdentifiers(userId="alice"), Layer.USER)
    with tenant_scope(tenant_a.ctx):
        served = summaries_for(tenant_a.ctx, identifiers=LayerIdentifiers(
            userId="alice", projectId="p1"), depths=["paragraph"])
    assert [s.summary.layer for s in served] == ["user", "project"]
    assert all(s.summary.token_count > 0 for s in served)


def test_a_changed_source_makes_it_stale_and_a_new_generation_updates_the_vector(
        tenant_a: Any) -> None:
    memories = add_project(tenant_a, *TEXTS)
    first = generate(tenant_a)[2]
    add_project(tenant_a, "Ana: I am starting a pottery class.")
    with tenant_scope(tenant_a.ctx):
        served = summary_get(tenant_a.ctx, layer="project", identifiers=P1, depth="detailed")
        assert served is not None and served.freshness.stale
        assert served.freshness.reasons == ("sources_changed",)
        assert SummaryScope.objects.get().pending_since is not None  # marked for regeneration
        memory_update(tenant_a.ctx, memory_id=memories[0].pk,
                      content="Maria: I moved to Porto in the autumn.")
    second = generate(tenant_a)[2]
    assert second.source_hash != first.source_hash
    assert first.context_vector is not None and second.context_vector is not None
    assert not np.allclose(first.context_vector, second.context_vector)
    with tenant_scope(tenant_a.ctx):
        served = summary_get(tenant_a.ctx, layer="project", identifiers=P1, depth="detailed")
    assert served is not None and not served.freshness.stale


def test_a_summary_older_than_max_age_is_stale_whatever_its_hash(tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS)
    generate(tenant_a)
    patch_settings(tenant_a, {"layers": {"project": {"maxAge": 3600}}})
    with tenant_scope(tenant_a.ctx):
        LayerSummary.objects.update(generated_at=timezone.now() - timedelta(hours=2))
        served = summary_get(tenant_a.ctx, layer="project", identifiers=P1, depth="sentence")
    assert served is not None and served.freshness.reasons == ("max_age",)
    assert served.freshness.needs_regeneration and served.freshness.age_seconds >= 7200


def test_replacing_a_cited_source_invalidates_at_once_and_queues_high_priority(
        tenant_a: Any) -> None:
    memories = add_project(tenant_a, *TEXTS)
    stored = generate(tenant_a)
    cited = stored[0].sentences[0]["sourceIds"][0]
    with tenant_scope(tenant_a.ctx):
        QueuedJob.objects.all().delete()
        memory_update(tenant_a.ctx, memory_id=cited, content="Maria: all of that was wrong.")
        scope = SummaryScope.objects.get()
        assert scope.priority == Priority.HIGH and scope.trigger == "invalidation"
        assert LayerSummary.objects.filter(invalidated_at__isnull=True).count() == 0
        memory_update(tenant_a.ctx, memory_id=cited, content="Maria: no, this was wrong.")
        jobs = QueuedJob.objects.filter(task=services.REGENERATE_TASK)  # one while it waits
        assert [j.args for j in jobs] == [[str(tenant_a.tenant.id), str(scope.pk)]]
        served = summary_get(tenant_a.ctx, layer="project", identifiers=P1, depth="sentence")
    assert served is not None and "invalidated" in served.freshness.reasons  # served, flagged
    assert len(memories) == len(TEXTS)


def test_a_soft_deleted_source_invalidates_and_an_erased_one_leaves_every_summary(
        tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS)
    stored = generate(tenant_a)
    detailed = stored[2]
    first, second = (s["sourceIds"][0] for s in detailed.sentences[:2])
    with tenant_scope(tenant_a.ctx):
        memory_delete(tenant_a.ctx, memory_id=first)
        detailed.refresh_from_db()
        assert detailed.invalidated_at is not None
        memories_erase(tenant_a.ctx, memory_ids=[second], reason="test")
        detailed.refresh_from_db()
    assert second not in {i for s in detailed.sentences for i in s["sourceIds"]}
    assert second not in [str(i) for i in detailed.source_ids]
    assert detailed.context_vector is None
    assert detailed.token_count == count_tokens(detailed.content)


def test_the_change_trigger_fires_at_the_threshold(tenant_a: Any) -> None:
    patch_settings(tenant_a, {"layers": {"project": {"updateOnChanges": 3}}})
    add_project(tenant_a, *TEXTS[:2])
    generate(tenant_a)
    add_project(tenant_a, TEXTS[2], TEXTS[3])
    with tenant_scope(tenant_a.ctx):
        assert SummaryScope.objects.get().changes == 2
        assert services.summaries_mark_due(tenant_a.ctx) == 0
    add_project(tenant_a, TEXTS[4])
    with tenant_scope(tenant_a.ctx):
        assert services.summaries_mark_due(tenant_a.ctx) == 1
        assert SummaryScope.objects.get().trigger == "changes"


@pytest.mark.parametrize("skip, changed, due", [(True, False, False), (True, True, True),
                                                (False, False, True)])
def test_the_time_trigger_respects_skip_if_unchanged(tenant_a: Any, skip: bool, changed: bool,
                                                     due: bool) -> None:
    patch_settings(tenant_a, {"layers": {"project": {
        "updateInterval": 600, "skipIfUnchanged": skip, "updateOnChanges": 0}}})
    add_project(tenant_a, *TEXTS[:3])
    generate(tenant_a)
    if changed:
        add_project(tenant_a, TEXTS[3])
    later = timezone.now() + timedelta(seconds=601)
    with tenant_scope(tenant_a.ctx):
        assert services.summaries_mark_due(tenant_a.ctx, now=later - timedelta(seconds=10)) == 0
        assert services.summaries_mark_due(tenant_a.ctx, now=later) == int(due)
        if due:
            assert SummaryScope.objects.get().trigger == "time"


def test_a_disabled_layer_is_never_due(tenant_a: Any) -> None:
    patch_settings(tenant_a, {"layers": {"project": {"enabled": False}}})
    add_project(tenant_a, *TEXTS)
    with tenant_scope(tenant_a.ctx):
        assert services.summaries_mark_due(tenant_a.ctx) == 0


def test_a_batch_waits_for_the_window_and_goes_by_priority_then_layer(tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS[:2])
    tenant_a.add("Globex: a company rule.", layer="company", identifiers={})
    tenant_a.add("Alice prefers tea.", layer="user", identifiers={"userId": "alice"})
    now = timezone.now()
    with tenant_scope(tenant_a.ctx):
        assert services.summaries_mark_due(tenant_a.ctx, now=now) == 3  # initial
        assert services.summaries_run_batch(tenant_a.ctx, now=now)["scopes"] == 0  # window
        later = now + timedelta(minutes=5)
        assert services.summaries_run_batch(tenant_a.ctx, now=later, limit=1)["scopes"] == 1
        assert list(LayerSummary.objects.values_list("layer", flat=True).distinct()) == ["user"]
        SummaryScope.objects.filter(layer="company").update(priority=Priority.HIGH)
        assert services.summaries_run_batch(tenant_a.ctx, now=now, limit=1)["scopes"] == 1
        assert set(LayerSummary.objects.values_list("layer", flat=True)) == {"user", "company"}
        done = services.summaries_run_batch(tenant_a.ctx, now=later)
    assert done == {"scopes": 1, "summaries": 3, "modelCalls": 0, "failed": 0}


def test_a_spent_budget_refuses_before_any_call_and_stops_the_batch_keeping_the_rest(
        tenant_a: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.SUMMARY_GENERATOR = "llm"  # the model is offline in tests: the fallback answers
    patch_settings(tenant_a, {"budget": {"tokens": 100}})
    add_project(tenant_a, *TEXTS[:3])
    add_project(tenant_a, *TEXTS[3:], project="p2")
    real = services.summary_generate

    def spending(ctx: Any, **kwargs: Any) -> Any:  # a model call that uses the budget up
        stored = real(ctx, **kwargs)
        usage_record(ctx, purpose="summarize", model="m", outcome="ok", layer="project",
                     prompt_tokens=90, completion_tokens=20)
        return stored

    monkeypatch.setattr(services, "summary_generate", spending)
    with tenant_scope(tenant_a.ctx):
        services.summaries_mark_due(tenant_a.ctx)
        SummaryScope.objects.update(priority=Priority.HIGH)
        done = services.summaries_run_batch(tenant_a.ctx)
        assert done["scopes"] == 1 and done["failed"] == 1
        waiting = SummaryScope.objects.get(pending_since__isnull=False)
        assert waiting.last_error.startswith("BUDGET_EXCEEDED")
        assert not LayerSummary.objects.filter(scope=waiting).exists()
        with pytest.raises(BudgetExceeded) as refused:
            services.summary_request(tenant_a.ctx, scope=scope_for(Layer.PROJECT, P1))
    details = refused.value.details
    assert details["setting"] == "summaries.budget" and details["limit"] == 100
    assert details["used"] == 110 and details["period"] == "month"


def test_a_personalized_summary_is_scoped_to_its_user(tenant_a: Any) -> None:
    patch_settings(tenant_a, {"layers": {"project": {"personalize": "user"}}})
    add_project(tenant_a, *TEXTS)
    tenant_a.add("I love cats.", layer="user", identifiers={"userId": "alice"})
    tenant_a.add("I prefer dogs.", layer="user", identifiers={"userId": "bob"})
    generate(tenant_a)
    personal = scope_for(Layer.PROJECT, P1, ("userId", "alice"))
    with tenant_scope(tenant_a.ctx):
        services.summary_request(tenant_a.ctx, scope=personal)
        summary_generate(tenant_a.ctx, scope=personal, trigger="manual")
        mine = summary_get(tenant_a.ctx, layer="project", depth="paragraph",
                           identifiers=LayerIdentifiers(projectId="p1", userId="alice"))
        shared = summary_get(tenant_a.ctx, layer="project", depth="paragraph",
                             identifiers=LayerIdentifiers(projectId="p1", userId="bob"))
    assert mine is not None and mine.summary.personalized
    assert mine.summary.personalization_context == {"userId": "alice"}
    assert shared is not None and not shared.summary.personalized
    with tenant_scope(tenant_a.ctx):  # bob's own summary is now wanted: pending, normal
        bobs = SummaryScope.objects.get(personal_key="userId=bob")
        summary_get(tenant_a.ctx, layer="project", depth="paragraph",
                    identifiers=LayerIdentifiers(projectId="p1", userId="made-up"))
        assert not SummaryScope.objects.filter(personal_key="userId=made-up").exists()
    assert bobs.pending_since is not None and bobs.trigger == "personalization"
    assert bobs.priority == Priority.NORMAL


def test_generation_and_retrieval_emit_the_seed_metrics(tenant_a: Any) -> None:
    labels = {"layer": "project", "depth": "sentence"}
    before = (metric("memory_summary_generations_total", {**labels, "trigger": "manual"}),
              metric("memory_summary_generation_duration_ms_count", labels),
              metric("memory_summary_retrievals_total", {**labels, "cache_hit": "true"}),
              metric("memory_summary_retrieval_latency_ms_count"))
    add_project(tenant_a, *TEXTS)
    generate(tenant_a)
    with tenant_scope(tenant_a.ctx):
        summary_get(tenant_a.ctx, layer="project", identifiers=P1, depth="sentence")
    after = (metric("memory_summary_generations_total", {**labels, "trigger": "manual"}),
             metric("memory_summary_generation_duration_ms_count", labels),
             metric("memory_summary_retrievals_total", {**labels, "cache_hit": "true"}),
             metric("memory_summary_retrieval_latency_ms_count"))
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1, 1]


@pytest.mark.parametrize("section", [
    {"layers": {"galaxy": {}}}, {"layers": {"project": {"depths": ["chapter"]}}},
    {"layers": {"project": {"updateInterval": 10**12}}}, {"batchWindowSeconds": -1},
    {"layers": {"project": {"personalize": "team"}}}, {"budget": {"tokens": -5}},
    {"layers": {"project": {"updateOnChanges": True}}}, {"colour": "blue"},
    {"layers": {"project": []}}, {"layers": []}, {"layers": {"default": ""}},
])
def test_bad_summary_settings_are_refused_with_the_key_named(tenant_a: Any,
                                                             section: dict[str, Any]) -> None:
    response = tenant_a.client.patch("/api/v1/settings", {"summaries": section}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "INVALID_INPUT"


def test_asking_again_while_a_regeneration_waits_queues_no_second_job(tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS[:2])
    with tenant_scope(tenant_a.ctx):
        QueuedJob.objects.all().delete()
        for _ in range(3):
            services.summary_request(tenant_a.ctx, scope=scope_for(Layer.PROJECT, P1))
        assert QueuedJob.objects.filter(task=services.REGENERATE_TASK).count() == 1


def test_erasing_a_subject_forgets_their_scopes_and_personalized_summaries(
        tenant_a: Any) -> None:
    from memories.services.deletion import memory_erase_by_identifiers

    patch_settings(tenant_a, {"layers": {"project": {"personalize": "user"}}})
    add_project(tenant_a, *TEXTS[:3])
    tenant_a.add("Carol likes jazz.", layer="user", identifiers={"userId": "carol"})
    generate(tenant_a, LayerIdentifiers(userId="carol"), Layer.USER)
    with tenant_scope(tenant_a.ctx):
        summary_generate(tenant_a.ctx, trigger="manual",
                         scope=scope_for(Layer.PROJECT, P1, ("userId", "carol")))
        memory_erase_by_identifiers(tenant_a.ctx, identifiers={"userId": "carol"})
        left = list(SummaryScope.objects.values_list("scope_key", "personal_key"))
    assert left == [("projectId=p1", "")]  # nothing names carol any more
