"""The console dashboard: the activity chart's time ranges (hourly and daily buckets, UTC),
the fallback for an unknown range, counts per bucket, the drill-down links of the bar charts
(in the page's JSON and in the table), the empty state, and who may open it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from console.dashboard import RANGES, dashboard_get
from memories.models import HistoryAction, Memory, MemoryHistory
from memories.selectors.activity import activity_per_hour, activity_record
from memories.services.history import history_record, history_row
from tenants.context import tenant_scope
from tests.console_helpers import console_user

pytestmark = pytest.mark.django_db

#: A fixed "now" for the selector tests: mid-hour, mid-day (UTC).
NOW = datetime(2030, 6, 15, 12, 30, tzinfo=UTC)


def url(tenant: Any) -> str:
    return f"/console/t/{tenant.tenant.slug}/"


def page_json(response: Any) -> dict[str, Any]:
    """The JSON the page embeds for its charts (``#dashboard-data``)."""
    found = re.search(r'<script id="dashboard-data" type="application/json">(.*?)</script>',
                      response.content.decode(), re.S)
    assert found, "no #dashboard-data"
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def write_at(tenant: Any, memory: Memory, when: datetime,
             action: HistoryAction = HistoryAction.UPDATE) -> None:
    """One more history row of ``memory`` written at ``when``."""
    with tenant_scope(tenant.ctx):
        row = history_row(tenant.ctx, memory.pk, action)
        history_record([row])
        MemoryHistory.objects.filter(pk=row.pk).update(created_at=when)


def added_at(tenant: Any, content: str, when: datetime, layer: str = "user") -> Memory:
    """A memory whose ``add`` history row is dated ``when``."""
    memory = tenant.add(content, layer=layer)
    with tenant_scope(tenant.ctx):
        assert MemoryHistory.objects.filter(memory_id=memory.pk).update(created_at=when) == 1
    return memory


def board(tenant: Any, range_name: str) -> Any:
    with tenant_scope(tenant.ctx):
        return dashboard_get(tenant.ctx, span=RANGES[range_name], now=NOW)


@pytest.fixture
def history(tenant_a: Any) -> Any:
    """Writes at known times before ``NOW``: two in the current hour and day, one update two
    hours before, one add 3, 40 and 100 days before, an archive (not a write) and a row after
    the current bucket."""
    recent = added_at(tenant_a, "Alice prefers tea", NOW - timedelta(minutes=10))
    earlier = added_at(tenant_a, "Bob prefers coffee", NOW - timedelta(hours=2))
    write_at(tenant_a, earlier, NOW - timedelta(hours=2) + timedelta(minutes=5))
    write_at(tenant_a, recent, NOW - timedelta(minutes=5), HistoryAction.ARCHIVE)
    added_at(tenant_a, "The deploy runs on Fridays", NOW - timedelta(days=3))
    added_at(tenant_a, "Quarterly goals", NOW - timedelta(days=40))
    added_at(tenant_a, "An old note", NOW - timedelta(days=100))
    write_at(tenant_a, recent, NOW + timedelta(days=1), HistoryAction.ADD)
    return tenant_a


def test_it_counts_writes_per_hour_over_24_hours(history: Any) -> None:
    figures = board(history, "24h")
    assert len(figures.buckets) == 24
    assert figures.buckets[-1] == datetime(2030, 6, 15, 12, tzinfo=UTC)
    assert figures.buckets[0] == datetime(2030, 6, 14, 13, tzinfo=UTC)
    assert figures.writes[-1] == 1  # the add at 12:20; the archive is not a write
    assert figures.writes[-3] == 2  # 10:00: an add and an update
    assert sum(figures.writes) == 3
    assert figures.written == 2
    assert figures.labels[-1] == "12:00"


def test_it_counts_writes_per_hour_over_7_days(history: Any) -> None:
    figures = board(history, "7d")
    assert len(figures.buckets) == 168
    three_days_ago = figures.buckets.index(datetime(2030, 6, 12, 12, tzinfo=UTC))
    assert figures.writes[three_days_ago] == 1
    assert sum(figures.writes) == 4 and figures.written == 3
    assert figures.labels[-1] == "06-15 12:00"


@pytest.mark.parametrize(("range_name", "writes", "written", "forty_days_ago"),
                         [("30d", 4, 3, None), ("90d", 5, 4, 1)])
def test_it_counts_writes_per_day_over_30_and_90_days(
        history: Any, range_name: str, writes: int, written: int,
        forty_days_ago: int | None) -> None:
    figures = board(history, range_name)
    assert len(figures.buckets) == RANGES[range_name].count
    assert figures.buckets[-1] == datetime(2030, 6, 15, tzinfo=UTC)
    assert figures.writes[-1] == 3 and figures.writes[-4] == 1
    assert sum(figures.writes) == writes and figures.written == written
    assert figures.labels[-1] == "2030-06-15"
    day = datetime(2030, 5, 6, tzinfo=UTC)
    assert (figures.writes[figures.buckets.index(day)] if day in figures.buckets
            else None) == forty_days_ago


def test_it_counts_searches_and_recalls_per_hour_and_per_day(tenant_a: Any) -> None:
    tenant_id = tenant_a.tenant.id
    for at in (NOW - timedelta(hours=2), NOW - timedelta(hours=2), NOW - timedelta(days=3)):
        activity_record(tenant_id, "search", at=at)
    activity_record(tenant_id, "recall", at=NOW - timedelta(days=20))
    hourly, weekly, daily = board(tenant_a, "24h"), board(tenant_a, "7d"), board(tenant_a, "30d")
    assert hourly.searches[-3] == 2 and sum(hourly.searches) == 2
    assert sum(weekly.searches) == 3 and sum(weekly.recalls) == 0
    assert daily.searches[-1] == 2 and daily.searches[-4] == 1
    assert daily.recalls[-21] == 1 and sum(daily.recalls) == 1


def test_the_hourly_reader_keeps_its_signature(tenant_a: Any) -> None:
    activity_record(tenant_a.tenant.id, "recall")
    counts = activity_per_hour(tenant_a.tenant.id, "recall", hours=3)
    assert len(counts) == 3 and counts[-1][1] == 1


@pytest.mark.parametrize(("range_name", "bucket", "points", "caption"), [
    ("24h", "hour", 24, "per hour, last 24 hours (UTC)"),
    ("7d", "hour", 168, "per hour, last 7 days (UTC)"),
    ("30d", "day", 30, "per day, last 30 days (UTC)"),
    ("90d", "day", 90, "per day, last 90 days (UTC)"),
])
def test_the_page_draws_the_range_it_is_asked_for(tenant_a: Any, admin: Client,
                                                   range_name: str, bucket: str, points: int,
                                                   caption: str) -> None:
    tenant_a.add("Alice prefers tea")
    response = admin.get(url(tenant_a), {"range": range_name})
    assert response.status_code == 200
    html = response.content.decode()
    data = page_json(response)
    assert data["range"] == range_name and data["bucket"] == bucket
    assert len(data["labels"]) == len(data["buckets"]) == len(data["writes"]) == points
    assert len(data["searches"]) == len(data["recalls"]) == points
    assert sum(data["writes"]) == 1
    assert caption in html
    current = re.findall(r'<a href="\?range=(\w+)"[^>]*aria-current="true"', html)
    assert current == [range_name]
    assert re.search(r'id="written-in-range">1</span> memories written in the last', html)
    assert "range-note" not in html


@pytest.mark.parametrize("asked", ["1y", "<b>24h</b>", "7D"])
def test_an_unknown_range_falls_back_to_24_hours_with_a_note(tenant_a: Any, admin: Client,
                                                             asked: str) -> None:
    response = admin.get(url(tenant_a), {"range": asked})
    assert response.status_code == 200
    html = response.content.decode()
    assert page_json(response)["range"] == "24h"
    assert 'id="range-note"' in html and "showing the last 24 hours" in html
    assert "<b>24h</b>" not in html
    assert re.findall(r'<a href="\?range=(\w+)"[^>]*aria-current="true"', html) == ["24h"]


def test_the_range_picks_which_writes_count(tenant_a: Any, admin: Client) -> None:
    memory = tenant_a.add("Alice prefers tea")
    with tenant_scope(tenant_a.ctx):
        MemoryHistory.objects.filter(memory_id=memory.pk).update(
            created_at=datetime.now(UTC) - timedelta(days=5))
    day = admin.get(url(tenant_a))
    week = admin.get(url(tenant_a), {"range": "7d"})
    assert sum(page_json(day)["writes"]) == 0 and day.context["board"].written == 0
    assert sum(page_json(week)["writes"]) == 1 and week.context["board"].written == 1


def test_every_bar_and_table_count_links_to_the_memory_browser(tenant_a: Any,
                                                                admin: Client) -> None:
    slug = tenant_a.tenant.slug
    tenant_a.add("Alice prefers tea")
    tenant_a.add("The office opens at nine", layer="company",
                 identifiers={"companyId": slug}, kind="rule")
    response = admin.get(url(tenant_a))
    data = page_json(response)
    base = f"/console/t/{slug}/memories/"
    assert data["memoriesUrl"] == base
    assert data["links"]["layers"]["company"] == f"{base}?layer=company"
    assert data["links"]["kinds"]["rule"] == f"{base}?kind=rule"
    assert data["links"]["states"]["deleted"] == f"{base}?state=deleted"
    assert set(data["links"]["layers"]) == set(data["layers"])
    html = response.content.decode()
    table = html[html.index('id="dashboard-table"'):html.index("</table>")]
    assert f'<a href="{base}?layer=company">company: 1</a>' in table
    assert f'<a href="{base}?layer=agent">agent: 0</a>' in table
    assert f'<a href="{base}?kind=rule">rule: 1</a>' in table
    assert f'<a href="{base}?state=active">active: 2</a>' in table
    assert len(re.findall(r"<td><a href=", table)) == sum(
        len(data[chart]) for chart in ("layers", "kinds", "states"))
    assert '<details open id="dashboard-figures">' in html
    assert 'id="log-scale"' in html and "empty-state" not in html


def test_an_empty_tenant_gets_first_use_hints(tenant_a: Any, admin: Client) -> None:
    slug = tenant_a.tenant.slug
    response = admin.get(url(tenant_a))
    assert response.status_code == 200
    html = response.content.decode()
    empty = html[html.index('class="empty-state"'):]
    empty = empty[:empty.index("</div>")]
    assert "No memories yet" in empty
    assert f"manage.py import_locomo &lt;file&gt; --tenant {slug}" in empty
    assert f'href="/console/t/{slug}/settings/"' in empty
    assert "POST /api/v1/memories" in empty
    assert 'id="chart-layers"' not in html and 'id="chart-activity"' in html
    assert 'id="total-memories">0<' in html and 'id="dashboard-data"' in html


def test_a_reviewer_is_refused_and_another_tenant_is_not_found(tenant_a: Any, tenant_b: Any,
                                                               admin: Client) -> None:
    reviewer = Client()
    reviewer.force_login(console_user(tenant_a, "rita", "reviewer"))
    assert reviewer.get(url(tenant_a)).status_code == 403
    assert reviewer.get(url(tenant_a), {"range": "30d"}).status_code == 403
    assert admin.get(url(tenant_b)).status_code == 404
    assert admin.get(url(tenant_b), {"range": "7d"}).status_code == 404
