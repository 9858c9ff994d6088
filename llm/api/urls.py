from __future__ import annotations

from django.urls import path

from llm.api.views import LlmUsageView

urlpatterns = [path("llm/usage", LlmUsageView.as_view(), name="llm-usage")]
