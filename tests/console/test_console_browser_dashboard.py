"""The dashboard in a real browser: the log-scale toggle (remembered across pages), the time
range picker, and a click on a bar of "memories per layer" opening the memory browser filtered
to that layer (fixtures: ``tests/console/conftest.py``)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.console.browser_helpers import BROWSER_TEST, shot, sign_in
from tests.console_helpers import console_user

pytestmark = BROWSER_TEST

#: The first bar of ``chart-layers`` with memories: its label and its middle, in the canvas's
#: CSS pixels (Chart.js element coordinates).
FIRST_BAR = """() => {
  const chart = Chart.getChart('chart-layers');
  const meta = chart.getDatasetMeta(0);
  const values = chart.data.datasets[0].data;
  const i = values.findIndex((n) => n !== null && n > 0);
  const bar = meta.data[i];
  return {label: chart.data.labels[i], x: bar.x, y: (bar.y + bar.base) / 2};
}"""


def y_scale(page: Page) -> str:
    return str(page.evaluate("Chart.getChart('chart-layers').scales.y.type"))


def test_an_admin_switches_to_log_scale_picks_a_range_and_drills_into_a_layer(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    base, slug = live_server.url, tenant_a.tenant.slug
    for content in ("Alice prefers tea", "Alice lives in Lyon", "Alice plays chess"):
        tenant_a.add(content)
    tenant_a.add("The office opens at nine", layer="company", identifiers={"companyId": slug},
                 kind="rule")
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    page.goto(f"{base}/console/t/{slug}/")
    page.wait_for_selector("body[data-charts-ready=true]")
    expect(page.locator("#total-memories")).to_have_text("4")
    assert y_scale(page) == "linear"

    page.check("#log-scale")
    assert y_scale(page) == "logarithmic"
    layers = page.evaluate("Chart.getChart('chart-layers').data.datasets[0].data")
    assert layers[0] is None and 3 in layers and 1 in layers  # no agent memory: no bar

    page.click("#range-7d")
    page.wait_for_selector("body[data-charts-ready=true]")
    assert page.url.endswith("?range=7d")
    expect(page.locator("#range-7d")).to_have_attribute("aria-current", "true")
    expect(page.locator("#activity-caption")).to_contain_text("per hour, last 7 days (UTC)")
    expect(page.locator("#log-scale")).to_be_checked()  # remembered
    assert y_scale(page) == "logarithmic"
    assert len(page.evaluate("Chart.getChart('chart-activity').data.labels")) == 168
    shot(page, "dashboard")

    light = page.evaluate("Chart.defaults.color")
    page.emulate_media(color_scheme="dark")  # the charts' text follows the page's colours
    page.wait_for_function(
        "(light) => Chart.getChart('chart-layers').scales.y.options.ticks.color !== light",
        arg=light)
    shot(page, "dashboard-dark")
    page.emulate_media(color_scheme="light")

    bar = page.evaluate(FIRST_BAR)
    assert bar["label"] == "user"
    canvas = page.locator("#chart-layers")
    canvas.hover(position={"x": bar["x"], "y": bar["y"]})
    assert page.evaluate("document.getElementById('chart-layers').style.cursor") == "pointer"
    canvas.click(position={"x": bar["x"], "y": bar["y"]})
    page.wait_for_url(re.compile(r"/memories/\?layer=user$"))
    assert page.url == f"{base}/console/t/{slug}/memories/?layer={bar['label']}"
