"""DRF authentication: an API key becomes the request's :class:`TenantContext`."""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

from cachetools import TTLCache
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from memory_project.after_response import after_response
from memory_project.errors import InvalidTenantContext, RateLimited
from tenants.context import TenantContext
from tenants.entry import run_in_scope
from tenants.ratelimit import invalid_key_blocked, invalid_key_hit
from tenants.services import api_key_authenticate, api_key_touch, api_key_use_due


def raw_key_from(request: Request) -> str | None:
    """The key from ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``, else ``None``."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    api_key = request.META.get("HTTP_X_API_KEY", "").strip()
    return api_key or None


#: Addresses that sent an invalid key lately (this process): only their requests consult the
#: shared invalid-key count before the lookup, so a valid key costs no extra Redis call.
_suspects: TTLCache[str, bool] = TTLCache(maxsize=10_000, ttl=120)
_suspects_lock = threading.Lock()


def _touch(ctx: TenantContext) -> None:
    run_in_scope(ctx, api_key_touch, ctx.api_key_id)


class ApiKeyAuthentication(BaseAuthentication):
    """Authenticate with an API key and enter its tenant for the rest of the request.

    No key: returns ``None`` (the permission then answers ``MISSING_TENANT_CONTEXT``).
    Bad key: raises ``INVALID_TENANT_CONTEXT``; the operation never proceeds. An address that
    sent ``RATE_LIMIT_INVALID_KEY_REQUESTS`` bad keys within the rate-limit window gets 429
    ``RATE_LIMITED`` before its keys are even looked up (key guessing is throttled). The key's
    ``last_used_at`` is written once the response has been sent (``after_response``), at most
    once a minute per key and process.
    """

    def authenticate(self, request: Request) -> tuple[TenantContext, TenantContext] | None:
        raw_key = raw_key_from(request)
        if raw_key is None:
            return None
        address = request.META.get("REMOTE_ADDR", "") or "unknown"
        wait = invalid_key_blocked(address) if address in _suspects else None
        if wait is not None:
            raise RateLimited("Too many requests with invalid API keys from this address.",
                              details={"retryAfter": wait})
        try:
            ctx = api_key_authenticate(raw_key, enter=True)
        except InvalidTenantContext:
            with _suspects_lock:
                _suspects[address] = True
            invalid_key_hit(address)
            raise
        if api_key_use_due(ctx.api_key_id):
            after_response(partial(_touch, ctx), even_after_errors=True)
        return ctx, ctx

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="memory"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Describes :class:`ApiKeyAuthentication` in the OpenAPI document (both header forms),
    so that Swagger UI's "Authorize" sends the key."""

    target_class = ApiKeyAuthentication
    name = ["BearerApiKey", "HeaderApiKey"]

    def get_security_requirement(self, auto_schema: Any) -> list[dict[str, list[str]]]:
        return [{"BearerApiKey": []}, {"HeaderApiKey": []}]  # either one (OR)

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [
            {"type": "http", "scheme": "bearer",
             "description": "`Authorization: Bearer <key>` with a tenant API key."},
            {"type": "apiKey", "in": "header", "name": "X-API-Key",
             "description": "`X-API-Key: <key>` with a tenant API key."},
        ]
