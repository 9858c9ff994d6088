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
    """List, create, retrieve (by external id) and delete one level of the hierarchy.

    A subclass names its ``model``, ``serializer_class`` and ``queryset_selector``; the model's
    level (``tenants.services.hierarchy_level``) gives its ``level`` (``org``, ``team``,
    ``project``: its operations are ``<level>.list|get|create|delete``) and the serializer
    field of its parent level (``parent_field``). ``tenants.services.hierarchy_create`` serves
    its creations.
    """

    lookup_field = "external_id"
    lookup_url_kwarg = "external_id"
    lookup_value_regex = "[^/]+"
    pagination_class = None
    level: str
    model: type
    parent_field: str | None = None
    operation_name: dict[str, str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        level = services.hierarchy_level(cls.model)
        cls.level, cls.parent_field = level.name, level.parent_attr or None
        cls.operation_name = {"list": f"{cls.level}.list", "retrieve": f"{cls.level}.get",
                              "create": f"{cls.level}.create",
                              "destroy": f"{cls.level}.delete"}

    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        parent = (data.get(self.parent_field) or {}).get("external_id") if (
            self.parent_field) else None
        node = services.hierarchy_create(require_context(), self.model,
                                         external_id=data["external_id"],
                                         name=data.get("name", ""), parent_id=parent)
        return Response(self.get_serializer(node).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, external_id: str) -> Response:
        self.get_object()
        services.hierarchy_delete(require_context(), model=self.model, external_id=external_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class OrganizationViewSet(_HierarchyViewSet):
    """Organisations of the caller's tenant (the ``org`` layer)."""

    model = Organization
    serializer_class = OrganizationSerializer
    queryset_selector = staticmethod(selectors.org_list)


class TeamViewSet(_HierarchyViewSet):
    """Teams of the caller's tenant (the ``team`` layer), each under an organisation."""

    model = Team
    serializer_class = TeamSerializer
    queryset_selector = staticmethod(selectors.team_list)


class ProjectViewSet(_HierarchyViewSet):
    """Projects of the caller's tenant (the ``project`` layer), under a team or none."""

    model = Project
    serializer_class = ProjectSerializer
    queryset_selector = staticmethod(selectors.project_list)
