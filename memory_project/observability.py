"""One middleware for what an operator watches: request id, span, metrics, access log.

For every request (``/metrics`` and static files excepted):

- a request id: the incoming ``X-Request-ID`` when it is a sane token (1..128 characters
  of ``A-Z a-z 0-9 . _ : -``), a fresh UUID otherwise; returned as ``X-Request-ID`` and
  attached to every log record of the request (``request_id``);
- a server span named after the operation (``memory.search``, ...; ``HTTP <method>`` for
  non-API pages) with ``memory.operation``, ``memory.tenant``, ``http.*`` attributes and a
  ``db.query`` child span per SQL statement; services add ``memory.result_count`` and
  ``memory.layer_count`` (:func:`memory_project.tracing.annotate`);
- for API operations: ``memory_operations_total``, ``memory_operations_latency_seconds``
  and, when the answer is an error envelope, ``memory_operations_errors_total{code}``;
- one access log line (``memory_project.access``) with method, path, status, duration,
  operation and tenant.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponse
from opentelemetry import trace

from memory_project import metrics, tracing

access_log = logging.getLogger("memory_project.access")

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
UNTRACED_PREFIXES = ("/metrics", "/static/")


def request_id_for(request: HttpRequest) -> str:
    """The caller's ``X-Request-ID`` when sane, else a new UUID (hex, 32 characters)."""
    incoming = request.META.get("HTTP_X_REQUEST_ID", "")
    return incoming if SANE_REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex


def operation_for(view_func: Callable[..., Any], method: str) -> str | None:
    """The operation name of an API view (``memory.search``), from the view's
    ``operation_name`` map when it has one, else ``<basename or class>.<action>``;
    ``None`` for anything that is not a DRF view."""
    cls = getattr(view_func, "cls", None)
    if cls is None:
        return None
    method = method.lower()
    action = (getattr(view_func, "actions", None) or {}).get(method, method)
    explicit = getattr(cls, "operation_name", None)
    if isinstance(explicit, dict) and action in explicit:
        return str(explicit[action])
    base = (getattr(view_func, "initkwargs", None) or {}).get("basename") or cls.__name__
    return f"{base}.{action}"


def error_code(response: HttpResponse) -> str | None:
    """The ``error.code`` of an error envelope response, else ``None``."""
    if response.status_code < 400:
        return None
    data = getattr(response, "data", None)
    if data is None and not getattr(response, "streaming", False) and \
            response.get("Content-Type", "").startswith("application/json"):
        try:
            data = json.loads(response.content)
        except ValueError:
            data = None
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return str(code) if code else f"HTTP_{response.status_code}"


class ObservabilityMiddleware:
    """See the module docstring. Must come first in ``MIDDLEWARE`` so that its span and
    timing cover the request transaction."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def process_view(self, request: HttpRequest, view_func: Callable[..., Any],
                     view_args: Any, view_kwargs: Any) -> None:
        operation = operation_for(view_func, request.method or "GET")
        if operation and request.path.startswith("/api/"):
            request.memory_operation = operation  # type: ignore[attr-defined]
            current = trace.get_current_span()
            current.update_name(operation)
            current.set_attribute("memory.operation", operation)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_for(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        try:
            if request.path.startswith(UNTRACED_PREFIXES):
                response = self.get_response(request)
            else:
                response = self._traced(request, request_id)
            response["X-Request-ID"] = request_id
            self._record(request, response, time.perf_counter() - started)
            return response
        finally:
            REQUEST_ID.reset(token)

    def _traced(self, request: HttpRequest, request_id: str) -> HttpResponse:
        with tracing.tracer.start_as_current_span(
                f"HTTP {request.method}", kind=trace.SpanKind.SERVER, attributes={
                    "http.request.method": request.method or "",
                    "url.path": request.path, "memory.request_id": request_id,
                }) as current, connection.execute_wrapper(tracing.db_span):
            response = self.get_response(request)
            current.set_attribute("http.response.status_code", response.status_code)
            ctx = _tenant_context(request)
            if ctx is not None:
                current.set_attribute("memory.tenant", ctx.tenant_slug)
                current.set_attribute("memory.tenant_id", str(ctx.tenant_id))
            if response.status_code >= 500:
                current.set_status(trace.StatusCode.ERROR)
            return response

    def _record(self, request: HttpRequest, response: HttpResponse, seconds: float) -> None:
        operation = getattr(request, "memory_operation", None)
        code = error_code(response)
        if operation:
            metrics.OPERATIONS.labels(operation=operation).inc()
            metrics.LATENCY.labels(operation=operation).observe(seconds)
            if code:
                metrics.ERRORS.labels(code=code).inc()
        ctx = _tenant_context(request)
        access_log.info("%s %s %s", request.method, request.path, response.status_code, extra={
            "method": request.method, "path": request.path, "status": response.status_code,
            "duration_ms": round(seconds * 1000, 2), "operation": operation,
            "tenant": ctx.tenant_slug if ctx else None, "error_code": code,
        })


def _tenant_context(request: HttpRequest) -> Any:
    """The request's tenant context (DRF's ``request.auth``: a ``tenants.context.
    TenantContext``, read by its ``tenant_slug``) or ``None``."""
    auth = getattr(request, "auth", None)
    return auth if hasattr(auth, "tenant_slug") else None


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` (and ``trace_id`` while a span records) to every log record, and
    keeps query strings out of the log: Django's own request records (``django.request``)
    carry the request, whose text has the query string with the caller's identifiers
    (``?userId=…``); only its method and path are kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if request is not None and hasattr(request, "path"):
            record.request = f"{getattr(request, 'method', '')} {request.path}"
        record.request_id = REQUEST_ID.get()
        span_context = trace.get_current_span().get_span_context()
        record.trace_id = (format(span_context.trace_id, "032x")
                           if span_context.is_valid else None)
        return True
