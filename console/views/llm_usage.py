"""The tenant's language-model usage: tokens and dollars of the period against its budget,
and summarization's own budget and usage (``summaries.budget``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import ConsoleAccess, console_view
from console.models import ConsoleRole
from llm.budgets import period_budget, usage_in
from llm.selectors import usage_summary
from summaries.config import summary_settings
from tenants.context import TenantContext

#: How a budget's period reads in a sentence.
PERIOD_WORDS = {"month": "this month", "day": "today"}


def summary_budget(ctx: TenantContext) -> dict[str, Any]:
    """Summarization's budget (``summaries.budget``) and what the ``summarize`` purpose used
    in its current period: ``{"period", "periodWords", "periodStart", "periodEnd",
    "tokens", "cost", "usedTokens", "usedCost"}`` (limits ``None`` when not set)."""
    cap = summary_settings(ctx).budget
    budget = period_budget(cap.period, cap.tokens, cap.cost)
    tokens, cost = usage_in(ctx, budget, purpose="summarize")
    return {"period": budget.period, "periodWords": PERIOD_WORDS.get(budget.period, budget.period),
            "periodStart": budget.start, "periodEnd": budget.end,
            "tokens": budget.tokens, "cost": float(budget.cost) if budget.cost is not None
            else None, "usedTokens": tokens, "usedCost": float(cost)}


@console_view(ConsoleRole.ADMIN)
def llm_usage(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/llm/``: usage by purpose, model and outcome, and the summarization
    budget's line (admins only)."""
    return render(request, "console/llm_usage.html", {
        "access": access, "usage": usage_summary(access.ctx),
        "summary_budget": summary_budget(access.ctx),
        "title": f"{access.tenant.name}: language model", "tab": "llm",
    })
