"""``GET/PATCH /api/v1/settings``: the caller's tenant's retrieval settings."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.services.settings import settings_get, settings_update
from tenants.context import require_context


class TenantSettingsView(APIView):
    """Default search threshold, recall weights per scope and recency half-life.

    PATCH needs an API key with the ``admin`` role; it merges per section and per scope.
    """

    operation_name = {"get": "settings.get", "patch": "settings.update"}

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response(settings_get(require_context()))

    @extend_schema(request=dict, responses={200: dict})
    def patch(self, request: Request) -> Response:
        return Response(settings_update(require_context(), patch=request.data))
