"""Shapes of the governance endpoints."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from governance.models import Policy, ReviewItem, ReviewKind, ReviewStatus
from memory_project.validation import JsonObjectField, StrictCharField, no_nul
from tenants.models import AuditEntry


class PolicySerializer(serializers.ModelSerializer):
    """A tenant policy (output; input is validated by ``clean_policy_data``)."""

    class Meta:
        model = Policy
        fields = ["id", "name", "description", "enabled", "denied_terms", "denied_patterns",
                  "pii_handling", "max_content_length", "writable_layers",
                  "required_metadata", "api_key_prefixes", "created_at", "updated_at",
                  "updated_by"]
        read_only_fields = fields


class ReviewItemSerializer(serializers.ModelSerializer):
    """A review item with its redaction preview and decision. ``details`` never carries the
    refused content (items written before it stopped being kept are shown without it)."""

    details = serializers.SerializerMethodField()

    def get_details(self, item: ReviewItem) -> dict[str, object]:
        return {k: v for k, v in (item.details or {}).items() if k != "content"}

    class Meta:
        model = ReviewItem
        fields = ["id", "kind", "status", "memory_id", "reason", "preview", "details",
                  "created_at", "decided_by", "decided_at", "decision_reason",
                  "result_memory_id"]
        read_only_fields = fields


class AuditEntrySerializer(serializers.ModelSerializer):
    """One audit log entry."""

    class Meta:
        model = AuditEntry
        fields = ["id", "created_at", "actor", "action", "target_type", "target_id", "details"]
        read_only_fields = fields


class DecisionSerializer(serializers.Serializer):
    """Body of approve/reject: ``{"reason": str}`` (required to reject)."""

    reason = StrictCharField(required=False, allow_blank=True, default="", max_length=2000,
                             validators=[no_nul])


class TrySerializer(serializers.Serializer):
    """Body of ``POST /api/v1/policies/try``: an unsaved policy and a sample text."""

    policy = JsonObjectField(validators=[no_nul])
    text = StrictCharField(trim_whitespace=False, max_length=settings.MEMORY_MAX_CONTENT_LENGTH,
                           validators=[no_nul])
    layer = StrictCharField(required=False, default="user")
    metadata = JsonObjectField(required=False, default=dict, validators=[no_nul])


class ReviewListParams(serializers.Serializer):
    """Query parameters of ``GET /api/v1/reviews``: ``status`` and ``kind``, both optional;
    any other value (the empty one too) is a 400, not an empty page. Give it a plain dict:
    from a ``QueryDict``, DRF reads ``status=`` as "not sent"."""

    status = serializers.ChoiceField(choices=ReviewStatus.choices, required=False)
    kind = serializers.ChoiceField(choices=ReviewKind.choices, required=False)


class AuditListParams(serializers.Serializer):
    """Query parameter of ``GET /api/v1/audit``: ``action`` (e.g. ``policy_created``),
    optional; empty or with NUL is a 400. Give it a plain dict (see ``ReviewListParams``)."""

    action = StrictCharField(required=False, max_length=64, trim_whitespace=False,
                             validators=[no_nul])
