"""What the language model costs each tenant: one row per call (row-level security)."""

from __future__ import annotations

from django.db import models
from uuid6 import uuid7

from tenants.managers import TenantOwnedModel


class Outcome(models.TextChoices):
    """How a purpose's call ended."""

    OK = "ok"                      # the model answered valid output
    REPAIRED = "repaired"          # valid after the one repair retry
    CACHED = "cached"              # an identical request's answer, no model call
    FALLBACK = "fallback"          # the offline fallback answered (model failed or off)
    BUDGET = "budget"              # refused: the tenant's budget is spent
    ERROR = "error"                # failed, no fallback


class LlmUsage(TenantOwnedModel):
    """One language-model call (or its refusal) of a tenant: tokens, money, outcome.

    ``cost`` is in US dollars from ``LLM_PRICES`` (per million tokens); 0 for the local model
    and for calls that did not reach a model.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    purpose = models.CharField(max_length=32)
    model = models.CharField(max_length=200)
    layer = models.CharField(max_length=16, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    latency_ms = models.FloatField(default=0)

    class Meta:
        indexes = [models.Index(fields=["tenant", "created_at"], name="llm_usage_tenant_time")]

    def __str__(self) -> str:
        return f"{self.purpose} {self.model} {self.outcome}"
