"""Routes of the graph app under ``/api/v1/graph/``. Ids are matched up to the next slash and
checked by the selectors, so a malformed id answers the same 404 as a missing one."""

from __future__ import annotations

from django.urls import path

from graph.api.views import (
    EntityMemoriesView,
    EntitySearchView,
    EntityView,
    MemoryEntitiesView,
    NeighboursView,
    PathView,
    RestoreView,
)

urlpatterns = [
    path("graph/entities", EntitySearchView.as_view(), name="graph-entities"),
    path("graph/entities/<str:entity_id>", EntityView.as_view(), name="graph-entity"),
    path("graph/entities/<str:entity_id>/memories", EntityMemoriesView.as_view(),
         name="graph-entity-memories"),
    path("graph/memories/<str:memory_id>/entities", MemoryEntitiesView.as_view(),
         name="graph-memory-entities"),
    path("graph/nodes/<str:node_id>/neighbours", NeighboursView.as_view(),
         name="graph-node-neighbours"),
    path("graph/path", PathView.as_view(), name="graph-path"),
    path("graph/restore", RestoreView.as_view(), name="graph-restore"),
]
