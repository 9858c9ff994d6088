"""The tenant dashboard: memories per layer, kind and state; writes and searches per hour;
review items waiting."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import ConsoleAccess, console_view
from console.models import ConsoleRole
from console.selectors import dashboard_get


@console_view(ConsoleRole.ADMIN)
def dashboard(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/``: charts of the tenant's memories and activity."""
    board = dashboard_get(access.ctx)
    return render(request, "console/dashboard.html", {
        "access": access, "board": board, "chart_data": board.chart_data(),
        "title": f"{access.tenant.name}: dashboard", "tab": "dashboard",
    })
