"""``GET /api/v1/llm/usage``: the tenant's language-model usage in the current period."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from llm.selectors import usage_summary
from tenants.context import require_context


class LlmUsageView(APIView):
    """Tokens and US dollars of the current billing period against the tenant's budget, by
    purpose, model and outcome (``llm.selectors.usage_summary``). Needs the ``admin`` role."""

    operation_name = {"get": "llm.usage"}

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response(usage_summary(require_context()))
