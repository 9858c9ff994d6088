"""The console in a real browser: Playwright for Python driving Debian's Chromium against the
live server. Each role signs in through the login form; the tenant admin searches, opens a
memory, tries and saves a policy and gets 404 for another tenant's URL; the reviewer approves
and rejects; the platform admin opens every tenant. A screenshot of each main page is saved
under ``test-artifacts/screenshots/``. Fixtures: ``tests/console/conftest.py``.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from governance.models import ReviewItem, ReviewStatus
from tenants.context import tenant_scope
from tests.console.browser_helpers import BROWSER_TEST, shot, sign_in
from tests.console_helpers import (
    blocked_promotion,
    console_user,
    platform_admin,
    policy_hit,
)

pytestmark = BROWSER_TEST


def test_a_tenant_admin_searches_opens_a_memory_tries_a_policy_and_is_kept_out_of_others(
        live_server: Any, page: Page, tenant_a: Any, tenant_b: Any) -> None:
    base, slug_a, slug_b = live_server.url, tenant_a.tenant.slug, tenant_b.tenant.slug
    tenant_a.add("Alice drinks green tea every morning", metadata={"topic": "drinks"})
    tenant_a.add("The deploy runs on Fridays")
    tenant_a.add("Quarterly goals live in the company wiki", layer="company",
                 identifiers={"companyId": slug_a}, kind="rule")
    foreign = tenant_b.add("Globex secret roadmap")
    blocked_promotion(tenant_a, "Alice's phone is 212-555-0199")
    console_user(tenant_a, "alice", "admin")

    sign_in(page, base, "alice")
    assert page.url == f"{base}/console/t/{slug_a}/"
    page.wait_for_selector("body[data-charts-ready=true]")
    expect(page.locator("#blocked-promotions")).to_have_text("1")
    expect(page.locator("#total-memories")).to_have_text("4")
    shot(page, "dashboard")

    page.click("text=Memories")
    page.fill("#id_query", "green tea")
    page.select_option("#id_mode", "keyword")
    page.fill("#id_userId", "u1")
    page.click("#search-form input[type=submit]")
    first = page.locator("#search-results tbody tr").first
    expect(first).to_contain_text("Alice drinks green tea every morning")
    expect(first.locator("td.parts")).to_contain_text("keyword")
    shot(page, "memory-explorer")
    page.select_option("#id_mode", "recall")
    page.click("#search-form input[type=submit]")
    expect(page.locator("#search-results tbody tr").first.locator("td.parts")).to_contain_text(
        "recency")

    page.locator("#search-results a", has_text="green tea").first.click()
    expect(page.locator("#memory-content")).to_have_text("Alice drinks green tea every morning")
    expect(page.locator("#memory-history")).to_contain_text("add")
    page.fill("#id_metadata", '{"topic": "drinks", "checked": true}')
    page.click("#save-memory")
    expect(page.locator(".messagelist")).to_contain_text("Memory updated")
    expect(page.locator("#memory-metadata")).to_contain_text("checked")
    expect(page.locator("#memory-history")).to_contain_text("user:alice")
    shot(page, "memory-detail")

    page.click("text=Policies")
    page.click("#new-policy")
    page.fill("#id_name", "no codenames")
    page.fill("#id_denied_terms", "bluebird")
    page.select_option("#id_pii_handling", "redact")
    page.fill("#id_sample_text", "Ship bluebird and call 212-555-0199")
    page.click("#try-button")
    expect(page.locator("#try-verdict")).to_have_text("Denied")
    expect(page.locator("#try-violations")).to_contain_text("bluebird")
    expect(page.locator("#try-content")).to_contain_text("[REDACTED_PHONE]")
    expect(page.locator("#id_name")).to_have_value("no codenames")
    shot(page, "policy-editor")
    page.click("#save-policy")
    expect(page.locator(".messagelist")).to_contain_text("created")
    page.click("text=Policies")
    expect(page.locator("#policy-list")).to_contain_text("no codenames")

    page.click("text=Settings")
    page.fill("#key-name", "browser key")
    page.click("#create-key")
    expect(page.locator("#new-key")).to_have_text(re.compile(r"^msk_"))
    shot(page, "settings")
    page.fill("#id_default_threshold", "0.6")
    page.click("#save-settings")
    expect(page.locator(".messagelist")).to_contain_text("Settings saved")
    expect(page.locator("#id_default_threshold")).to_have_value("0.6")

    for path in ("", "memories/", "policies/", "reviews/", "settings/"):
        response = page.goto(f"{base}/console/t/{slug_b}/{path}")
        assert response is not None and response.status == 404, path
    response = page.goto(f"{base}/console/t/{slug_a}/memories/{foreign.pk}/")
    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("Not found")
    shot(page, "not-found-other-tenant")


def test_a_reviewer_approves_and_rejects_and_sees_only_the_queue(
        live_server: Any, page: Page, tenant_a: Any, tenant_b: Any) -> None:
    base, slug_a = live_server.url, tenant_a.tenant.slug
    hit = policy_hit(tenant_a, "Project bluebird ships in May")
    blocked = blocked_promotion(tenant_a, "Alice's card is 4111 1111 1111 1111")
    policy_hit(tenant_b, "Globex bluebird item")
    console_user(tenant_a, "rita", "reviewer")

    sign_in(page, base, "rita")
    assert page.url == f"{base}/console/t/{slug_a}/reviews/"
    expect(page.locator("#review-list tbody tr")).to_have_count(2)
    expect(page.locator(f"#review-{blocked.pk} .preview")).to_contain_text("[REDACTED_CARD]")
    shot(page, "review-queue")
    expect(page.locator(".console-tabs")).not_to_contain_text("Dashboard")

    page.fill(f"input[name='reason_{hit.pk}']", "codename must not be stored")
    page.locator(f"#review-{hit.pk} .reject-one").click()
    expect(page.locator(".messagelist")).to_contain_text("1 item(s) rejected")
    page.locator(f"#review-{blocked.pk} .approve-one").click()
    expect(page.locator(".messagelist")).to_contain_text("1 item(s) approved")
    page.goto(f"{base}/console/t/{slug_a}/reviews/?status=all")
    expect(page.locator(f"#review-{hit.pk} .decided")).to_contain_text("user:rita at")
    expect(page.locator(f"#review-{blocked.pk}")).to_contain_text("approved")
    shot(page, "review-decided")
    with tenant_scope(tenant_a.ctx):
        statuses = dict(ReviewItem.objects.values_list("pk", "status"))
    assert statuses == {hit.pk: ReviewStatus.REJECTED, blocked.pk: ReviewStatus.APPROVED}

    response = page.goto(f"{base}/console/t/{slug_a}/")
    assert response is not None and response.status == 403
    response = page.goto(f"{base}/console/t/{tenant_b.tenant.slug}/reviews/")
    assert response is not None and response.status == 404


def test_a_platform_admin_opens_every_tenant(live_server: Any, page: Page, tenant_a: Any,
                                             tenant_b: Any) -> None:
    base = live_server.url
    tenant_b.add("Globex keeps its books in euros")
    platform_admin("root")
    sign_in(page, base, "root")
    rows = page.locator("#tenant-list tbody tr")
    expect(rows).to_have_count(2)
    shot(page, "platform-tenants")
    page.locator("#tenant-list tr", has_text=tenant_b.tenant.name).locator(
        "text=memories").click()
    expect(page.locator("#recent-memories")).to_contain_text("Globex keeps its books in euros")
    response = page.goto(f"{base}/console/t/{tenant_a.tenant.slug}/")
    assert response is not None and response.status == 200
