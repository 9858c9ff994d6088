"""Routes of the summaries app under ``/api/v1/``: layer summaries and context assembly.
``summaries/regenerate`` comes before ``summaries/{layer}``, so it is never read as a layer."""

from __future__ import annotations

from django.urls import path

from summaries.api.views import ContextView, SummaryListView, SummaryRegenerateView, SummaryView

urlpatterns = [
    path("summaries", SummaryListView.as_view(), name="summary-list"),
    path("summaries/regenerate", SummaryRegenerateView.as_view(), name="summary-regenerate"),
    path("summaries/<str:layer>", SummaryView.as_view(), name="summary-layer"),
    path("context", ContextView.as_view(), name="context-assemble"),
]
