"""Serializers of the hierarchy endpoints (camelCase, as the seeds spell identifiers)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory_project.validation import ADDRESSABLE_ID_PATTERN, StrictCharField, no_nul
from tenants.layers import MAX_IDENTIFIER_LENGTH


@extend_schema_field({"type": "string", "maxLength": MAX_IDENTIFIER_LENGTH,
                      "pattern": ADDRESSABLE_ID_PATTERN})
class AddressableIdField(StrictCharField):
    """The id of the node itself, which its URL names: the OpenAPI document states the rule
    the service applies (no "/", not blank; ``tenants.services``), so clients and schema
    validators know it before they send."""

    def __init__(self, *, source: str) -> None:
        super().__init__(source=source, max_length=MAX_IDENTIFIER_LENGTH, validators=[no_nul])


class _NodeSerializer(serializers.Serializer):
    """The fields every level shares: ``name`` and ``createdAt``."""

    name = StrictCharField(max_length=200, required=False, allow_blank=True,
                           validators=[no_nul])
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)


class OrganizationSerializer(_NodeSerializer):
    """``{"orgId": str, "name": str, "createdAt": datetime}``."""

    orgId = AddressableIdField(source="external_id")


class TeamSerializer(_NodeSerializer):
    """``{"teamId": str, "orgId": str, "name": str, "createdAt": datetime}``."""

    teamId = AddressableIdField(source="external_id")
    orgId = StrictCharField(source="org.external_id", max_length=MAX_IDENTIFIER_LENGTH,
                            validators=[no_nul])


class ProjectSerializer(_NodeSerializer):
    """``{"projectId", "teamId" (optional), "orgId" (read-only), "name", "createdAt"}``."""

    projectId = AddressableIdField(source="external_id")
    teamId = StrictCharField(source="team.external_id", max_length=MAX_IDENTIFIER_LENGTH,
                             required=False, allow_null=True, validators=[no_nul])
    orgId = serializers.CharField(source="team.org.external_id", read_only=True, default=None,
                                  allow_null=True)
