"""The console's layer summaries: the list of scopes, a scope's depths with every sentence's
sources and freshness, "Regenerate now" (queued, audited, refused for a reviewer, a spent
budget shown as a message), another tenant's scope answering like a missing one, the context
preview (what an agent would receive; bad input on the form), the summarization budget on
the language-model page and the summary triggers on the settings page. The browser test
runs the context preview in Chromium."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape
from playwright.sync_api import Page, expect

from jobs.models import QueuedJob
from memories.models import Memory
from summaries.config import summary_settings
from summaries.context import ContextRequest, context_assemble
from summaries.generation import summary_generate
from summaries.models import LayerSummary, Priority, SummaryScope
from summaries.scopes import scope_for
from summaries.services import REGENERATE_TASK
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers
from tenants.models import Tenant
from tests.console.browser_helpers import BROWSER_TEST, shot, sign_in
from tests.console_helpers import MISSING, audit_actions, console_user, platform_admin

pytestmark = pytest.mark.django_db

TEXTS = ("Maria moved to Lisbon last spring.", "The Falcon project ships in May.",
         "Maria adopted a cat named Pixel.", "Jon fixed the memory leak in Falcon.")


def url(tenant: Any, path: str = "") -> str:
    return f"/console/t/{tenant.tenant.slug}/{path}"


def text(response: Any) -> str:
    """The page, without the CSRF tokens (new on every page)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode())


def rows(response: Any, table: str) -> list[list[str]]:
    """The cells (tags stripped) of each body row of the table ``#table``."""
    markup = text(response).split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    body = markup.split("<tbody>", 1)[1]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def summarise(tenant: Any, project: str = "p1", texts: tuple[str, ...] = TEXTS
              ) -> tuple[SummaryScope, list[Memory]]:
    """``texts`` stored in project ``project`` of ``tenant``, and the project's summaries
    generated; returns the scope row and the memories."""
    memories = [tenant.add(t, layer="project", identifiers={"projectId": project})
                for t in texts]
    with tenant_scope(tenant.ctx):
        summary_generate(tenant.ctx, scope=scope_for(
            Layer.PROJECT, LayerIdentifiers(projectId=project)), trigger="manual")
        row = SummaryScope.objects.get(layer="project", scope_key=f"projectId={project}",
                                       personal_key="")
    return row, memories


def browser_test(test: Callable[..., None]) -> Callable[..., None]:
    """The browser tests' marks (:data:`BROWSER_TEST`) on one test of this module."""
    for mark in BROWSER_TEST:
        test = mark(test)
    return test


def test_the_list_shows_every_scope_of_the_tenant_with_its_state(
        tenant_a: Any, tenant_b: Any, admin: Client) -> None:
    row, _ = summarise(tenant_a)
    tenant_a.add("Alice prefers tea", layer="user")  # a scope with a change, never generated
    summarise(tenant_b, project="globex-secret")
    response = admin.get(url(tenant_a, "summaries/"))
    assert response.status_code == 200
    table = {r[1]: r for r in rows(response, "summary-scopes")}
    assert set(table) == {"projectId=p1", "userId=u1"}
    project = table["projectId=p1"]
    assert project[0] == "project" and project[2] == "—"
    assert project[3].endswith("UTC") and project[4] == "0" and project[5] == "—"
    assert table["userId=u1"][3] == "never" and table["userId=u1"][4] == "1"
    assert f'href="{url(tenant_a, f"summaries/{row.pk}/")}"' in text(response)
    assert "globex-secret" not in text(response)
    assert f'href="{url(tenant_a, "summaries/")}">Summaries</a>' in text(response)
    only = admin.get(url(tenant_a, "summaries/"), {"layer": "project"})
    assert [r[1] for r in rows(only, "summary-scopes")] == ["projectId=p1"]
    unknown = admin.get(url(tenant_a, "summaries/"), {"layer": "galaxy"})
    assert unknown.status_code == 200 and len(rows(unknown, "summary-scopes")) == 2


def test_the_detail_shows_each_depth_with_its_sentences_and_their_sources(
        tenant_a: Any, admin: Client) -> None:
    row, memories = summarise(tenant_a)
    by_id = {str(m.pk): m for m in memories}
    with CaptureQueriesContext(connection) as queries:
        response = admin.get(url(tenant_a, f"summaries/{row.pk}/"))
    assert response.status_code == 200
    page = text(response)
    with tenant_scope(tenant_a.ctx):
        stored = {s.depth: s for s in LayerSummary.objects.filter(scope=row)}
    assert set(stored) == {"sentence", "paragraph", "detailed"}
    for depth, summary in stored.items():
        panel = page.split(f'id="depth-{depth}"', 1)[1].split("</section>", 1)[0]
        assert f'<td class="tokens">{summary.token_count}</td>' in panel
        assert "offline:extractive" in panel and 'class="badge fresh"' in panel
        for sentence in summary.sentences:
            assert escape(sentence["text"]) in panel
            for source in sentence["sourceIds"]:
                assert f'href="{url(tenant_a, f"memories/{source}/")}"' in panel
                assert escape(by_id[source].content) in panel
    lookups = [q["sql"] for q in queries.captured_queries
               if 'FROM "memories_memory"' in q["sql"] and '"memories_memory"."id" IN' in q["sql"]]
    assert len(lookups) == 1, lookups
    tenant_a.add("Maria started a pottery class.", layer="project",
                 identifiers={"projectId": "p1"})
    stale = text(admin.get(url(tenant_a, f"summaries/{row.pk}/")))
    assert 'class="badge stale"' in stale and "its sources changed" in stale
    assert "needs regeneration" in stale


def test_another_tenants_scope_answers_like_a_missing_one(
        tenant_a: Any, tenant_b: Any, admin: Client) -> None:
    summarise(tenant_a)
    theirs, _ = summarise(tenant_b, project="globex-secret")
    answers = [admin.get(url(tenant_a, f"summaries/{pk}/"))
               for pk in (theirs.pk, MISSING, uuid.uuid4())]
    assert {r.status_code for r in answers} == {404}
    assert len({text(r) for r in answers}) == 1
    assert "globex-secret" not in text(answers[0]) and "Falcon" not in text(answers[0])
    assert admin.get(url(tenant_a, "summaries/not-an-id/")).status_code == 404
    refused = admin.post(url(tenant_a, f"summaries/{theirs.pk}/regenerate/"))
    assert refused.status_code == 404 and text(refused) == text(answers[0])
    with tenant_scope(tenant_b.ctx):
        assert not QueuedJob.objects.filter(task=REGENERATE_TASK).exists()
        assert SummaryScope.objects.get(pk=theirs.pk).pending_since is None


def test_regenerate_now_queues_a_job_and_redirects(tenant_a: Any, admin: Client) -> None:
    row, _ = summarise(tenant_a)
    detail = url(tenant_a, f"summaries/{row.pk}/")
    assert 'id="regenerate-button"' in text(admin.get(detail))
    assert admin.get(url(tenant_a, f"summaries/{row.pk}/regenerate/")).status_code == 405
    response = admin.post(url(tenant_a, f"summaries/{row.pk}/regenerate/"))
    assert response.status_code == 302 and response["Location"] == detail
    with tenant_scope(tenant_a.ctx):
        job = QueuedJob.objects.get(task=REGENERATE_TASK)
        pending = SummaryScope.objects.get(pk=row.pk)
    assert job.task == REGENERATE_TASK
    assert job.args == [str(tenant_a.tenant.pk), str(row.pk)]
    assert pending.pending_since is not None and pending.priority == Priority.HIGH
    assert pending.trigger == "manual"
    after = admin.get(detail)
    assert "Regeneration queued" in text(after)
    assert "high priority (manual)" in text(after)
    assert ("summary_regeneration_requested", "user:alice") in audit_actions(tenant_a)


def test_a_reviewer_is_refused_and_a_platform_admin_may_look(tenant_a: Any) -> None:
    row, _ = summarise(tenant_a)
    reviewer = Client()
    reviewer.force_login(console_user(tenant_a, "rita", "reviewer"))
    for path in ("summaries/", f"summaries/{row.pk}/", "context/?projectId=p1"):
        refused = reviewer.get(url(tenant_a, path))
        assert refused.status_code == 403, path
        assert "Regenerate now" not in text(refused) and "Falcon" not in text(refused)
    assert reviewer.post(url(tenant_a, f"summaries/{row.pk}/regenerate/")).status_code == 403
    with tenant_scope(tenant_a.ctx):
        assert not QueuedJob.objects.filter(task=REGENERATE_TASK).exists()
    assert "Summaries</a>" not in text(reviewer.get(url(tenant_a, "reviews/")))
    root = Client()
    root.force_login(platform_admin())
    assert root.get(url(tenant_a, f"summaries/{row.pk}/")).status_code == 200


def test_a_spent_summarization_budget_is_a_message_on_the_page(
        tenant_a: Any, admin: Client, settings: Any) -> None:
    row, _ = summarise(tenant_a)
    settings.SUMMARY_GENERATOR = "llm"
    assert tenant_a.client.patch("/api/v1/settings", {"summaries": {"budget": {"tokens": 0}}},
                                 format="json").status_code == 200
    response = admin.post(url(tenant_a, f"summaries/{row.pk}/regenerate/"), follow=True)
    assert response.status_code == 200
    assert "summarization budget (tokens) of this month is spent" in text(response)
    with tenant_scope(tenant_a.ctx):
        assert not QueuedJob.objects.filter(task=REGENERATE_TASK).exists()


def test_the_context_preview_shows_what_an_agent_would_receive(
        tenant_a: Any, admin: Client) -> None:
    summarise(tenant_a)
    page = admin.get(url(tenant_a, "context/"))
    assert page.status_code == 200 and 'value="2000"' in text(page)
    assert 'id="context-result"' not in text(page)
    params = {"projectId": "p1", "query": "Where does Maria live?", "budget": "300"}
    response = admin.get(url(tenant_a, "context/"), params)
    assert response.status_code == 200
    preview = response.context["preview"]
    with tenant_scope(tenant_a.ctx):
        expected = context_assemble(tenant_a.ctx, ContextRequest(
            identifiers=LayerIdentifiers(projectId="p1"), query="Where does Maria live?",
            budget=300))
        assert preview["markdown"] == expected.markdown()
        assert set(Memory.objects.values_list("reference_count", flat=True)) == {0}
    body = text(response)
    assert f'<pre id="context-markdown">{escape(expected.markdown())}</pre>' in body
    assert f'<span id="context-tokens">{expected.token_count}</span>' in body
    assert 0 < expected.token_count <= 300
    assert rows(response, "layer-scores")[0][:2] == ["project", "projectId=p1"]
    for memory_id in expected.memory_ids:
        assert f'href="{url(tenant_a, f"memories/{memory_id}/")}"' in body
    whole = admin.get(url(tenant_a, "context/"), {"projectId": "p1", "depth": "sentence"})
    assert whole.status_code == 200
    assert "### Project p1 (sentence summary)" in text(whole)
    assert rows(whole, "layer-scores")[0][3] == "sentence"


def test_the_context_preview_shows_when_each_memory_occurred(
        tenant_a: Any, admin: Client) -> None:
    said = datetime(2023, 10, 13, 10, 31, tzinfo=UTC)
    dated = tenant_a.add("Maria showed the sunset painting she did last week.",
                         layer="project", identifiers={"projectId": "p1"}, occurred_at=said)
    undated = tenant_a.add("Maria keeps her paints in the garage.", layer="project",
                           identifiers={"projectId": "p1"})
    response = admin.get(url(tenant_a, "context/"), {"projectId": "p1", "query": "Maria paint"})
    assert response.status_code == 200
    occurred = {row[0]: row[4] for row in rows(response, "included-memories")}
    assert occurred == {str(dated.pk): "13 Oct 2023", str(undated.pk): "—"}
    assert "- [13 Oct 2023] Maria showed the sunset painting" in response.context[
        "preview"]["markdown"]


@pytest.mark.parametrize(("params", "said"), [
    ({"budget": "0"}, "budget must be an integer number of tokens within 50..32000."),
    ({"budget": "40000"}, "budget must be an integer number of tokens within 50..32000."),
    ({"budget": "lots"}, "Enter a whole number."),
    ({"depth": "huge"}, "Unknown depth 'huge'."),
    ({"companyId": "globex"}, "companyId must be the authenticated tenant"),
    ({"query": "x" * 2001}, "query has 2001 characters; the limit is 2000."),
])
def test_bad_preview_input_is_shown_on_the_form(tenant_a: Any, admin: Client,
                                                params: dict[str, str], said: str) -> None:
    summarise(tenant_a)
    response = admin.get(url(tenant_a, "context/"), {"projectId": "p1", **params})
    assert response.status_code == 200
    body = text(response)
    assert 'id="context-errors"' in body and escape(said) in body
    assert 'id="context-result"' not in body and 'id="context-form"' in body


def test_the_language_model_page_shows_the_summarization_budget(
        tenant_a: Any, admin: Client) -> None:
    from llm.services import usage_record

    assert tenant_a.client.patch("/api/v1/settings", {"summaries": {"budget": {
        "tokens": 500000, "cost": 5.0}}}, format="json").status_code == 200
    with tenant_scope(tenant_a.ctx):
        usage_record(tenant_a.ctx, purpose="summarize", model="local", outcome="ok",
                     prompt_tokens=1000, completion_tokens=234)
        usage_record(tenant_a.ctx, purpose="graph", model="local", outcome="ok",
                     prompt_tokens=50, completion_tokens=50)
    response = admin.get(url(tenant_a, "llm/"))
    assert response.status_code == 200
    line = re.sub(r"<[^>]+>", "", text(response).split('id="summary-budget"', 1)[1]
                  .split("</p>", 1)[0])
    assert "Summarization: 1,234 of 500,000 tokens this month, $0.0000 of $5.00" in line
    unset = Client()
    unset.force_login(platform_admin())
    assert tenant_a.client.patch("/api/v1/settings", {"summaries": {"budget": None}},
                                 format="json").status_code == 200
    plain = text(unset.get(url(tenant_a, "llm/")))
    assert "1,234</strong> tokens this month" in plain and "no summarization budget" in plain


def test_the_summary_triggers_are_saved_per_layer_and_checked(
        tenant_a: Any, admin: Client) -> None:
    assert tenant_a.client.patch("/api/v1/settings", {"summaries": {"budget": {
        "tokens": 1000}}}, format="json").status_code == 200
    page = admin.get(url(tenant_a, "settings/"))
    assert page.status_code == 200 and 'id="summary-triggers-table"' in text(page)
    assert [r[0] for r in rows(page, "summary-triggers-table")] == [
        "default", "agent", "user", "session", "project", "team", "org", "company"]
    saved = admin.post(url(tenant_a, "settings/summaries/"), {
        "project__updateOnChanges": "3", "project__personalize": "user",
        "default__updateInterval": "7200", "company__depths": "sentence, detailed",
        "company__enabled": "false", "batchWindowSeconds": "120"})
    assert saved.status_code == 302
    assert saved["Location"] == url(tenant_a, "settings/") + "#summary-triggers"
    stored = Tenant.objects.get(pk=tenant_a.tenant.pk).settings["summaries"]
    assert stored["layers"] == {"project": {"updateOnChanges": 3, "personalize": "user"},
                                "default": {"updateInterval": 7200},
                                "company": {"depths": ["sentence", "detailed"],
                                            "enabled": False}}
    assert stored["batchWindowSeconds"] == 120 and stored["budget"] == {"tokens": 1000}
    with tenant_scope(tenant_a.ctx):
        parsed = summary_settings(tenant_a.ctx)
    assert parsed.for_layer("project").update_on_changes == 3
    assert parsed.for_layer("project").update_interval == 7200
    assert parsed.for_layer("team").update_on_changes == 10
    assert ("settings_updated", "user:alice") in audit_actions(tenant_a)
    shown = admin.get(url(tenant_a, "settings/"))
    assert shown.context["triggers"]["project__updateOnChanges"].value() == "3"
    assert shown.context["triggers"]["company__depths"].value() == "sentence, detailed"
    for value, said in (("-1", "summaries.layers.project.updateOnChanges must be an integer"),
                        ("many", "summaries.layers.project.updateOnChanges must be an integer")):
        bad = admin.post(url(tenant_a, "settings/summaries/"),
                         {"project__updateOnChanges": value})
        assert bad.status_code == 400
        body = text(bad)
        assert escape(said) in body.split('id="summary-triggers-errors"', 1)[1]
        cell = body.split('id="triggers-project"', 1)[1].split("</tr>", 1)[0]
        assert 'class="errorlist' in cell and escape(said) in cell
    depths = admin.post(url(tenant_a, "settings/summaries/"), {"user__depths": "tiny"})
    assert depths.status_code == 400
    assert "summaries.layers.user.depths must list" in text(depths)
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).settings["summaries"] == stored


@browser_test
def test_the_context_preview_in_a_browser(live_server: Any, page: Page, tenant_a: Any) -> None:
    """In Chromium: from the Summaries tab to the context preview, a query for project p1,
    the Markdown and its token count shown; screenshot."""
    base, slug = live_server.url, tenant_a.tenant.slug
    summarise(tenant_a)
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    page.goto(f"{base}/console/t/{slug}/")
    page.click(".console-tabs >> text=Summaries")
    expect(page.locator("#summary-scopes")).to_contain_text("projectId=p1")
    page.click("#context-preview-link")
    page.fill("#id_projectId", "p1")
    page.fill("#id_query", "Where does Maria live?")
    page.fill("#id_budget", "400")
    page.click("#context-submit")
    expect(page.locator("#context-markdown")).to_contain_text("Maria")
    tokens = int(page.locator("#context-tokens").text_content() or "0")
    assert 0 < tokens <= 400
    expect(page.locator("#context-budget")).to_have_text("400")
    expect(page.locator("#layer-scores")).to_contain_text("projectId=p1")
    shot(page, "context-preview")

