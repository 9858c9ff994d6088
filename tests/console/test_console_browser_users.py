"""Console users in a real browser: a platform admin creates a reviewer for a tenant, and the
reviewer signs in to that tenant's review queue (fixtures: ``tests/console/conftest.py``)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.console.browser_helpers import BROWSER_TEST, shot, sign_in
from tests.console_helpers import PASSWORD, platform_admin

pytestmark = BROWSER_TEST


def test_a_platform_admin_creates_a_reviewer_who_signs_in_to_the_review_queue(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """From the tenant list to ``/console/users/``, create ``rita`` (reviewer of Acme), sign
    out; rita signs in and lands on Acme's review queue."""
    base, slug = live_server.url, tenant_a.tenant.slug
    platform_admin()
    sign_in(page, base, "root")
    page.click("#console-users-link")
    expect(page.locator("#user-list")).to_contain_text("root")
    page.fill("#new-username", "rita")
    page.fill("#new-email", "rita@example.com")
    page.fill("#new-password", PASSWORD)
    page.select_option("#new-role", "reviewer")
    page.select_option("#new-tenant", slug)
    page.click("#create-user")
    expect(page.locator(".messagelist")).to_contain_text("Console user rita created.")
    expect(page.locator("#user-rita .tenant")).to_have_text("Acme")
    expect(page.locator("#user-rita .role")).to_have_text("reviewer")
    shot(page, "console-users")
    page.click("#logout-form button")
    expect(page).to_have_url(re.compile(r"/console/login/"))
    sign_in(page, base, "rita")
    expect(page).to_have_url(re.compile(rf"/console/t/{slug}/reviews/$"))
    expect(page.locator("#user-tools")).to_contain_text("reviewer")
