"""Routes of seed 003 under ``/api/agents/``. The agent name is matched up to the last path
segments the routes name, so a name holding a slash reaches the view and is refused there
(400 ``INVALID_INPUT``) instead of answering 404."""

from __future__ import annotations

from django.urls import re_path

from agents.api.views import AgentExtractView, AgentMemoriesView, AgentMemoryView

urlpatterns = [
    # One memory first: ``a/memories/memories`` is memory "memories" of agent "a" (a 404),
    # not the memories of an agent named "a/memories" (which no agent name may be).
    re_path(r"^(?P<agent_name>.+)/memories/(?P<pk>[^/]+)$", AgentMemoryView.as_view(),
            name="agent-memory"),
    re_path(r"^(?P<agent_name>.+)/memories$", AgentMemoriesView.as_view(),
            name="agent-memories"),
    re_path(r"^(?P<agent_name>.+)/extract$", AgentExtractView.as_view(), name="agent-extract"),
]
