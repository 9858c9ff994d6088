"""Per-tenant budgets for the language model, per billing period (seed 001 "LLM
Summarization Cost Control": check the period's usage before a call, refuse with the
budget's details when it is spent).

A tenant's budget lives in its settings (``PATCH /api/v1/settings``)::

    {"llm": {"budget": {"period": "month", "tokens": 2000000, "cost": 25.0},
             "cacheTtlSeconds": 3600}}

``period`` is ``month`` (calendar month, UTC; the default) or ``day``; ``tokens`` counts prompt
and completion tokens, ``cost`` US dollars (``LLM_PRICES``); either may be ``null`` (no
limit). A budget of 0 refuses every call. ``cacheTtlSeconds`` is how long an identical
request's answer is reused (seed 001 MR-H3, default 1 hour).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from llm.models import LlmUsage
from memory_project.errors import InvalidInput, MemoryServiceError
from tenants.context import TenantContext
from tenants.tenant_settings import section

PERIODS = ("month", "day")
DEFAULT_CACHE_TTL_SECONDS = 3600


class BudgetExceeded(MemoryServiceError):
    """``BUDGET_EXCEEDED`` (HTTP 429): the tenant's language-model budget for this period is
    spent; ``details`` name the budget, its limit, the usage and when the period ends
    (``retryAfter``, seconds)."""

    code = "BUDGET_EXCEEDED"
    status = 429
    retryable = True
    default_message = "The tenant's language-model budget for this period is spent."


@dataclass(frozen=True)
class Budget:
    """A tenant's limits for the current period."""

    period: str
    tokens: int | None
    cost: Decimal | None
    start: datetime
    end: datetime


@dataclass(frozen=True)
class LlmSettings:
    """The ``llm`` section of a tenant's settings (registered with
    ``tenants.tenant_settings`` in ``LlmConfig.ready``)::

        {"budget": {"period": "month", "tokens": 2000000, "cost": 25.0},
         "cacheTtlSeconds": 3600}
    """

    period: str = "month"
    tokens: int | None = None
    cost: int | float | None = None
    cache_ttl_seconds: int = DEFAULT_CACHE_TTL_SECONDS

    @classmethod
    def parse(cls, section: dict[str, Any]) -> LlmSettings:
        """Raises InvalidInput: an unknown key, a period other than month/day, a negative or
        non-numeric limit, or a cache TTL outside 0..86400 seconds."""
        budget = section.get("budget")
        if budget is None:
            budget = {}
        if not isinstance(budget, dict) or set(budget) - {"period", "tokens", "cost"}:
            raise InvalidInput("llm.budget accepts period, tokens and cost.")
        period = budget.get("period", "month")
        if period not in PERIODS:
            raise InvalidInput("llm.budget.period must be month or day.")
        for key, kind in (("tokens", int), ("cost", (int, float))):
            value = budget.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kind)
                                      or not math.isfinite(value) or not 0 <= value <= 1e15):
                raise InvalidInput(f"llm.budget.{key} must be a number ≥ 0, or null.")
        ttl = section.get("cacheTtlSeconds")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int)
                                or not 0 <= ttl <= 86_400):
            raise InvalidInput("llm.cacheTtlSeconds must be an integer within 0..86400.")
        tokens, cost = budget.get("tokens"), budget.get("cost")
        return cls(period=period, tokens=int(tokens) if tokens is not None else None,
                   cost=cost,
                   cache_ttl_seconds=ttl if ttl is not None else DEFAULT_CACHE_TTL_SECONDS)


def _settings(ctx: TenantContext) -> LlmSettings:
    settings: LlmSettings = section(ctx, "llm")
    return settings


def cache_ttl(ctx: TenantContext) -> int:
    """Seconds an identical request's answer is reused for this tenant."""
    return _settings(ctx).cache_ttl_seconds


def budget_of(ctx: TenantContext, now: datetime | None = None) -> Budget:
    """The tenant's budget and its current period (no limits when none is set)."""
    now = now or timezone.now()
    raw = _settings(ctx)
    period = raw.period
    if period == "day":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=1)
    else:
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = (start + timedelta(days=32)).replace(day=1)
    return Budget(period=period, tokens=raw.tokens,
                  cost=Decimal(str(raw.cost)) if raw.cost is not None else None,
                  start=start, end=end)


def usage_in(ctx: TenantContext, budget: Budget) -> tuple[int, Decimal]:
    """``(tokens, dollars)`` the tenant used in ``budget``'s period."""
    totals = LlmUsage.objects.filter(created_at__gte=budget.start, created_at__lt=budget.end
                                     ).aggregate(prompt=Sum("prompt_tokens"),
                                                 completion=Sum("completion_tokens"),
                                                 cost=Sum("cost"))
    tokens = (totals["prompt"] or 0) + (totals["completion"] or 0)
    return tokens, totals["cost"] or Decimal(0)


def budget_check(ctx: TenantContext, *, purpose: str) -> None:
    """Refuse a call when the period's budget is spent.

    Raises:
        BudgetExceeded: the tokens or the money of the period are used up (a budget of 0
            always is).
    """
    budget = budget_of(ctx)
    if budget.tokens is None and budget.cost is None:
        return
    tokens, cost = usage_in(ctx, budget)
    for name, limit, used in (("tokens", budget.tokens, tokens), ("cost", budget.cost, cost)):
        if limit is not None and used >= limit:
            raise BudgetExceeded(
                f"The language-model budget ({name}) of this {budget.period} is spent: "
                f"{used} of {limit}.", operation=f"llm.{purpose}",
                details={"budget": name, "limit": float(limit), "used": float(used),
                         "period": budget.period, "periodStart": budget.start.isoformat(),
                         "periodEnd": budget.end.isoformat(),
                         "retryAfter": max(1, int((budget.end - timezone.now())
                                                  .total_seconds()))})
