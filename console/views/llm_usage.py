"""The tenant's language-model usage: tokens and dollars of the period against its budget."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import ConsoleAccess, console_view
from console.models import ConsoleRole
from llm.selectors import usage_summary


@console_view(ConsoleRole.ADMIN)
def llm_usage(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/llm/``: usage by purpose, model and outcome (admins only)."""
    return render(request, "console/llm_usage.html", {
        "access": access, "usage": usage_summary(access.ctx),
        "title": f"{access.tenant.name}: language model", "tab": "llm",
    })
