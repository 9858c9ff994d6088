"""Serializers of the hierarchy endpoints (camelCase, as the seeds spell identifiers)."""

from __future__ import annotations

from rest_framework import serializers

from memory_project.validation import StrictCharField, no_nul


class _NodeSerializer(serializers.Serializer):
    """The fields every level shares: ``name`` and ``createdAt``."""

    name = StrictCharField(max_length=200, required=False, allow_blank=True,
                           validators=[no_nul])
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)


class OrganizationSerializer(_NodeSerializer):
    """``{"orgId": str, "name": str, "createdAt": datetime}``."""

    orgId = StrictCharField(source="external_id", max_length=255, validators=[no_nul])


class TeamSerializer(_NodeSerializer):
    """``{"teamId": str, "orgId": str, "name": str, "createdAt": datetime}``."""

    teamId = StrictCharField(source="external_id", max_length=255, validators=[no_nul])
    orgId = StrictCharField(source="org.external_id", max_length=255, validators=[no_nul])


class ProjectSerializer(_NodeSerializer):
    """``{"projectId", "teamId" (optional), "orgId" (read-only), "name", "createdAt"}``."""

    projectId = StrictCharField(source="external_id", max_length=255, validators=[no_nul])
    teamId = StrictCharField(source="team.external_id", max_length=255, required=False,
                             allow_null=True, validators=[no_nul])
    orgId = serializers.CharField(source="team.org.external_id", read_only=True, default=None,
                                  allow_null=True)
