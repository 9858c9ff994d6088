"""Writes of the language-model layer: one usage row per call."""

from __future__ import annotations

from decimal import Decimal

from llm.metrics import LLM_COST, LLM_DURATION, LLM_REQUESTS, LLM_TOKENS
from llm.models import LlmUsage
from tenants.context import TenantContext


def usage_record(ctx: TenantContext, *, purpose: str, model: str, outcome: str,
                 layer: str | None = None, prompt_tokens: int = 0, completion_tokens: int = 0,
                 cost: Decimal = Decimal(0), latency_ms: float = 0.0) -> LlmUsage:
    """Store one call of ``purpose`` for ``ctx``'s tenant and count it in the metrics."""
    LLM_REQUESTS.labels(purpose=purpose, model=model, outcome=outcome).inc()
    if prompt_tokens or completion_tokens:
        LLM_TOKENS.labels(purpose=purpose, model=model, kind="prompt").inc(prompt_tokens)
        LLM_TOKENS.labels(purpose=purpose, model=model, kind="completion").inc(
            completion_tokens)
        LLM_DURATION.labels(purpose=purpose, model=model).observe(latency_ms / 1000)
    if cost:
        LLM_COST.labels(purpose=purpose, model=model).inc(float(cost))
    return LlmUsage.objects.create(
        tenant_id=ctx.tenant_id, purpose=purpose, model=model[:200], layer=layer or "",
        outcome=outcome, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        cost=cost, latency_ms=latency_ms)
