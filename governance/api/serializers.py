"""Shapes of the governance endpoints."""

from __future__ import annotations

from rest_framework import serializers

from governance.models import AuditEntry, Policy, ReviewItem
from memory_project.validation import JsonObjectField, StrictCharField, no_nul


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
    """A review item with its redaction preview and decision."""

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
    text = StrictCharField(trim_whitespace=False, max_length=100_000, validators=[no_nul])
    layer = StrictCharField(required=False, default="user")
    metadata = JsonObjectField(required=False, default=dict, validators=[no_nul])
