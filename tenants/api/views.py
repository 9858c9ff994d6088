"""Hierarchy endpoints: ``/api/v1/orgs``, ``/api/v1/teams``, ``/api/v1/projects``."""

from __future__ import annotations

from typing import Any

from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from tenants import selectors, services
from tenants.api.mixins import TenantScopedViewSetMixin
from tenants.api.serializers import OrganizationSerializer, ProjectSerializer, TeamSerializer
from tenants.context import require_context
from tenants.models import Organization, Project, Team


class _HierarchyViewSet(
    TenantScopedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """List, create, retrieve (by external id) and delete one level of the hierarchy."""

    lookup_field = "external_id"
    lookup_url_kwarg = "external_id"
    lookup_value_regex = "[^/]+"
    pagination_class = None
    model: type

    def destroy(self, request: Request, external_id: str) -> Response:
        self.get_object()
        services.hierarchy_delete(require_context(), model=self.model, external_id=external_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _valid(self, request: Request) -> Any:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class OrganizationViewSet(_HierarchyViewSet):
    """Organisations of the caller's tenant (the ``org`` layer)."""

    operation_name = {"list": "org.list", "retrieve": "org.get", "create": "org.create",
                      "destroy": "org.delete"}

    serializer_class = OrganizationSerializer
    queryset_selector = staticmethod(selectors.org_list)
    model = Organization

    def create(self, request: Request) -> Response:
        data = self._valid(request)
        org = services.org_create(
            require_context(), external_id=data["external_id"], name=data.get("name", "")
        )
        return Response(OrganizationSerializer(org).data, status=status.HTTP_201_CREATED)


class TeamViewSet(_HierarchyViewSet):
    """Teams of the caller's tenant (the ``team`` layer)."""

    operation_name = {"list": "team.list", "retrieve": "team.get", "create": "team.create",
                      "destroy": "team.delete"}

    serializer_class = TeamSerializer
    queryset_selector = staticmethod(selectors.team_list)
    model = Team

    def create(self, request: Request) -> Response:
        data = self._valid(request)
        team = services.team_create(
            require_context(),
            external_id=data["external_id"],
            org_id=data["org"]["external_id"],
            name=data.get("name", ""),
        )
        return Response(TeamSerializer(team).data, status=status.HTTP_201_CREATED)


class ProjectViewSet(_HierarchyViewSet):
    """Projects of the caller's tenant (the ``project`` layer)."""

    operation_name = {"list": "project.list", "retrieve": "project.get", "create": "project.create",
                      "destroy": "project.delete"}

    serializer_class = ProjectSerializer
    queryset_selector = staticmethod(selectors.project_list)
    model = Project

    def create(self, request: Request) -> Response:
        data = self._valid(request)
        project = services.project_create(
            require_context(),
            external_id=data["external_id"],
            team_id=(data.get("team") or {}).get("external_id"),
            name=data.get("name", ""),
        )
        return Response(ProjectSerializer(project).data, status=status.HTTP_201_CREATED)
