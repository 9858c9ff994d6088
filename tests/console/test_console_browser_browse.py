"""The memory browser in a real browser: filter by layer through the form, remove the filter's
chip, archive two checked memories after confirming, and export the archived ones (fixtures:
``tests/console/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Dialog, Page, expect

from memories.models import Memory, State
from tenants.context import tenant_scope
from tests.console.browser_helpers import BROWSER_TEST, shot, sign_in
from tests.console_helpers import console_user

pytestmark = BROWSER_TEST


def test_an_admin_filters_by_layer_and_archives_two_memories_after_confirming(
        live_server: Any, page: Page, tenant_a: Any, tenant_b: Any) -> None:
    """Filter by layer (a chip appears, its ✕ removes it), then check two rows and archive
    them: a dismissed confirmation changes nothing, an accepted one archives both."""
    base, slug = live_server.url, tenant_a.tenant.slug
    tea = tenant_a.add("Alice drinks green tea", metadata={"tags": ["drinks"]})
    walk = tenant_a.add("Alice walks to work")
    tenant_a.add("The agent answers in French", layer="agent",
                 identifiers={"agentId": "bot1", "userId": "u1"})
    tenant_b.add("Globex keeps its books in euros")
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    page.goto(f"{base}/console/t/{slug}/memories/")
    rows = page.locator("#recent-memories tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#browse-count")).to_contain_text("3 memories")
    expect(page.locator("#recent-memories")).not_to_contain_text("Globex")

    page.select_option("#id_layer", "agent")
    page.click("#browse-submit")
    expect(page.locator(".filter-chip")).to_have_count(1)
    expect(page.locator(".filter-chip")).to_contain_text("layer: agent")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("The agent answers in French")
    page.locator(".filter-chip a").click()
    expect(page.locator(".filter-chip")).to_have_count(0)
    expect(rows).to_have_count(3)

    page.check(f"#pick-{tea.pk}")
    page.check(f"#pick-{walk.pk}")
    asked: list[str] = []

    def answer(accept: bool) -> Callable[[Dialog], None]:
        def handle(dialog: Dialog) -> None:
            asked.append(dialog.message)
            if accept:
                dialog.accept()
            else:
                dialog.dismiss()
        return handle

    page.once("dialog", answer(accept=False))
    page.click(".bulk-delete")
    expect(page.locator(f"#memory-{tea.pk} .state")).to_have_text("active")
    page.once("dialog", answer(accept=True))
    page.click(".bulk-archive")
    expect(page.locator(".messagelist")).to_contain_text("Archived 2 memories.")
    expect(page.locator(f"#memory-{tea.pk} .state")).to_have_text("archived")
    expect(page.locator(f"#memory-{walk.pk} .state")).to_have_text("archived")
    assert len(asked) == 2 and "checked memories" in asked[0]
    shot(page, "memory-browser")
    page.select_option("#id_state", "archived")
    page.click("#browse-submit")
    with page.expect_download() as download:
        page.click("#export-csv")
    assert download.value.suggested_filename.startswith(f"memories-{slug}-")
    exported = Path(download.value.path()).read_text().splitlines()
    assert len(exported) == 3
    assert exported[0].startswith("id,created_at,updated_at,occurred_at,layer")
    with tenant_scope(tenant_a.ctx):
        assert dict(Memory.objects.values_list("content", "state")) == {
            "Alice drinks green tea": State.ARCHIVED, "Alice walks to work": State.ARCHIVED,
            "The agent answers in French": State.ACTIVE}
