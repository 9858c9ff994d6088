"""``POST /api/v1/sessions/{session_id}/close``: close a session, promote what matters."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.serializers.memories import IdentifiersField
from memories.services.lifecycle import session_close
from memory_project.errors import InvalidInput
from tenants.context import require_context
from tenants.layers import LayerIdentifiers


class SessionCloseSerializer(serializers.Serializer):
    """``{"identifiers": {"userId": ...}}``: the caller's identifiers (userId is required)."""

    identifiers = IdentifiersField(required=False, default=dict)


class SessionCloseView(APIView):
    """Close a session and evaluate each of its memories for promotion (seed 001).

    Answers ``{"sessionId", "promoted": [new memory ids], "blocked": [memory ids queued for
    review], "belowThreshold": n, "alreadyClosed": bool}``. An unknown session and another
    tenant's session both answer 404 ``NOT_FOUND``.
    """

    operation_name = {"post": "session.close"}

    @extend_schema(request=SessionCloseSerializer, responses={200: dict})
    def post(self, request: Request, session_id: str) -> Response:
        body = SessionCloseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        identifiers = body.validated_data["identifiers"]
        if not isinstance(identifiers, LayerIdentifiers):
            identifiers = LayerIdentifiers.from_mapping(identifiers)
        if len(session_id) > 255 or "\x00" in session_id:
            raise InvalidInput("Invalid session id.")
        result = session_close(require_context(), session_id=session_id,
                               user_id=identifiers.userId)
        return Response(result.as_dict())
