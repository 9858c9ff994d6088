"""Admin pages in a real browser: the audit log, review context, and platform admins'
tenant management (fixtures: ``tests/console/conftest.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.console.browser_helpers import BROWSER_TEST, shot, sign_in
from tests.console_helpers import (
    blocked_promotion,
    console_user,
    platform_admin,
    policy,
    policy_hit,
)

pytestmark = BROWSER_TEST


def test_an_admin_filters_the_audit_log_and_exports_it(live_server: Any, page: Page,
                                                       tenant_a: Any, tenant_b: Any) -> None:
    """The console's audit log page: filter by action and actor, export the filtered set;
    another tenant's log answers 404."""
    base = live_server.url
    policy(tenant_a, "no codenames")
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    page.click("text=Audit log")
    expect(page.locator("#audit-list")).to_contain_text("policy_created")
    page.select_option("#id_action", "policy_created")
    page.fill("#id_actor", "system")
    page.click("#audit-filter")
    expect(page.locator("#audit-count")).to_contain_text("of 1")
    with page.expect_download() as download:
        page.click("#export-csv")
    exported = Path(download.value.path()).read_text()
    assert exported.splitlines()[0] == "createdAt,actor,action,targetType,targetId,details"
    assert len(exported.splitlines()) == 2 and "policy_created" in exported
    shot(page, "audit-log")
    response = page.goto(f"{base}/console/t/{tenant_b.tenant.slug}/audit/")
    assert response is not None and response.status == 404


def test_a_reviewer_sees_who_wrote_an_item_whose_it_is_and_what_was_caught(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """Review context: the key that wrote a refused write (or asked for a promotion), the
    identifiers of whose memory it is, and what the policy caught."""
    base, slug = live_server.url, tenant_a.tenant.slug
    hit = policy_hit(tenant_a, "Project bluebird ships in May")
    blocked = blocked_promotion(tenant_a, "Alice's card is 4111 1111 1111 1111", "s7")
    console_user(tenant_a, "rita", "reviewer")
    sign_in(page, base, "rita")
    expect(page.locator(f"#review-{hit.pk} .review-context")).to_contain_text("api_key:")
    page.goto(f"{base}/console/t/{slug}/reviews/{hit.pk}/")
    expect(page.locator("#review-writer")).to_contain_text("api_key:")
    expect(page.locator("#review-identifiers")).to_contain_text("userId: u1")
    expect(page.locator("#review-item")).to_contain_text("What the policy caught")
    expect(page.locator("#review-item")).to_contain_text("bluebird")
    page.goto(f"{base}/console/t/{slug}/reviews/{blocked.pk}/")
    expect(page.locator("#review-identifiers")).to_contain_text("sessionId: s7")
    expect(page.locator("#review-writer")).to_contain_text("asked for the promotion")


def test_a_platform_admin_creates_and_deactivates_a_tenant(live_server: Any, page: Page,
                                                           tenant_a: Any) -> None:
    """Platform admin: create a tenant (its first admin key shown once), deactivate it after
    confirming, reactivate it."""
    base = live_server.url
    platform_admin()
    sign_in(page, base, "root")
    page.fill("#tenant-name", "Initech")
    page.click("#create-tenant")
    expect(page.locator("#new-tenant-key")).to_contain_text("msk_")
    expect(page.locator("#tenant-initech")).to_contain_text("Initech")
    page.reload()
    expect(page.locator("#new-tenant-key")).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#tenant-initech .deactivate").click()
    expect(page.locator("#tenant-initech .active")).to_have_text("no")
    page.locator("#tenant-initech .reactivate").click()
    expect(page.locator("#tenant-initech .active")).to_have_text("yes")
    shot(page, "tenants")
