"""The request transaction: the scope in which ``app.tenant_id`` is set and cleared."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse
from psycopg import pq

from tenants.context import dangerously_cross_tenant, deactivate

# Paths that must answer without a database (liveness, metrics) or stream on their own.
EXEMPT_PREFIXES = ("/health", "/metrics", "/static/")


class RequestTransactionMiddleware:
    """Wraps each request (view and template rendering) in one transaction.

    Authentication sets ``app.tenant_id`` with ``SET LOCAL`` semantics inside it; at the end
    the scope is cleared, a 5xx (or a transaction a failed statement aborted) rolls back,
    and the transaction ends, so nothing can leak to the next request on a pooled
    connection.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(EXEMPT_PREFIXES):
            return self.get_response(request)
        with transaction.atomic():
            try:
                if _is_platform_console(request):
                    with dangerously_cross_tenant("platform admin console"):
                        response = self.get_response(request)
                else:
                    response = self.get_response(request)
                if response.status_code >= 500 or _aborted():
                    transaction.set_rollback(True)
            finally:
                deactivate()
        return response


def _aborted() -> bool:
    """Whether a statement failed in the request's transaction (e.g. one cancelled by the
    statement time limit, answered 422): it can then only roll back."""
    raw = connection.connection
    return raw is not None and raw.info.transaction_status == pq.TransactionStatus.INERROR


def _is_platform_console(request: HttpRequest) -> bool:
    """Superusers in the admin console act across tenants (platform staff)."""
    if not request.path.startswith("/admin/"):
        return False
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_superuser)
