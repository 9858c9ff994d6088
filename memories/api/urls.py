from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from memories.api.settings_views import TenantSettingsView
from memories.api.views import CapabilitiesView, MemoryViewSet

router = SimpleRouter(trailing_slash=False)
router.register("memories", MemoryViewSet, basename="memory")
urlpatterns = [
    path("settings", TenantSettingsView.as_view(), name="tenant-settings"),
    path("capabilities", CapabilitiesView.as_view(), name="capabilities"),
    *router.urls,
]
