"""Governance endpoints: ``/api/v1/policies``, ``/api/v1/reviews``, ``/api/v1/audit``."""

from __future__ import annotations

from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions as drf_exceptions
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from governance import selectors, services
from governance.api.serializers import (
    AuditEntrySerializer,
    AuditListParams,
    DecisionSerializer,
    PolicySerializer,
    ReviewItemSerializer,
    ReviewListParams,
    TrySerializer,
)
from memory_project.errors import InvalidInput, NotFound
from memory_project.openapi import EnvelopedListSchema
from tenants.api.mixins import TenantScopedViewSetMixin
from tenants.context import require_context


class NewestFirst(CursorPagination):
    """Cursor pages of 50 (at most 200), newest first."""

    ordering = "-created_at"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def get_page_size(self, request: Request) -> int:
        """``limit``: 1..200 (default 50).

        Raises:
            InvalidInput: any other value (DRF's own would silently use the default).
        """
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= self.max_page_size:
            raise InvalidInput(f"limit must be an integer within 1..{self.max_page_size}.",
                               details={"parameter": "limit"})
        return size

    def decode_cursor(self, request: Request) -> Any:
        """DRF's cursor, with its position checked: it is compared with ``created_at``, so a
        crafted cursor whose position is not a timestamp would reach the database.

        Raises:
            NotFound: the cursor is not one this API handed out (404, as DRF answers a cursor
                it cannot decode: the page it names does not exist).
        """
        try:
            cursor = super().decode_cursor(request)
            readable = True
        except drf_exceptions.NotFound:
            cursor, readable = None, False
        if not readable or (cursor is not None and cursor.position is not None
                            and parse_datetime(str(cursor.position)) is None):
            raise NotFound("Invalid cursor: pass back a next or previous link's cursor.",
                           details={"parameter": self.cursor_query_param})
        return cursor

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1,
                                       "maximum": self.max_page_size}
        return parameters


class PolicyViewSet(TenantScopedViewSetMixin, viewsets.GenericViewSet):
    """Tenant policies: list, create, retrieve, update (PATCH), delete, and try on sample text."""

    schema = EnvelopedListSchema()

    serializer_class = PolicySerializer
    queryset_selector = staticmethod(selectors.policy_list)
    lookup_value_regex = "[^/]+"
    pagination_class = None
    operation_name = {"list": "policy.list", "create": "policy.create",
                      "retrieve": "policy.get", "partial_update": "policy.update",
                      "destroy": "policy.delete", "try_it": "policy.try"}

    @extend_schema(responses={200: inline_serializer("PolicyList", {
        "policies": PolicySerializer(many=True)})})
    def list(self, request: Request) -> Response:
        return Response({"policies": PolicySerializer(self.get_queryset(), many=True).data})

    @extend_schema(request=dict)
    def create(self, request: Request) -> Response:
        policy = services.policy_create(require_context(), data=request.data)
        return Response(PolicySerializer(policy).data, status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(PolicySerializer(self.get_object()).data)

    @extend_schema(request=dict)
    def partial_update(self, request: Request, pk: str) -> Response:
        ctx = require_context()
        policy = services.policy_update(ctx, policy_id=self.get_object().pk, data=request.data)
        return Response(PolicySerializer(policy).data)

    def destroy(self, request: Request, pk: str) -> Response:
        ctx = require_context()
        services.policy_delete(ctx, policy_id=self.get_object().pk)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=TrySerializer, responses={200: dict})
    @action(detail=False, methods=["post"], url_path="try")
    def try_it(self, request: Request) -> Response:
        """Run an unsaved policy on sample text: what would be denied or redacted."""
        body = TrySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        decision = services.policy_try(require_context(), data=data["policy"], text=data["text"],
                                       layer=data["layer"], metadata=data["metadata"])
        return Response(decision.as_dict())


class ReviewViewSet(TenantScopedViewSetMixin, viewsets.GenericViewSet):
    """The review queue: blocked promotions and policy hits, for reviewers and admins."""

    serializer_class = ReviewItemSerializer
    queryset_selector = staticmethod(selectors.review_list)
    lookup_value_regex = "[^/]+"
    pagination_class = NewestFirst
    operation_name = {"list": "review.list", "retrieve": "review.get",
                      "approve": "review.approve", "reject": "review.reject"}

    @extend_schema(parameters=[ReviewListParams])
    def list(self, request: Request) -> Response:
        params = ReviewListParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        items = selectors.review_list(params.validated_data.get("status"),
                                      params.validated_data.get("kind"))
        page = self.paginate_queryset(items)
        return self.get_paginated_response(ReviewItemSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(ReviewItemSerializer(self.get_object()).data)

    @extend_schema(request=DecisionSerializer, responses={200: ReviewItemSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        """Approve: a blocked promotion is promoted (PII redacted); a policy hit is stored."""
        return self._decide(request, approve=True)

    @extend_schema(request=DecisionSerializer, responses={200: ReviewItemSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        """Reject with a reason."""
        return self._decide(request, approve=False)

    def _decide(self, request: Request, *, approve: bool) -> Response:
        ctx = require_context()
        item = self.get_object()
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        item = services.review_decide(ctx, item_id=item.pk, approve=approve,
                                      reason=body.validated_data["reason"])
        return Response(ReviewItemSerializer(item).data)


class AuditViewSet(TenantScopedViewSetMixin, viewsets.GenericViewSet):
    """The tenant's audit log (read-only, newest first) for admins."""

    serializer_class = AuditEntrySerializer
    queryset_selector = staticmethod(selectors.audit_list)
    pagination_class = NewestFirst
    operation_name = {"list": "audit.list"}

    @extend_schema(parameters=[AuditListParams])
    def list(self, request: Request) -> Any:
        params = AuditListParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        page = self.paginate_queryset(selectors.audit_list(params.validated_data.get("action")))
        return self.get_paginated_response(AuditEntrySerializer(page, many=True).data)
