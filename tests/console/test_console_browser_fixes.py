"""The console issue's broken items 1-10, each in a real browser (fixtures:
``tests/console/conftest.py``)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from memories.models import Memory
from tenants.context import tenant_scope
from tenants.models import ApiKey, Tenant
from tests.console.browser_helpers import BROWSER_TEST, sign_in
from tests.console_helpers import (
    blocked_promotion,
    console_user,
    policy,
    policy_hit,
)

pytestmark = BROWSER_TEST


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
