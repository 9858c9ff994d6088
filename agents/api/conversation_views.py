"""``POST /api/v1/conversations``: conversation ingestion (``agents.conversations``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.api.serializers import ConversationSerializer
from agents.conversations import conversation_ingest_enqueue
from memories.api.params import validated
from tenants.context import require_context
from tenants.layers import LayerIdentifiers


class ConversationView(APIView):
    """Queue a conversation's ingestion: a Celery worker extracts its memories and adds
    each new one, lets it supersede a stored fact it contradicts, or skips it when known."""

    operation_name = {"post": "conversation.ingest"}

    @extend_schema(request=ConversationSerializer, responses={202: inline_serializer(
        "ConversationAccepted", {"jobId": serializers.CharField(),
                                 "status": serializers.CharField(),
                                 "messages": serializers.IntegerField()})})
    def post(self, request: Request) -> Response:
        """202 ``{"jobId", "status": "queued", "messages": n}``; ``jobId`` is the Celery
        task id."""
        data = validated(ConversationSerializer, request)
        identifiers = data["identifiers"]
        if not isinstance(identifiers, LayerIdentifiers):  # the field's default, ``{}``
            identifiers = LayerIdentifiers.from_mapping(identifiers)
        job_id = conversation_ingest_enqueue(
            require_context(), messages=data["messages"], layer=data["layer"],
            identifiers=identifiers, reference_time=data["referenceTime"])
        return Response({"jobId": job_id, "status": "queued",
                         "messages": len(data["messages"])}, status=status.HTTP_202_ACCEPTED)
