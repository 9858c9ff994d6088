"""Domain errors and the one JSON error envelope.

Every error leaves the API as::

    {"error": {"code": str, "message": str, "operation": str, "details": dict, "retryable": bool}}

Codes follow seed 001 ("Error Handling": ``MemoryErrorCode``) plus the few an HTTP API needs
on top (``INVALID_INPUT``, ``NOT_FOUND``, ``VERSION_CONFLICT``, ``PAYLOAD_TOO_LARGE``,
``METHOD_NOT_ALLOWED``, ``WORK_BUDGET_EXCEEDED``, ``INTERNAL_ERROR``, and for backends that fail
``BACKEND_CIRCUIT_OPEN`` (seed 001 "Backend Circuit Breaker") and ``BACKEND_UNAVAILABLE``).
Errors whose ``details`` carry ``retryAfter`` (seconds) answer with a ``Retry-After`` header.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from psycopg.errors import QueryCanceled
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class MemoryServiceError(Exception):
    """Base class of every error a client may see; carries the envelope's fields."""

    code = "INTERNAL_ERROR"
    status = 500
    retryable = False
    default_message = "Internal error."

    def __init__(
        self,
        message: str | None = None,
        *,
        operation: str = "",
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.operation = operation
        self.details = details or {}
        if retryable is not None:
            self.retryable = retryable
        super().__init__(self.message)

    def envelope(self, operation: str = "") -> dict[str, Any]:
        """Return the error as the JSON envelope (see module docstring)."""
        return {
            "error": {
                "code": self.code,
                "message": self.message,
                "operation": self.operation or operation,
                "details": self.details,
                "retryable": self.retryable,
            }
        }


class InvalidLayer(MemoryServiceError):
    """``INVALID_LAYER`` (HTTP 400)."""

    code = "INVALID_LAYER"
    status = 400
    default_message = "Unknown memory layer."


class MissingIdentifier(MemoryServiceError):
    """``MISSING_IDENTIFIER`` (HTTP 400)."""

    code = "MISSING_IDENTIFIER"
    status = 400
    default_message = "A required layer identifier is missing."


class MissingTenantContext(MemoryServiceError):
    """``MISSING_TENANT_CONTEXT`` (HTTP 401)."""

    code = "MISSING_TENANT_CONTEXT"
    status = 401
    default_message = (
        "A tenant context is required: send an API key as 'Authorization: Bearer <key>' "
        "or 'X-API-Key: <key>'."
    )


class InvalidTenantContext(MemoryServiceError):
    """``INVALID_TENANT_CONTEXT`` (HTTP 401)."""

    code = "INVALID_TENANT_CONTEXT"
    status = 401
    default_message = "The API key is unknown, revoked or expired."


class MemoryNotFound(MemoryServiceError):
    """``MEMORY_NOT_FOUND`` (HTTP 404)."""

    code = "MEMORY_NOT_FOUND"
    status = 404
    default_message = "Memory not found."


class NotFound(MemoryServiceError):
    """``NOT_FOUND`` (HTTP 404)."""

    code = "NOT_FOUND"
    status = 404
    default_message = "Not found."


class ContentTooLong(MemoryServiceError):
    """``CONTENT_TOO_LONG`` (HTTP 400)."""

    code = "CONTENT_TOO_LONG"
    status = 400
    default_message = "Content is too long."


class QueryTooLong(MemoryServiceError):
    """``QUERY_TOO_LONG`` (HTTP 400)."""

    code = "QUERY_TOO_LONG"
    status = 400
    default_message = "Query is too long."


class ServiceUnavailable(MemoryServiceError):
    """Base of the errors that answer HTTP 503 and are retryable: a dependency (a backend,
    the embedder, a worker) cannot serve the request now; a later retry may succeed."""

    status = 503
    retryable = True


class EmbeddingFailed(ServiceUnavailable):
    """``EMBEDDING_FAILED`` (HTTP 503, retryable)."""

    code = "EMBEDDING_FAILED"
    default_message = "Embedding generation failed."


class ProviderError(ServiceUnavailable):
    """``PROVIDER_ERROR`` (HTTP 503, retryable)."""

    code = "PROVIDER_ERROR"
    default_message = "The storage provider failed."


class RateLimited(MemoryServiceError):
    """``RATE_LIMITED`` (HTTP 429)."""

    code = "RATE_LIMITED"
    status = 429
    retryable = True
    default_message = "Too many requests."


class Unauthorized(MemoryServiceError):
    """``UNAUTHORIZED`` (HTTP 403)."""

    code = "UNAUTHORIZED"
    status = 403
    default_message = "The credentials do not allow this operation."


class PolicyViolation(MemoryServiceError):
    """``POLICY_VIOLATION`` (HTTP 422)."""

    code = "POLICY_VIOLATION"
    status = 422
    default_message = "The content violates a tenant policy."


class ConfigurationError(MemoryServiceError):
    """``CONFIGURATION_ERROR`` (HTTP 500)."""

    code = "CONFIGURATION_ERROR"
    status = 500
    default_message = "The service is misconfigured."


class InvalidInput(MemoryServiceError):
    """``INVALID_INPUT`` (HTTP 400)."""

    code = "INVALID_INPUT"
    status = 400
    default_message = "The request is invalid."


class VersionConflict(MemoryServiceError):
    """``VERSION_CONFLICT`` (HTTP 409)."""

    code = "VERSION_CONFLICT"
    status = 409
    default_message = "The memory was changed since the given version; fetch it again and retry."


class ReviewAlreadyDecided(MemoryServiceError):
    """``REVIEW_ALREADY_DECIDED`` (HTTP 409): a review item can be decided once."""

    code = "REVIEW_ALREADY_DECIDED"
    status = 409
    default_message = "This review item has already been decided."


class AlreadyExists(MemoryServiceError):
    """``ALREADY_EXISTS`` (HTTP 409): the identifier is in use in the caller's tenant."""

    code = "ALREADY_EXISTS"
    status = 409
    default_message = "An object with this identifier exists."


class PayloadTooLarge(MemoryServiceError):
    """``PAYLOAD_TOO_LARGE`` (HTTP 413)."""

    code = "PAYLOAD_TOO_LARGE"
    status = 413
    default_message = "The request body is too large."


class WorkBudgetExceeded(MemoryServiceError):
    """``WORK_BUDGET_EXCEEDED`` (HTTP 422): the input needs more processing time than one
    request may take (``tenants.heavy_work``); nothing was stored. Send less at once."""

    code = "WORK_BUDGET_EXCEEDED"
    status = 422
    default_message = "This request needs more processing than one request may take."


class MethodNotAllowed(MemoryServiceError):
    """``METHOD_NOT_ALLOWED`` (HTTP 405)."""

    code = "METHOD_NOT_ALLOWED"
    status = 405
    default_message = "Method not allowed."


class BackendCircuitOpen(ServiceUnavailable):
    """``BACKEND_CIRCUIT_OPEN`` (HTTP 503, retryable): a backend failed repeatedly and its
    circuit is open (seed 001 "Backend Circuit Breaker"); ``details.retryAfter`` says when to
    retry."""

    code = "BACKEND_CIRCUIT_OPEN"
    default_message = "A backend is failing; its circuit is open."


class BackendUnavailable(ServiceUnavailable):
    """``BACKEND_UNAVAILABLE`` (HTTP 503, retryable): the database could not be reached or the
    connection broke mid-request; nothing was committed. Retry after ``details.retryAfter``."""

    code = "BACKEND_UNAVAILABLE"
    default_message = "The database is unavailable; retry shortly."


#: Seconds a client should wait after losing the database connection.
DATABASE_RETRY_AFTER_SECONDS = 2


def _database_unavailable() -> BackendUnavailable:
    return BackendUnavailable(details={"backend": "database",
                                       "retryAfter": DATABASE_RETRY_AFTER_SECONDS})


def _database_error(exc: Exception) -> MemoryServiceError:
    """A database error as the envelope: a statement cancelled by the web workers'
    ``statement_timeout`` (``DATABASE_STATEMENT_TIMEOUT_MS``) is 422
    ``WORK_BUDGET_EXCEEDED``; any other, 503 ``BACKEND_UNAVAILABLE``."""
    if isinstance(exc.__cause__, QueryCanceled):
        logger.warning("statement cancelled after its time: %s", exc)
        limit = settings.DATABASE_STATEMENT_TIMEOUT_MS / 1000
        return WorkBudgetExceeded(
            f"This request needs more than {limit:g} s of database time; narrow it (filters "
            "on tags, sourceType or custom equality use an index).",
            details={"limitSeconds": limit})
    logger.warning("database unavailable: %s", exc)
    return _database_unavailable()


def _operation(context: dict[str, Any]) -> str:
    view = context.get("view")
    if view is None:
        return ""
    request = getattr(view, "request", None)
    action = getattr(view, "action", None) or str(getattr(request, "method", "")).lower()
    explicit = getattr(view, "operation_name", None)
    if isinstance(explicit, dict):
        return str(explicit.get(action, ""))
    return f"{getattr(view, 'basename', None) or type(view).__name__}.{action}"


def _from_drf(exc: Exception) -> MemoryServiceError:
    if isinstance(exc, drf.NotAuthenticated):
        return MissingTenantContext()
    if isinstance(exc, drf.AuthenticationFailed):
        return InvalidTenantContext()
    if isinstance(exc, drf.PermissionDenied):
        return Unauthorized(str(exc.detail))
    if isinstance(exc, drf.MethodNotAllowed):
        return MethodNotAllowed(str(exc.detail))
    if isinstance(exc, drf.Throttled):
        return RateLimited(details={"retryAfter": getattr(exc, "wait", None)})
    if isinstance(exc, drf.ParseError):
        return InvalidInput(f"Malformed request body: {exc.detail}")
    if isinstance(exc, drf.UnsupportedMediaType):
        err = InvalidInput(str(exc.detail))
        err.status = 415
        return err
    if isinstance(exc, drf.ValidationError):
        return InvalidInput("Invalid input; see details.", details={"fields": exc.detail})
    if isinstance(exc, (drf.NotFound, Http404)):
        return NotFound()
    if isinstance(exc, drf.APIException):
        err = InvalidInput(str(exc.detail))
        err.status = exc.status_code
        return err
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, (OperationalError, InterfaceError)):
        return _database_error(exc)
    if isinstance(exc, RecursionError):
        # Only input nested thousands of levels deep gets here (the JSON parser, validators).
        return InvalidInput("The request is nested too deeply.")
    return MemoryServiceError()


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF exception handler: every exception becomes the one envelope, never HTML."""
    err = exc if isinstance(exc, MemoryServiceError) else _from_drf(exc)
    if type(err) is MemoryServiceError:
        logger.exception("unhandled error in %s", _operation(context), exc_info=exc)
    headers = _headers(err)
    if err.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="memory"'
    return Response(err.envelope(_operation(context)), status=err.status, headers=headers)


def _headers(err: MemoryServiceError) -> dict[str, str]:
    retry_after = err.details.get("retryAfter") if err.retryable else None
    if retry_after:
        return {"Retry-After": str(max(1, int(float(retry_after) + 0.999)))}
    return {}


def envelope_response(err: MemoryServiceError, operation: str = "") -> JsonResponse:
    """The envelope as a plain Django response, for code outside DRF views (with
    ``Retry-After`` when the error carries ``details.retryAfter``)."""
    return JsonResponse(err.envelope(operation), status=err.status, headers=_headers(err))


#: Where the browser console lives: its unknown URLs and errors answer with its own pages.
CONSOLE_PREFIX = "/console/"


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Unknown URLs answer with the envelope too; under the console, its own 404 page."""
    if request.path.startswith(CONSOLE_PREFIX):
        return render(request, "console/not_found.html", status=404)
    return envelope_response(NotFound(f"No route for {request.path}."))


def handler500(request: HttpRequest) -> HttpResponse:
    """Last resort: an unhandled error still answers with the envelope.

    A lost database connection outside a DRF view (e.g. when the request transaction
    opens) answers 503 ``BACKEND_UNAVAILABLE`` with ``Retry-After``, not 500.
    """
    exc = sys.exc_info()[1]
    if request.path.startswith(CONSOLE_PREFIX):
        page = loader.get_template("console/server_error.html").render(
            {"request_id": getattr(request, "request_id", "")})
        return HttpResponse(page, status=500)
    if isinstance(exc, (OperationalError, InterfaceError)):
        return envelope_response(_database_error(exc))
    if isinstance(exc, MemoryServiceError):
        return envelope_response(exc)
    return envelope_response(MemoryServiceError())
