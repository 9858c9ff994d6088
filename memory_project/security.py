"""Browser-facing security headers the settings alone cannot express.

- :class:`HttpsCookiesMiddleware`: cookies (session, CSRF) carry ``Secure`` on every response
  to a request that came over HTTPS (directly, or through a proxy named by
  ``SECURE_PROXY_SSL_HEADER``), while ``make run`` on plain HTTP keeps working.
- :class:`LoginThrottleBackend`: django-axes' lockout for sign-ins made through a request
  (console and admin forms); a sign-in without one (``manage.py``, a test's ``login()``) has
  no remote address to count and goes to the next backend.
- :class:`NoStoreMiddleware`: API answers and console pages are ``Cache-Control: no-store``:
  they carry tenant data (and, once, a new API key) that no browser or proxy cache may keep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

Handler = Callable[[HttpRequest], HttpResponse]

#: Path prefixes whose answers are never cached.
PRIVATE_PREFIXES = ("/api/v1/", "/console/", "/admin/")


class HttpsCookiesMiddleware:
    """Marks every cookie ``Secure`` when the request is HTTPS."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.is_secure():
            for cookie in response.cookies.values():
                cookie["secure"] = True
        return response


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' backend, for sign-ins that come with a request."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None,
                     password: str | None = None, **kwargs: Any) -> Any:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


class NoStoreMiddleware:
    """``Cache-Control: no-store, private`` on API, console and admin answers."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(PRIVATE_PREFIXES):
            patch_cache_control(response, no_store=True, private=True)
        return response
