"""``/api/v1/capabilities`` and ``/api/v1/export``: the provider's capabilities and a
tenant's memories as JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.views import APIView

from memories.api.params import bool_param, only_params
from memories.api.serializers.memories import MemorySerializer
from memories.provider import get_provider
from memories.selectors import memory as selectors
from tenants.audit import audit_record
from tenants.context import TenantContext, require_context


class CapabilitiesView(APIView):
    """``GET /api/v1/capabilities``: what the storage provider supports (seed 001)."""

    operation_name = {"get": "capabilities.get"}

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        require_context()
        provider = get_provider()
        return Response({"provider": provider.name, "version": provider.version,
                         **provider.capabilities()})


class ExportView(APIView):
    """``GET /api/v1/export``: every memory of the caller's tenant as JSON lines.

    ``application/x-ndjson``, one memory per line in the shape of ``MemorySerializer``, in id
    (creation) order; soft-deleted memories only with ``?includeDeleted=true``. Streamed: the
    rows are read in chunks, each in a short transaction of its own inside the tenant's
    scope (:func:`memories.selectors.memory.memory_export_chunks`), because the generator runs after
    the request's transaction and scope have ended. Needs the admin role; audited.
    """

    operation_name = {"get": "memory.export"}

    @extend_schema(
        parameters=[OpenApiParameter("includeDeleted", bool,
                                     description="also soft-deleted memories")],
        responses={(200, "application/x-ndjson"): MemorySerializer(many=True)},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        ctx = require_context()
        only_params(request, {"includeDeleted"})
        include_deleted = bool_param(request, "includeDeleted")
        audit_record(ctx, action="memory_export", target_type="tenant", target_id=ctx.tenant_id,
                     details={"includeDeleted": include_deleted})
        response = StreamingHttpResponse(_ndjson(ctx, include_deleted),
                                         content_type="application/x-ndjson")
        response["Content-Disposition"] = 'attachment; filename="memories.ndjson"'
        return response


def _ndjson(ctx: TenantContext, include_deleted: bool) -> Iterator[bytes]:
    for chunk in selectors.memory_export_chunks(ctx, include_deleted=include_deleted):
        yield b"".join(
            json.dumps(row, cls=JSONEncoder, ensure_ascii=False).encode() + b"\n"
            for row in MemorySerializer(chunk, many=True).data
        )
