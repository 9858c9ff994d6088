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
        period, tokens, cost = parse_budget(section.get("budget"), "llm.budget")
        ttl = section.get("cacheTtlSeconds")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int)
                                or not 0 <= ttl <= 86_400):
            raise InvalidInput("llm.cacheTtlSeconds must be an integer within 0..86400.")
        return cls(period=period, tokens=tokens, cost=cost,
                   cache_ttl_seconds=ttl if ttl is not None else DEFAULT_CACHE_TTL_SECONDS)


def parse_budget(raw: Any, name: str) -> tuple[str, int | None, int | float | None]:
    """A budget setting ``{"period", "tokens", "cost"}`` (``None``: no limits) as
    ``(period, tokens, cost)``.

    Raises:
        InvalidInput: not an object of those keys, a period other than month/day, or a limit
            that is negative, not a number or over 10^15 (the message names ``name``).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict) or set(raw) - {"period", "tokens", "cost"}:
        raise InvalidInput(f"{name} accepts period, tokens and cost.")
    period = raw.get("period", "month")
    if period not in PERIODS:
        raise InvalidInput(f"{name}.period must be month or day.")
    for key, kind in (("tokens", int), ("cost", (int, float))):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)
                                  or not math.isfinite(value) or not 0 <= value <= 1e15):
            raise InvalidInput(f"{name}.{key} must be a number ≥ 0, or null.")
    tokens = raw.get("tokens")
    return period, int(tokens) if tokens is not None else None, raw.get("cost")


def _settings(ctx: TenantContext) -> LlmSettings:
    settings: LlmSettings = section(ctx, "llm")
    return settings


def cache_ttl(ctx: TenantContext) -> int:
    """Seconds an identical request's answer is reused for this tenant."""
    return _settings(ctx).cache_ttl_seconds


def period_budget(period: str, tokens: int | None, cost: float | int | None,
                  now: datetime | None = None) -> Budget:
    """A budget of ``tokens`` and ``cost`` (US dollars) for the current ``period``
    (``month``: calendar month, UTC; ``day``)."""
    now = now or timezone.now()
    if period == "day":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=1)
    else:
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = (start + timedelta(days=32)).replace(day=1)
    return Budget(period=period, tokens=tokens,
                  cost=Decimal(str(cost)) if cost is not None else None, start=start, end=end)


def budget_of(ctx: TenantContext, now: datetime | None = None) -> Budget:
    """The tenant's budget and its current period (no limits when none is set)."""
    raw = _settings(ctx)
    return period_budget(raw.period, raw.tokens, raw.cost, now)


def usage_in(ctx: TenantContext, budget: Budget, *, purpose: str | None = None
             ) -> tuple[int, Decimal]:
    """``(tokens, dollars)`` the tenant used in ``budget``'s period (of one ``purpose``
    only, when given)."""
    rows = LlmUsage.objects.filter(created_at__gte=budget.start, created_at__lt=budget.end)
    if purpose is not None:
        rows = rows.filter(purpose=purpose)
    totals = rows.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"),
                            cost=Sum("cost"))
    tokens = (totals["prompt"] or 0) + (totals["completion"] or 0)
    return tokens, totals["cost"] or Decimal(0)


def refuse_when_spent(ctx: TenantContext, budget: Budget, *, operation: str,
                      purpose: str | None = None, setting: str = "llm.budget",
                      label: str = "language-model budget") -> None:
    """Refuse when ``budget`` is spent (the usage of ``purpose`` only, when given).

    Raises:
        BudgetExceeded: the tokens or the money of the period are used up (a budget of 0
            always is); ``details`` name the budget's ``setting``, which limit, the limit, the
            usage, the period and ``retryAfter`` seconds.
    """
    if budget.tokens is None and budget.cost is None:
        return
    tokens, cost = usage_in(ctx, budget, purpose=purpose)
    for kind, limit, used in (("tokens", budget.tokens, tokens), ("cost", budget.cost, cost)):
        if limit is not None and used >= limit:
            raise BudgetExceeded(
                f"The {label} ({kind}) of this {budget.period} is spent: {used} of {limit}.",
                operation=operation,
                details={"budget": kind, "setting": setting, "limit": float(limit),
                         "used": float(used), "period": budget.period,
                         "periodStart": budget.start.isoformat(),
                         "periodEnd": budget.end.isoformat(),
                         "retryAfter": max(1, int((budget.end - timezone.now())
                                                  .total_seconds()))})


def budget_check(ctx: TenantContext, *, purpose: str) -> None:
    """Refuse a call when the period's budget is spent.

    Raises:
        BudgetExceeded: as :func:`refuse_when_spent`.
    """
    refuse_when_spent(ctx, budget_of(ctx), operation=f"llm.{purpose}")
