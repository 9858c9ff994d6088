"""URL configuration: the REST API under ``/api/v1/`` (seed 003's agent memories under
``/api/agents/``), OpenAPI, admin, console, health."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memory_project import health, metrics

urlpatterns = [
    path("health", health.health, name="health"),
    path("ready", health.ready, name="ready"),
    path("", include("graph.health")),  # /health/graph and /ready/graph
    path("api/v1/", include("memories.api.urls")),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("governance.api.urls")),
    path("api/v1/", include("llm.api.urls")),
    path("api/v1/", include("agents.api.v1_urls")),
    path("api/v1/", include("graph.api.urls")),
    path("api/v1/", include("summaries.api.urls")),
    path("api/agents/", include("agents.api.urls")),
    path("metrics", metrics.metrics_view, name="prometheus-django-metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"),
         name="swagger-ui"),
    path("admin/", admin.site.urls),
    path("console/", include("console.urls")),
]

handler404 = "memory_project.errors.handler404"
handler500 = "memory_project.errors.handler500"
