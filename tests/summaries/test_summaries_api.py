"""The summary endpoints (``/api/v1/summaries``): list and get with freshness, ``null`` when
there is none, regeneration queued as a job, bad input answered with the envelope, roles and
restricted keys, personalized summaries, and B's own summaries on the cross-tenant routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from jobs.models import QueuedJob
from summaries.generation import summary_generate
from summaries.models import LayerSummary, Priority, SummaryScope
from summaries.scopes import ScopeRef, scope_for
from summaries.services import REGENERATE_TASK, summary_regenerate
from summaries.tokens import TOKENIZER_NAME
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers
from tests import cross_tenant_summaries
from tests.conftest import TenantFixture
from tests.contract import TenantApiContract
from tests.cross_tenant_harness import populate_b
from tests.helpers import assert_error, body, new_key

pytestmark = pytest.mark.django_db

S = "/api/v1/summaries"
PROJECT = ["Maria: I moved to Lisbon last spring.", "Jon: The Falcon project ships in May.",
           "Maria: I adopted a cat named Pixel.", "Jon: We fixed the memory leak in Falcon."]
USER = ["Ana prefers green tea in the morning.", "Ana runs five kilometres on Sundays."]
ITEM_KEYS = {"id", "layer", "scope", "personalized", "personalizationContext", "depth",
             "content", "sentences", "sourceIds", "sourceCount", "tokenCount", "sourceHash",
             "generatedAt", "model", "trigger", "stale", "needsRegeneration", "ageSeconds",
             "reasons"}


class TestSummaryApiContract(TenantApiContract):
    operations = ("summary.list", "summary.get", "summary.regenerate", "context.assemble")


def generate(tenant: TenantFixture, scope: ScopeRef) -> list[LayerSummary]:
    """Write ``scope``'s summaries as ``tenant``."""
    with tenant_scope(tenant.ctx):
        return summary_generate(tenant.ctx, scope=scope, trigger="manual")


def project_scope(project: str = "p1") -> ScopeRef:
    return scope_for(Layer.PROJECT, LayerIdentifiers(projectId=project))


@pytest.fixture
def summarised(tenant_a: TenantFixture) -> TenantFixture:
    """Tenant A with project p1's and user u1's memories, both summarised."""
    for text in PROJECT:
        tenant_a.add(text, layer="project", identifiers={"projectId": "p1"})
    for text in USER:
        tenant_a.add(text, identifiers={"userId": "u1"})
    generate(tenant_a, project_scope())
    generate(tenant_a, scope_for(Layer.USER, LayerIdentifiers(userId="u1")))
    return tenant_a


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content[:500]
    return body(response)


# --- list and get ---------------------------------------------------------------------------

def test_it_lists_every_granted_layer_in_precedence_order(summarised: TenantFixture) -> None:
    data = ok(summarised.client.get(S, {"userId": "u1", "projectId": "p1"}))
    items = data["summaries"]
    assert set(data) == {"summaries", "totalTokens", "tokenizer"}
    assert data["tokenizer"] == TOKENIZER_NAME
    assert [(s["layer"], s["depth"]) for s in items] == [
        (layer, depth) for layer in ("user", "project")
        for depth in ("sentence", "paragraph", "detailed")]
    assert data["totalTokens"] == sum(s["tokenCount"] for s in items) > 0
    for item in items:
        assert set(item) == ITEM_KEYS
        assert item["stale"] is False and item["needsRegeneration"] is False
        assert item["reasons"] == [] and item["ageSeconds"] >= 0
        assert item["personalized"] is False and item["personalizationContext"] == {}
        assert item["trigger"] == "manual" and item["model"]
        datetime.fromisoformat(item["generatedAt"].replace("Z", "+00:00"))
    assert {s["scope"] for s in items} == {"userId=u1", "projectId=p1"}


def test_it_lists_only_the_depths_asked_for(summarised: TenantFixture) -> None:
    c = summarised.client
    repeated = ok(c.get(f"{S}?projectId=p1&depth=sentence&depth=detailed"))["summaries"]
    assert [s["depth"] for s in repeated] == ["sentence", "detailed"]
    commas = ok(c.get(S, {"projectId": "p1", "depth": "paragraph,sentence,sentence"}))
    assert [s["depth"] for s in commas["summaries"]] == ["sentence", "paragraph"]


def test_it_gets_one_layer_at_one_depth(summarised: TenantFixture) -> None:
    got = ok(summarised.client.get(f"{S}/project", {"projectId": "p1", "depth": "detailed"}))
    summary = got["summary"]
    assert set(got) == {"summary"} and set(summary) == ITEM_KEYS
    assert (summary["layer"], summary["depth"], summary["scope"]) == (
        "project", "detailed", "projectId=p1")
    assert summary["content"] == " ".join(s["text"] for s in summary["sentences"])
    cited = {i for s in summary["sentences"] for i in s["sourceIds"]}
    assert cited == set(summary["sourceIds"]) and summary["sourceCount"] == len(cited)
    with tenant_scope(summarised.ctx):
        row = LayerSummary.objects.get(pk=summary["id"])
    assert summary["sourceHash"] == row.source_hash and summary["tokenCount"] == row.token_count


def test_it_answers_the_paragraph_when_no_depth_is_named(summarised: TenantFixture) -> None:
    got = ok(summarised.client.get(f"{S}/user", {"userId": "u1"}))
    assert got["summary"]["depth"] == "paragraph"


def test_it_answers_null_and_an_empty_list_when_there_is_no_summary(
        summarised: TenantFixture) -> None:
    c = summarised.client
    assert ok(c.get(f"{S}/project", {"projectId": "p-none"})) == {"summary": None}
    assert ok(c.get(f"{S}/team", {"teamId": "t-none", "depth": "sentence"})) == {
        "summary": None}
    assert ok(c.get(S, {"projectId": "p-none", "userId": "u-none"})) == {
        "summaries": [], "totalTokens": 0, "tokenizer": TOKENIZER_NAME}


def test_it_flags_a_summary_stale_once_a_source_changes(summarised: TenantFixture) -> None:
    summarised.add("Jon: Falcon slips to June.", layer="project",
                   identifiers={"projectId": "p1"})
    got = ok(summarised.client.get(f"{S}/project", {"projectId": "p1"}))["summary"]
    assert got["stale"] is True and got["needsRegeneration"] is True
    assert got["reasons"] == ["sources_changed"]
    listed = ok(summarised.client.get(S, {"userId": "u1", "projectId": "p1"}))["summaries"]
    assert {s["layer"]: s["stale"] for s in listed} == {"user": False, "project": True}
    with tenant_scope(summarised.ctx):
        scope = SummaryScope.objects.get(layer="project", scope_key="projectId=p1")
    assert scope.pending_since is not None and scope.trigger == "stale"


def test_it_flags_a_summary_invalidated_when_a_cited_source_is_deleted(
        summarised: TenantFixture) -> None:
    cited = ok(summarised.client.get(f"{S}/user", {"userId": "u1"}))["summary"]["sourceIds"][0]
    assert summarised.client.delete(f"/api/v1/memories/{cited}").status_code == 200
    got = ok(summarised.client.get(f"{S}/user", {"userId": "u1"}))["summary"]
    assert got["stale"] is True and "invalidated" in got["reasons"]


# --- regeneration ---------------------------------------------------------------------------

def test_regenerate_queues_a_high_priority_job(summarised: TenantFixture) -> None:
    response = summarised.client.post(f"{S}/regenerate", {
        "layer": "project", "identifiers": {"projectId": "p1"}}, format="json")
    data = ok(response, 202)
    assert set(data) == {"scope", "layer", "pendingSince", "priority"}
    assert (data["scope"], data["layer"], data["priority"]) == ("projectId=p1", "project", "high")
    datetime.fromisoformat(data["pendingSince"].replace("Z", "+00:00"))
    with tenant_scope(summarised.ctx):
        scope = SummaryScope.objects.get(layer="project", scope_key="projectId=p1")
        jobs = list(QueuedJob.objects.filter(task=REGENERATE_TASK))
    assert scope.pending_since is not None and scope.priority == Priority.HIGH
    assert scope.trigger == "manual"
    assert [job.args for job in jobs] == [[str(summarised.tenant.pk), str(scope.pk)]]


def test_the_queued_job_writes_the_summaries(tenant_a: TenantFixture) -> None:
    for text in PROJECT:
        tenant_a.add(text, layer="project", identifiers={"projectId": "p2"})
    assert ok(tenant_a.client.get(f"{S}/project", {"projectId": "p2"})) == {"summary": None}
    ok(tenant_a.client.post(f"{S}/regenerate", {"layer": "project",
                                                "identifiers": {"projectId": "p2"}},
                            format="json"), 202)
    with tenant_scope(tenant_a.ctx):
        job = QueuedJob.objects.get(task=REGENERATE_TASK)
        assert summary_regenerate(tenant_a.ctx, scope_id=job.args[1]) == {"summaries": 3}
    got = ok(tenant_a.client.get(f"{S}/project", {"projectId": "p2"}))["summary"]
    assert got["trigger"] == "manual" and got["stale"] is False


def test_regenerate_refuses_bad_bodies(tenant_a: TenantFixture) -> None:
    def send(data: Any, url: str = f"{S}/regenerate") -> Any:
        return tenant_a.client.post(url, data, format="json")

    assert_error(send({"layer": "galaxy", "identifiers": {}}), 400, "INVALID_LAYER")
    error = assert_error(send({"layer": "project", "identifiers": {}}), 400,
                         "MISSING_IDENTIFIER")
    assert error["details"]["missing"] == ["projectId"]
    assert_error(send({"layer": "agent", "identifiers": {"userId": "u1"}}), 400,
                 "MISSING_IDENTIFIER")
    for identifiers in (["p1"], "p1", [], 0):
        assert_error(send({"layer": "project", "identifiers": identifiers}), 400,
                     "INVALID_INPUT")
    assert_error(send({"identifiers": {"projectId": "p1"}}), 400, "INVALID_INPUT")
    assert_error(send({"layer": "project", "identifiers": {"projectId": ""}}), 400)
    assert_error(send({"layer": "project", "identifiers": {"projectId": "p1"}},
                      f"{S}/regenerate?force=1"), 400, "INVALID_INPUT")
    with tenant_scope(tenant_a.ctx):
        assert not QueuedJob.objects.filter(task=REGENERATE_TASK).exists()


def test_regenerate_answers_a_spent_budget_with_429(tenant_a: TenantFixture,
                                                    settings: Any) -> None:
    settings.SUMMARY_GENERATOR = "llm"
    with tenant_scope(tenant_a.ctx):
        tenant_services.tenant_settings_update(tenant_a.ctx, patch={
            "summaries": {"budget": {"tokens": 0}}})
    response = tenant_a.client.post(f"{S}/regenerate", {
        "layer": "project", "identifiers": {"projectId": "p1"}}, format="json")
    error = assert_error(response, 429, "BUDGET_EXCEEDED")
    assert error["retryable"] is True and response["Retry-After"]
    with tenant_scope(tenant_a.ctx):
        assert not QueuedJob.objects.filter(task=REGENERATE_TASK).exists()


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "code"), [
    (f"{S}/galaxy?projectId=p1", "INVALID_LAYER"),
    (f"{S}/project?projectId=p1&depth=huge", "INVALID_INPUT"),
    (f"{S}/project?projectId=p1&depth=", "INVALID_INPUT"),
    (f"{S}/project?projectId=p1&depth=sentence&depth=detailed", "INVALID_INPUT"),
    (f"{S}/project?userId=u1", "MISSING_IDENTIFIER"),
    (f"{S}/session?sessionId=s1", "MISSING_IDENTIFIER"),
    (f"{S}/project?projectId=p1&layer=team", "INVALID_INPUT"),
    (f"{S}/project?projectId=p1&projectId=p2", "INVALID_INPUT"),
    (f"{S}/project?projectId=%20", "INVALID_INPUT"),
    (f"{S}/project?projectId=a%00b", "INVALID_INPUT"),
    (f"{S}/project?projectId={'p' * 300}", "INVALID_INPUT"),
    (f"{S}/company?companyId=someone-else", "INVALID_INPUT"),
    (f"{S}?projectId=p1&depth=huge", "INVALID_INPUT"),
    (f"{S}?projectId=p1&depth=sentence,", "INVALID_INPUT"),
    (f"{S}?projectId=p1&limit=5", "INVALID_INPUT"),
    (f"{S}?teamId=t1&teamId=t2", "INVALID_INPUT"),
    (f"{S}?unknownId=x", "INVALID_INPUT"),
])
def test_it_answers_bad_input_with_the_envelope(summarised: TenantFixture, url: str,
                                                code: str) -> None:
    error = assert_error(summarised.client.get(url), 400, code)
    if "depth=huge" in url:
        assert error["details"]["allowed"] == ["sentence", "paragraph", "detailed"]


def test_other_methods_are_not_allowed(tenant_a: TenantFixture) -> None:
    c = tenant_a.client
    assert_error(c.post(S, {}, format="json"), 405, "METHOD_NOT_ALLOWED")
    assert_error(c.delete(f"{S}/project?projectId=p1"), 405, "METHOD_NOT_ALLOWED")
    assert_error(c.get(f"{S}/regenerate"), 405, "METHOD_NOT_ALLOWED")


# --- roles and restricted keys --------------------------------------------------------------

def test_a_reader_key_reads_but_may_not_regenerate(summarised: TenantFixture) -> None:
    _, reader = new_key(summarised, roles=["reader"])
    assert ok(reader.get(S, {"projectId": "p1"}))["summaries"]
    assert ok(reader.get(f"{S}/project", {"projectId": "p1"}))["summary"]
    assert ok(reader.post("/api/v1/context", {"identifiers": {"projectId": "p1"}},
                          format="json"))["tokenCount"] > 0
    error = assert_error(reader.post(f"{S}/regenerate", {
        "layer": "project", "identifiers": {"projectId": "p1"}}, format="json"), 403,
        "UNAUTHORIZED")
    assert error["details"]["operation"] == "summary.regenerate"
    assert "writer" in error["details"]["requiredRoles"]
    with tenant_scope(summarised.ctx):
        assert not QueuedJob.objects.filter(task=REGENERATE_TASK).exists()


def test_a_writer_key_may_regenerate(summarised: TenantFixture) -> None:
    _, writer = new_key(summarised, roles=["writer"])
    ok(writer.post(f"{S}/regenerate", {"layer": "user", "identifiers": {"userId": "u1"}},
                   format="json"), 202)


def test_a_restricted_key_sees_only_its_layers_and_pins(summarised: TenantFixture) -> None:
    _, restricted = new_key(summarised, allowed_layers=["user"],
                            pinned_identifiers={"userId": "u1"})
    listed = ok(restricted.get(S, {"projectId": "p1"}))["summaries"]
    assert {s["layer"] for s in listed} == {"user"}
    assert {s["scope"] for s in listed} == {"userId=u1"}
    assert ok(restricted.get(f"{S}/user"))["summary"]["scope"] == "userId=u1"
    assert_error(restricted.get(f"{S}/project", {"projectId": "p1"}), 403, "UNAUTHORIZED")
    assert_error(restricted.get(S, {"userId": "u2"}), 403, "UNAUTHORIZED")
    assert_error(restricted.get(f"{S}/user", {"userId": "u2"}), 403, "UNAUTHORIZED")
    error = assert_error(restricted.post(f"{S}/regenerate", {
        "layer": "user", "identifiers": {"userId": "u1"}}, format="json"), 403, "UNAUTHORIZED")
    assert error["details"]["operation"] == "summary.regenerate"


# --- personalization ------------------------------------------------------------------------

def test_a_personalized_layer_answers_the_users_own_summary(summarised: TenantFixture) -> None:
    with tenant_scope(summarised.ctx):
        tenant_services.tenant_settings_update(summarised.ctx, patch={
            "summaries": {"layers": {"project": {"personalize": "user"}}}})
    personal = scope_for(Layer.PROJECT, LayerIdentifiers(projectId="p1"), ("userId", "u1"))
    generate(summarised, personal)
    mine = ok(summarised.client.get(f"{S}/project", {"projectId": "p1", "userId": "u1"}))
    assert mine["summary"]["personalized"] is True
    assert mine["summary"]["personalizationContext"] == {"userId": "u1"}
    shared = ok(summarised.client.get(f"{S}/project", {"projectId": "p1", "userId": "u9"}))
    assert shared["summary"]["personalized"] is False
    queued = ok(summarised.client.post(f"{S}/regenerate", {
        "layer": "project", "identifiers": {"projectId": "p1", "userId": "u9"}},
        format="json"), 202)
    assert queued["scope"] == "projectId=p1" and queued["priority"] == "high"
    with tenant_scope(summarised.ctx):
        wanted = SummaryScope.objects.get(scope_key="projectId=p1", personal_key="userId=u9")
        job = QueuedJob.objects.get(task=REGENERATE_TASK)
    assert (wanted.priority, wanted.trigger) == (Priority.HIGH, "manual")
    assert job.args == [str(summarised.tenant.pk), str(wanted.pk)]


# --- another tenant -------------------------------------------------------------------------

def test_another_tenants_summaries_are_never_served(summarised: TenantFixture,
                                                    tenant_b: TenantFixture) -> None:
    for text in ("Globex builds rockets in Texas.", "Globex hires ten engineers."):
        tenant_b.add(text, layer="project", identifiers={"projectId": "p1"})
    generate(tenant_b, project_scope())
    mine = ok(summarised.client.get(f"{S}/project", {"projectId": "p1", "depth": "detailed"}))
    assert "Globex" not in mine["summary"]["content"]
    theirs = ok(tenant_b.client.get(f"{S}/project", {"projectId": "p1", "depth": "detailed"}))
    assert "Globex" in theirs["summary"]["content"]
    assert mine["summary"]["id"] != theirs["summary"]["id"]
    assert ok(tenant_b.client.get(f"{S}/user", {"userId": "u1"})) == {"summary": None}


def test_another_tenant_reaches_its_own_summaries_on_the_cross_tenant_routes(
        tenant_b: TenantFixture) -> None:
    """The cross-tenant cases (``tests/cross_tenant_summaries.py``) are not vacuous."""
    cross_tenant_summaries.check_own_summaries(
        tenant_b, populate_b(tenant_b), lambda c, url, data: c.post(url, data, format="json"))
