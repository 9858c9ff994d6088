"""The console in a real browser: Playwright for Python driving Debian's Chromium against the
live server. Each role signs in through the login form; the tenant admin searches, opens a
memory, tries and saves a policy and gets 404 for another tenant's URL; the reviewer approves
and rejects; the platform admin opens every tenant. A screenshot of each main page is saved
under ``test-artifacts/screenshots/``.

Skipped, saying why, only where Chromium is missing (``.ci/run`` installs it).

The live server reads what the test commits, so these tests use a transactional database.
pytest-django empties it after each test with ``flush``; the app role may not TRUNCATE, so
for this module the ``default`` alias is declared a mirror of ``owner`` and the owner role
(which owns the tables) flushes.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governance.models import ReviewItem, ReviewStatus
from memories.models import Memory
from tenants.context import tenant_scope
from tenants.models import ApiKey, Tenant
from tests.console_helpers import (
    PASSWORD,
    blocked_promotion,
    console_user,
    platform_admin,
    policy,
    policy_hit,
)

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
    pytest.skip(f"Chromium not found at {CHROMIUM} (install Debian's `chromium` package or set "
                "CHROMIUM_PATH): browser tests skipped", allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.django_db(transaction=True,
                                    databases=["default", "owner", "platform"])]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module", autouse=True)
def orm_beside_playwright(owner_flushes: None) -> Iterator[None]:
    """Let the ORM run while Playwright's event loop exists in this thread (and the owner
    role flush, see ``owner_flushes``)."""
    previous_async = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous_async is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous_async


@pytest.fixture(scope="module")
def browser(orm_beside_playwright: None) -> Iterator[Browser]:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    yield tab
    context.close()


def sign_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/console/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_load_state()
    expect(page.locator("#user-tools")).to_contain_text(username)


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


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


def test_out_of_range_settings_and_policies_are_form_errors_and_keys_are_created_once(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """Console issue, broken items 1-4: an over-large policy length, idle period, retention
    or half-life is a form error on the console's page (never a 500 or the API's JSON), and
    reloading the page after "Create key" creates no second key."""
    base, slug = live_server.url, tenant_a.tenant.slug
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")

    page.goto(f"{base}/console/t/{slug}/policies/new/")
    page.fill("#id_name", "huge")
    page.fill("#id_max_content_length", "2147483648")
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.click("#save-policy")
    assert posted.value.status == 400
    expect(page.locator("#policy-form")).to_contain_text("2147483647")
    expect(page.locator("body")).not_to_contain_text('"error"')

    page.goto(f"{base}/console/t/{slug}/settings/")
    before = Tenant.objects.get(pk=tenant_a.tenant.pk).settings
    for field, value, said in (("#id_cleanup_retention", "99999999999999d", "retention"),
                               ("#id_deleted_retention_days", "5000000", "retention"),
                               ("#id_recency_half_life_days", "1e308", "alf")):
        page.goto(f"{base}/console/t/{slug}/settings/")
        page.fill(field, value)
        with page.expect_response(lambda r: r.request.method == "POST") as posted:
            page.click("#save-settings")
        assert posted.value.status == 400, (field, posted.value.status)
        expect(page.locator("#settings-form")).to_contain_text(said)
        expect(page.locator(".messagelist")).to_have_count(0)
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).settings == before

    page.goto(f"{base}/console/t/{slug}/settings/")
    keys_before = page.locator("#key-list tbody tr").count()
    page.fill("#key-name", "ci")
    page.click("#create-key")
    expect(page.locator("#new-key")).to_contain_text("msk_")
    page.reload()
    expect(page.locator("#new-key")).to_have_count(0)
    expect(page.locator("#key-list tbody tr")).to_have_count(keys_before + 1)
    with tenant_scope(tenant_a.ctx):
        assert ApiKey.objects.filter(name="ci").count() == 1


def test_review_items_of_deleted_memories_leave_the_queue_and_the_queue_pages(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """Console issue, broken items 5 and 8: an item whose memory was erased is closed (no
    blank preview, no dead link, out of the count); one whose memory was soft-deleted
    closes when approved, saying why; past 100 items the queue says how many and pages."""
    base, slug = live_server.url, tenant_a.tenant.slug
    erased = blocked_promotion(tenant_a, "Alice's card is 4111 1111 1111 1111", "s1")
    deleted = blocked_promotion(tenant_a, "Bob's phone is 212-555-0199", "s2")
    assert tenant_a.client.delete(f"/api/v1/memories/{erased.memory_id}?hard=true"
                                  ).status_code == 200
    assert tenant_a.client.delete(f"/api/v1/memories/{deleted.memory_id}").status_code == 200
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    expect(page.locator("#pending-reviews")).to_have_text("1")

    page.goto(f"{base}/console/t/{slug}/reviews/")
    expect(page.locator(f"#review-{erased.pk}")).to_have_count(0)
    page.locator(f"#review-{deleted.pk} .approve-one").click()
    expect(page.locator(".messagelist")).to_contain_text("1 item(s) closed: its memory no "
                                                         "longer exists")
    expect(page.locator("#review-list tbody tr[data-status=pending]")).to_have_count(0)
    page.goto(f"{base}/console/t/{slug}/reviews/?status=all")
    expect(page.locator(f"#review-{erased.pk} .decided")).to_contain_text("system:erasure")

    for i in range(106):
        policy_hit(tenant_a, f"Project bluebird note {i}")
    page.goto(f"{base}/console/t/{slug}/reviews/")
    expect(page.locator("#review-count")).to_contain_text("Items 1–100 of 106")
    expect(page.locator("#review-list tbody tr")).to_have_count(100)
    page.click("#review-next")
    expect(page.locator("#review-count")).to_contain_text("Items 101–106 of 106")
    expect(page.locator("#review-list tbody tr")).to_have_count(6)


def test_revoking_a_key_deleting_a_policy_or_a_memory_asks_first(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """Console issue, broken item 9: one click is not enough to destroy something."""
    base, slug = live_server.url, tenant_a.tenant.slug
    memory = tenant_a.add("The deploy runs on Fridays")
    saved = policy(tenant_a, "no secrets")
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    asked: list[str] = []

    def answer(accept: bool) -> None:
        page.once("dialog", lambda d: (asked.append(d.message), d.accept() if accept
                                       else d.dismiss()))

    page.goto(f"{base}/console/t/{slug}/settings/")
    answer(False)
    page.locator(".revoke-key").first.click()
    expect(page.locator("#key-list")).not_to_contain_text("revoked")
    assert "only active admin key" in asked[-1]
    answer(True)
    page.locator(".revoke-key").first.click()
    expect(page.locator("#key-list")).to_contain_text("revoked")

    page.goto(f"{base}/console/t/{slug}/policies/{saved.pk}/")
    answer(False)
    page.click("#delete-policy")
    answer(True)
    page.click("#delete-policy")
    expect(page.locator(".messagelist")).to_contain_text("deleted")
    page.goto(f"{base}/console/t/{slug}/memories/{memory.pk}/")
    answer(True)
    page.click("#delete-button")
    expect(page.locator(".messagelist")).to_contain_text("deleted")
    assert len(asked) == 5 and "Delete policy no secrets?" in asked[2]


def test_a_caught_secret_is_masked_in_the_preview_and_in_what_approving_stores(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """Console issue, broken item 6: a denied pattern's match (an ``sk-…`` token) is masked
    in the reviewer's preview, and approving stores the masked text, not the secret."""
    base = live_server.url
    policy(tenant_a, "no tokens", denied_terms=[], denied_patterns=[r"sk-[A-Za-z0-9]{16,}"])
    item = policy_hit(tenant_a, "Use the key sk-ABCDEFGHIJKLMNOPQRST for staging")
    console_user(tenant_a, "rita", "reviewer")
    sign_in(page, base, "rita")
    row = page.locator(f"#review-{item.pk}")
    expect(row.locator(".preview")).not_to_contain_text("sk-ABCDEFGHIJKLMNOPQRST")
    expect(row.locator(".preview")).to_contain_text("Use the key")
    row.locator(".approve-one").click()
    expect(page.locator(".messagelist")).to_contain_text("1 item(s) approved")
    with tenant_scope(tenant_a.ctx):
        stored = list(Memory.objects.values_list("content", flat=True))
    assert len(stored) == 1 and "sk-ABCDEFGHIJKLMNOPQRST" not in stored[0]


def test_error_pages_stay_in_the_console(live_server: Any, page: Page,
                                         tenant_a: Any) -> None:
    """Console issue, broken item 7: a reviewer's 403 and an unknown console URL are the
    console's own pages (its header, a way back), not a bare page or the API's JSON."""
    base, slug = live_server.url, tenant_a.tenant.slug
    console_user(tenant_a, "rita", "reviewer")
    sign_in(page, base, "rita")
    response = page.goto(f"{base}/console/t/{slug}/settings/")
    assert response is not None and response.status == 403
    expect(page.locator("#forbidden")).to_have_text("Not allowed")
    expect(page.locator("#user-tools")).to_contain_text("rita")
    response = page.goto(f"{base}/console/no-such-page/")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    expect(page.locator("h1")).to_have_text("Not found")
    expect(page.locator("body")).not_to_contain_text('"error"')


def test_the_console_says_what_went_wrong_and_what_changed_and_fits_a_phone(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """Console issue, broken item 10: explorer input errors are shown; the console's own
    searches are not the tenant's traffic; history shows what changed; "Try it" does not
    promise to store a refused write; times carry their zone; at 390 px only tables
    scroll sideways, not the page."""
    base, slug = live_server.url, tenant_a.tenant.slug
    memory = tenant_a.add("Alice drinks green tea", metadata={"topic": "drinks"})
    policy(tenant_a, "no codenames")
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    explorer = f"{base}/console/t/{slug}/memories/"
    for query, said in (("query=tea&limit=0", "Limit"), ("query=tea&mode=psychic", "Mode"),
                        ("query=tea&userId=" + "x" * 300, "userId")):
        page.goto(f"{explorer}?{query}")
        expect(page.locator("#search-errors")).to_contain_text(said)
    page.goto(f"{explorer}?query=tea&mode=keyword&userId=u1")
    expect(page.locator("#search-results tbody tr").first).to_contain_text("green tea")
    page.goto(f"{base}/console/t/{slug}/")
    page.wait_for_selector("body[data-charts-ready=true]")
    searches = page.evaluate(
        "JSON.parse(document.getElementById('dashboard-data').textContent).searches")
    assert sum(searches) == 0

    page.goto(f"{base}/console/t/{slug}/memories/{memory.pk}/")
    page.fill("#id_metadata", '{"topic": "tea", "checked": true}')
    page.click("#save-memory")
    history = page.locator("#memory-history")
    expect(history).to_contain_text("topic: drinks → tea")
    expect(history).to_contain_text("+ checked = true")
    expect(history).not_to_contain_text("{'")
    expect(history).to_contain_text("UTC")

    page.goto(f"{base}/console/t/{slug}/policies/new/")
    page.fill("#id_denied_terms", "bluebird")
    page.fill("#id_sample_text", "Project bluebird ships in May")
    page.click("#try-button")
    expect(page.locator("#try-verdict")).to_have_text("Denied")
    expect(page.locator("#try-result")).not_to_contain_text("Would be stored as")
    expect(page.locator("#try-refused")).to_contain_text("nothing would be stored")

    page.set_viewport_size({"width": 390, "height": 800})
    for path in ("", "memories/?query=tea&mode=keyword&userId=u1", "settings/", "reviews/"):
        page.goto(f"{base}/console/t/{slug}/{path}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, (path, overflow)


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
