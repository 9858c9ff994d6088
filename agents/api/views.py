"""Seed 003's agent memory endpoints under ``/api/agents/{agentName}/``.

- ``GET  memories?projectId=…``: the 50 most recent memories, ``createdAt`` descending;
- ``POST memories`` ``{projectId, content}``: 201 with the stored memory (``source: manual``);
- ``DELETE memories/{id}``: 204; ``DELETE memories?projectId=…``: 204, all of them;
- ``POST extract`` ``{projectId, transcript}``: 202, the post-run extraction is queued.

Optional ``userId`` (query or body) keeps an agent's memories per user it serves; without
it they are the agent's own for the project (``agents.records``).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors, services
from agents.api.serializers import (
    AgentExtractSerializer,
    AgentMemoryCreateSerializer,
    AgentMemorySerializer,
    agent_memories,
)
from agents.records import AGENT_NAME
from memories.api.params import only_params, validated
from memory_project.validation import IDENTIFIER_PATTERN
from tenants.context import require_context
from tenants.layers import MAX_IDENTIFIER_LENGTH

_NAME = OpenApiParameter("agent_name", str, OpenApiParameter.PATH, pattern=AGENT_NAME.pattern,
                         description="The agent's name.")
_IDENTIFIER = {"type": "string", "minLength": 1, "maxLength": MAX_IDENTIFIER_LENGTH,
               "pattern": IDENTIFIER_PATTERN}
_QUERY = [_NAME, *(OpenApiParameter(name, _IDENTIFIER, required=name == "projectId",
                                    allow_blank=False) for name in ("projectId", "userId"))]


class AgentMemoriesView(APIView):
    """List, add, and delete all of an agent's memories in a project (seed 003)."""

    operation_name = {"get": "agent_memory.list", "post": "agent_memory.add",
                      "delete": "agent_memory.clear"}

    @extend_schema(parameters=_QUERY, responses={200: inline_serializer(
        "AgentMemoryList", {"memories": AgentMemorySerializer(many=True)})})
    def get(self, request: Request, agent_name: str) -> Response:
        """The 50 most recent memories of the agent in the project, newest first."""
        only_params(request, {"projectId", "userId"})
        rows = selectors.agent_memory_list(
            require_context(), agent_name=agent_name,
            project_id=request.query_params.get("projectId"),
            user_id=request.query_params.get("userId"))
        return Response({"memories": agent_memories(rows)})

    @extend_schema(parameters=[_NAME], request=AgentMemoryCreateSerializer,
                   responses={201: AgentMemorySerializer})
    def post(self, request: Request, agent_name: str) -> Response:
        """Store a memory of the agent with ``source: "manual"`` (or ``"system"``)."""
        data = validated(AgentMemoryCreateSerializer, request)
        memory = services.agent_memory_add(
            require_context(), agent_name=agent_name, project_id=data.get("projectId"),
            content=data["content"], source=data["source"], user_id=data.get("userId"))
        return Response(agent_memories([memory])[0], status=status.HTTP_201_CREATED)

    @extend_schema(parameters=_QUERY, responses={204: None})
    def delete(self, request: Request, agent_name: str) -> Response:
        """Delete every memory of the agent in the project (soft: restorable until purged)."""
        only_params(request, {"projectId", "userId"})
        services.agent_memories_clear(
            require_context(), agent_name=agent_name,
            project_id=request.query_params.get("projectId"),
            user_id=request.query_params.get("userId"))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentMemoryView(APIView):
    """Delete one memory of an agent (seed 003)."""

    operation_name = {"delete": "agent_memory.delete"}

    @extend_schema(parameters=[_NAME], responses={204: None})
    def delete(self, request: Request, agent_name: str, pk: str) -> Response:
        """Delete the memory; idempotent (a missing id answers 204 too)."""
        only_params(request, set())
        services.agent_memory_delete(require_context(), agent_name=agent_name, memory_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentExtractView(APIView):
    """Queue the post-run extraction of an agent's transcript (seed 003)."""

    operation_name = {"post": "agent_memory.extract"}

    @extend_schema(parameters=[_NAME], request=AgentExtractSerializer,
                   responses={202: inline_serializer(
        "AgentExtractAccepted", {"jobId": serializers.CharField(),
                                 "status": serializers.CharField()})})
    def post(self, request: Request, agent_name: str) -> Response:
        """A Celery worker extracts the learnings and stores the new ones with
        ``source: "extraction"``; ``jobId`` is the Celery task id."""
        data = validated(AgentExtractSerializer, request)
        job_id = services.agent_extraction_enqueue(
            require_context(), agent_name=agent_name, project_id=data.get("projectId"),
            transcript=data["transcript"], user_id=data.get("userId"))
        return Response({"jobId": job_id, "status": "queued"}, status=status.HTTP_202_ACCEPTED)
