"""Reads of the language-model layer: the tenant's usage and budget."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Sum

from llm.budgets import budget_of, usage_in
from llm.models import LlmUsage
from tenants.context import TenantContext


def usage_summary(ctx: TenantContext) -> dict[str, Any]:
    """The current period's usage of ``ctx``'s tenant against its budget, and its breakdown
    by purpose, model and outcome: ``{"period", "periodStart", "periodEnd", "budget":
    {"tokens", "cost"}, "used": {"tokens", "cost"}, "byPurpose": [{"purpose", "model",
    "outcome", "calls", "promptTokens", "completionTokens", "cost"}]}``."""
    budget = budget_of(ctx)
    tokens, cost = usage_in(ctx, budget)
    rows = (LlmUsage.objects.filter(created_at__gte=budget.start, created_at__lt=budget.end)
            .values("purpose", "model", "outcome")
            .annotate(calls=Count("id"), prompt=Sum("prompt_tokens"),
                      completion=Sum("completion_tokens"), spent=Sum("cost"))
            .order_by("purpose", "model", "outcome"))
    return {
        "period": budget.period, "periodStart": budget.start.isoformat(),
        "periodEnd": budget.end.isoformat(),
        "budget": {"tokens": budget.tokens,
                   "cost": float(budget.cost) if budget.cost is not None else None},
        "used": {"tokens": tokens, "cost": float(cost)},
        "byPurpose": [{"purpose": r["purpose"], "model": r["model"], "outcome": r["outcome"],
                       "calls": r["calls"], "promptTokens": r["prompt"] or 0,
                       "completionTokens": r["completion"] or 0,
                       "cost": float(r["spent"] or 0)} for r in rows],
    }
