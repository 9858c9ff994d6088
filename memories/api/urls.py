from __future__ import annotations

from typing import cast

from django.urls import path
from rest_framework.routers import Route, SimpleRouter

from memories.api.views.export import CapabilitiesView, ExportView
from memories.api.views.memories import MemoryViewSet
from memories.api.views.sessions import SessionCloseView
from memories.api.views.settings import TenantSettingsView


class MemoryRouter(SimpleRouter):
    """SimpleRouter whose list route also maps ``DELETE`` to the viewset's ``erase`` action
    (``DELETE /api/v1/memories?userId=...``: erasure by identifier)."""

    routes = [
        cast(Route, SimpleRouter.routes[0])._replace(
            mapping={**cast(Route, SimpleRouter.routes[0]).mapping, "delete": "erase"}),
        *SimpleRouter.routes[1:],
    ]


router = MemoryRouter(trailing_slash=False)
router.register("memories", MemoryViewSet, basename="memory")
urlpatterns = [
    path("settings", TenantSettingsView.as_view(), name="tenant-settings"),
    path("capabilities", CapabilitiesView.as_view(), name="capabilities"),
    path("export", ExportView.as_view(), name="memory-export"),
    path("sessions/<str:session_id>/close", SessionCloseView.as_view(), name="session-close"),
    *router.urls,
]
