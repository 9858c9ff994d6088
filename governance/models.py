"""Governance: tenant policies and the staff review queue (the audit log is ``tenants.audit``)."""

from __future__ import annotations

from django.db import models
from uuid6 import uuid7

from tenants.managers import TenantOwnedModel


class PiiHandling(models.TextChoices):
    """What a policy does with PII in written content."""

    ALLOW = "allow"
    REDACT = "redact"
    DENY = "deny"


class Policy(TenantOwnedModel):
    """A tenant policy checked on every add and update, and on search results.

    Rules (all optional): ``denied_terms`` (case-insensitive whole words or phrases),
    ``denied_patterns`` (regular expressions, bounded by a timeout), ``pii_handling``,
    ``max_content_length``, ``writable_layers`` (empty: every layer), ``required_metadata``
    (keys that must be present), ``api_key_prefixes`` (empty: the policy applies to every key).
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    denied_terms = models.JSONField(default=list, blank=True)
    denied_patterns = models.JSONField(default=list, blank=True)
    pii_handling = models.CharField(
        max_length=10, choices=PiiHandling.choices, default=PiiHandling.ALLOW
    )
    max_content_length = models.PositiveIntegerField(null=True, blank=True)
    writable_layers = models.JSONField(default=list, blank=True)
    required_metadata = models.JSONField(default=list, blank=True)
    api_key_prefixes = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name_plural = "policies"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="uniq_policy_name")
        ]

    def __str__(self) -> str:
        return self.name


class ReviewKind(models.TextChoices):
    PROMOTION_BLOCKED = "promotion_blocked"
    POLICY_HIT = "policy_hit"


class ReviewStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ReviewItem(TenantOwnedModel):
    """Something governance stopped, waiting for a person: a blocked promotion or a policy hit.

    ``preview`` is the content as it would be stored if approved (PII redacted).
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    kind = models.CharField(max_length=32, choices=ReviewKind.choices)
    status = models.CharField(
        max_length=16, choices=ReviewStatus.choices, default=ReviewStatus.PENDING, db_index=True
    )
    memory_id = models.UUIDField(null=True, blank=True)
    reason = models.TextField()
    preview = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    result_memory_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} ({self.status})"
