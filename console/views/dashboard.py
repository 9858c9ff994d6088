"""The tenant dashboard: memories per layer, kind and state (each bar and table count opens
the memory browser filtered to it); writes, searches and recalls per hour or per day over
``?range=24h|7d|30d|90d`` (UTC); review items waiting."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from console.access import ConsoleAccess, console_view
from console.models import ConsoleRole
from console.selectors import RANGES, dashboard_get, time_range_parse


@console_view(ConsoleRole.ADMIN)
def dashboard(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/``: charts of the tenant's memories and activity. An unknown
    ``range`` shows the last 24 hours and says so."""
    span, unknown_range = time_range_parse(request.GET.get("range"))
    board = dashboard_get(access.ctx, span=span)
    memories_url = reverse("console:memories", args=[access.tenant.slug])
    return render(request, "console/dashboard.html", {
        "access": access, "board": board, "chart_data": board.chart_data(memories_url),
        "table": board.table(memories_url), "ranges": list(RANGES.values()),
        "unknown_range": unknown_range,
        "title": f"{access.tenant.name}: dashboard", "tab": "dashboard",
    })
