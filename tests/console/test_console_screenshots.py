"""The console's main pages at desktop (1366 px) and phone (390 px) widths: each page is
checked for what every page must have (one ``h1``, the skip link as the first stop of the
keyboard, a label for every form control, alt text on images, ``lang``, text contrast of
WCAG 2.1 AA, no sideways scrolling of the page at 390 px and no link, button or label cut
off at its right edge outside a box that scrolls) and photographed.

The photographs go to ``test-artifacts/screenshots/pages/``, or to the directory in
``CONSOLE_SCREENSHOTS``: ``make screenshots`` writes the README's copies to
``docs/screenshots/``. The data is a LoCoMo conversation (``tests/memories/data``) spread
over layers, a policy hit and a blocked promotion waiting for review, and the audit trail
these writes leave.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.console.browser_helpers import BROWSER_TEST, SCREENSHOTS, sign_in
from tests.console_helpers import blocked_promotion, console_user, policy_hit

pytestmark = BROWSER_TEST

TEXTS = Path(__file__).resolve().parents[1] / "memories" / "data" / "locomo_texts_1000.json"
WIDTHS = {"desktop": (1366, 900), "390": (390, 844)}

#: What every page must satisfy, evaluated in the page: a list of problems (empty: none).
PAGE_CHECKS = """() => {
  const problems = [];
  if (document.documentElement.lang !== "en") problems.push("html lang is not en");
  const h1 = document.querySelectorAll("h1").length;
  if (h1 !== 1) problems.push(h1 + " h1 elements");
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (["hidden", "submit", "button", "reset"].includes(el.type)) continue;
    const named = el.labels.length || el.getAttribute("aria-label")
      || el.getAttribute("aria-labelledby") || el.title;
    if (!named) problems.push("unlabelled " + el.tagName + " " + (el.name || el.id));
  }
  for (const img of document.querySelectorAll("img")) {
    if (!img.hasAttribute("alt")) problems.push("img without alt: " + img.src);
  }
  for (const b of document.querySelectorAll("button")) {
    if (!b.textContent.trim() && !b.getAttribute("aria-label")) problems.push("unnamed button");
  }
  const overflow = document.documentElement.scrollWidth - window.innerWidth;
  if (overflow > 1) problems.push("page scrolls sideways by " + overflow + " px");
  for (const el of document.querySelectorAll("main a, main button, main label, main h1")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= window.innerWidth + 1) continue;
    let scrolls = false;
    for (let a = el.parentElement; a && !scrolls; a = a.parentElement) {
      scrolls = ["auto", "scroll"].includes(getComputedStyle(a).overflowX);
    }
    if (!scrolls) problems.push("cut off at the right edge: " + el.textContent.trim().slice(0, 30));
  }
  return problems.concat(lowContrast());
}"""

#: Text whose contrast with its background is below WCAG 2.1's AA minimum (1.4.3: 4.5:1, or
#: 3:1 for large text, 24 px or 18.66 px bold): the background is the first opaque one
#: among the element and its ancestors. Text over images or gradients is not judged.
CONTRAST_CHECK = """function lowContrast() {
  function rgb(s) {
    const m = s.match(/[\\d.]+/g).map(Number);
    return m.length > 3 ? m : m.concat([1]);
  }
  function lum(c) {
    const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }
  function background(el) {
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.backgroundImage !== "none") return null;
      const c = rgb(s.backgroundColor);
      if (c[3] === 1) return c;
    }
    return [255, 255, 255, 1];
  }
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || !el.checkVisibility()) continue;
    if (el.closest(".skip-link, .visually-hidden, option, canvas")) continue;
    const s = getComputedStyle(el), bg = background(el);
    if (!bg) continue;
    const fg = rgb(s.color);
    const mixed = fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3]));
    const [a, b] = [lum(mixed), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05), size = parseFloat(s.fontSize);
    const large = size >= 24 || (size >= 18.66 && parseInt(s.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) {
      out.push("contrast " + ratio.toFixed(2) + ": " + n.textContent.trim().slice(0, 30));
    }
  }
  return out.slice(0, 10);
}"""


def _out_dir() -> Path:
    target = Path(os.environ.get("CONSOLE_SCREENSHOTS") or SCREENSHOTS / "pages")
    target.mkdir(parents=True, exist_ok=True)
    return target


def _seed(tenant: Any) -> Any:
    """A conversation over the project and session layers, a few user and company facts,
    a policy hit and a blocked promotion; the memory the memory page shows."""
    texts = json.loads(TEXTS.read_text())["texts"][:36]
    for i, text in enumerate(texts):
        if i % 3 == 0:
            tenant.add(text, layer="session", identifiers={"userId": "caroline",
                                                           "sessionId": "s-2023-05-08"})
        else:
            tenant.add(text, layer="project", identifiers={"projectId": "conv-26"},
                       kind="episode", metadata={"tags": ["locomo", "conv-26"]})
    shown = tenant.add("Caroline is researching adoption agencies and wants to be a counsellor",
                       identifiers={"userId": "caroline"}, kind="fact", importance=0.8,
                       metadata={"speaker": "Caroline", "source": {"type": "conversation"}})
    tenant.add("Melanie runs a pottery class on Saturdays", identifiers={"userId": "melanie"},
               kind="fact")
    tenant.add("Support tickets are answered within one working day", layer="company",
               identifiers={"companyId": tenant.tenant.slug}, kind="rule")
    policy_hit(tenant, "Project bluebird ships in May")
    blocked_promotion(tenant, "Caroline's phone is 212-555-0199")
    return shown


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_main_pages_pass_the_page_checks_and_are_photographed(
        live_server: Any, browser: Any, tenant_a: Any, width: str) -> None:
    base, slug = live_server.url, tenant_a.tenant.slug
    shown = _seed(tenant_a)
    console_user(tenant_a, "alice", "admin")
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h})
    page: Page = context.new_page()
    try:
        sign_in(page, base, "alice")
        pages = {
            "dashboard": f"t/{slug}/",
            "explorer": f"t/{slug}/memories/?query=adoption+counsellor&mode=keyword"
                        "&userId=caroline",
            "memory": f"t/{slug}/memories/{shown.pk}/",
            "audit-log": f"t/{slug}/audit/",
            "review-queue": f"t/{slug}/reviews/",
            "settings": f"t/{slug}/settings/",
        }
        out = _out_dir()
        for name, path in pages.items():
            response = page.goto(f"{base}/console/{path}")
            assert response is not None and response.status == 200, name
            if name == "dashboard":
                page.wait_for_selector("body[data-charts-ready=true]")
            page.keyboard.press("Tab")
            focused = page.evaluate("document.activeElement.className")
            assert focused == "skip-link", (name, focused)
            expect(page.locator(".skip-link")).to_be_visible()
            page.evaluate("document.activeElement.blur()")
            checks = f"() => {{ {CONTRAST_CHECK}\n return ({PAGE_CHECKS})(); }}"
            assert page.evaluate(checks) == [], name
            page.screenshot(path=str(out / f"{name}-{width}.png"))
    finally:
        context.close()
