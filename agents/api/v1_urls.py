"""Routes of the agents app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from agents.api.conversation_views import ConversationView

urlpatterns = [path("conversations", ConversationView.as_view(), name="conversation-list")]
